#!/usr/bin/env bash
# The main job on the shipped example: a preflight check, then the codemod's report on
# examples/legacy-trainer and the diff that --write would apply (nothing is written).
# After each command: its exit code and what that code means.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh demo >&2 || exit 2  # torch 2.15 and the package: nothing the demo does not run
NCCLX=$PWD/.venv/bin/ncclx

exited() {  # TOOL RC MEANING-OF-0 MEANING-OF-1 MEANING-OF-2
    local rc=$2
    local meaning=${*:3+rc:1}
    echo "-> $1 exit $rc: ${meaning:-unexpected}"
}

echo "== ncclx doctor (this machine) =="
"$NCCLX" doctor
exited "ncclx doctor" $? "no check failed (warnings allowed)" "a check failed or errored" "usage error"
echo
# The codemod runs in the project, as a user runs it there: paths are the project's own.
cd examples/legacy-trainer || exit 2
echo "== ncclx migrate, in examples/legacy-trainer (the report) =="
"$NCCLX" migrate
exited "ncclx migrate" $? "no finding" "findings reported" "a file could not be read or parsed, or a usage error"
echo
echo "== ncclx migrate --diff (what --write would apply) =="
# stdout is the diff; stderr repeats the report for the text --write would leave: the findings
# are listed above, so only its summary (and any error) is shown here.
err=$(mktemp)
trap 'rm -f "$err"' EXIT
"$NCCLX" migrate --diff -q 2>"$err"
rc=$?
grep -Ev '^[^ ]+:(cell [0-9]+:)?[0-9]+:[0-9]+: NCX[0-9]+ ' "$err" >&2
exited "ncclx migrate --diff" $rc "no finding" "findings reported (the diff fixes some)" \
    "a file could not be read or parsed, or a usage error"
