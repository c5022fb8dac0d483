#!/usr/bin/env bash
# The whole test suite, from a fresh clone: sets up the venvs, then runs
#   1. mypy --strict on src/ and ruff,
#   2. pytest on torch 2.15.0 (everything; `gpu` tests skip without CUDA),
#   3. the tests marked `torch` again on torch 2.13.0 and on torch 2.14.1,
# and ends with one line totalling the three pytest runs. Extra arguments go to the first pytest run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh all
export NCCLX_TEST_PY213="$PWD/.venv-2.13/bin/python"
export NCCLX_TEST_PY214="$PWD/.venv-2.14/bin/python"
export NCCLX_TEST_PY_NOTORCH="$PWD/.venv-notorch/bin/python"
status=0
run() { echo "+ $*" >&2; "$@" || status=$?; }
junit=$(mktemp -d)

run .venv/bin/python -m mypy src
lint_paths=(src tests); [ -d benchmarks ] && lint_paths+=(benchmarks)
run .venv/bin/python -m ruff check "${lint_paths[@]}"
# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
run .venv/bin/python -m pytest -q --junitxml="$junit/t215.xml" "$@"
run .venv-2.13/bin/python -m pytest -q -m torch -p no:cacheprovider --junitxml="$junit/t213.xml"
run .venv-2.14/bin/python -m pytest -q -m torch -p no:cacheprovider --junitxml="$junit/t214.xml"
.venv/bin/python - "$junit"/*.xml <<'PY'
import sys, xml.etree.ElementTree as ET
t = f = s = 0
for path in sys.argv[1:]:
    for suite in ET.parse(path).getroot().iter("testsuite"):
        n, fl, er, sk = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
        t += n; f += fl + er; s += sk
print(f"total: {t - f - s} passed, {f} failed, {s} skipped")
PY
exit $status
