#!/usr/bin/env bash
# The main job on the shipped example: a preflight check, then the codemod report
# and the diff it would apply to examples/legacy-trainer (nothing is written).
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh main >&2 || exit 2
NCCLX=.venv/bin/ncclx
echo "== ncclx doctor (this machine) =="
"$NCCLX" doctor
echo
echo "== ncclx migrate examples/legacy-trainer (report) =="
"$NCCLX" migrate examples/legacy-trainer
echo
echo "== ncclx migrate --diff examples/legacy-trainer (what --write would apply) =="
"$NCCLX" migrate --diff examples/legacy-trainer
echo
echo "demo done (exit codes above are the tools' own: 1 means findings were reported)"
