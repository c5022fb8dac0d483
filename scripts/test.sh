#!/usr/bin/env bash
# The whole test suite, from a fresh clone: sets up the venvs, then runs
#   1. pytest on torch 2.15.0 (everything; `gpu` tests skip without CUDA),
#   2. the tests marked `torch` again on torch 2.13.0,
#   3. mypy --strict on src/ and ruff.
# Extra arguments go to the first pytest run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh all
export NCCLX_TEST_PY213="$PWD/.venv-2.13/bin/python"
export NCCLX_TEST_PY_NOTORCH="$PWD/.venv-notorch/bin/python"
status=0
run() { echo "+ $*" >&2; "$@" || status=$?; }

# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
run .venv/bin/python -m pytest -q "$@"
run .venv-2.13/bin/python -m pytest -q -m torch -p no:cacheprovider
run .venv/bin/python -m mypy src
lint_paths=(src tests); [ -d benchmarks ] && lint_paths+=(benchmarks)
run .venv/bin/python -m ruff check "${lint_paths[@]}"
exit $status
