#!/usr/bin/env bash
# The whole test suite, from a fresh clone: sets up the venvs, then runs
#   1. mypy --strict on src/ and ruff,
#   2. pytest on torch 2.15.0 (everything; `gpu` tests skip without CUDA),
#   3. the tests marked `torch` again on torch 2.13.0 and on torch 2.14.1,
# and ends with one line totalling the three pytest runs. The three runs go at once, each over
# pytest-xdist workers (worksteal: a few tests take far longer than the rest), keeping both
# cores busy: the whole command is CPU-bound, so its time is the CPU its tests cost. 2.15's
# output streams; the other two print when done. Each run lists its 20 slowest tests and its
# 20 costliest in CPU (tests/conftest.py). Extra arguments go to the 2.15 run.
#
#   scripts/test.sh --quick   the inner loop: torch 2.15 only, without the `slow` tests (they
#                             start torch processes), the `torch` ones (each release runs them)
#                             and the `browser` ones; no mypy/ruff.
#
# NCCLX_TEST_WORKERS (default 3) sets the 2.15 run's workers; the 2.13/2.14 runs get 2 each.
# NCCLX_SKIP_BOOTSTRAP=1 skips the venv set-up (a checkout whose venvs are links to another's).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = --quick ]; then quick=1; shift; fi
if [ -z "${NCCLX_SKIP_BOOTSTRAP:-}" ]; then
  if [ "$quick" = 1 ]; then scripts/bootstrap.sh main; else scripts/bootstrap.sh all; fi
fi
# Byte-code for the project's own modules, once: the suite starts hundreds of `ncclx` and
# worker processes, and where PYTHONDONTWRITEBYTECODE is set (as on our machines) each one
# compiled every module again (0.75 against 0.58 s for a one-file `ncclx migrate`). The
# fixtures hold Python that must not compile.
.venv/bin/python -m compileall -q -x '/fixtures/' src tests >/dev/null || true
export NCCLX_TEST_PY213="$PWD/.venv-2.13/bin/python"
export NCCLX_TEST_PY214="$PWD/.venv-2.14/bin/python"
export NCCLX_TEST_PY_NOTORCH="$PWD/.venv-notorch/bin/python"
workers=${NCCLX_TEST_WORKERS:-3}
xdist=(--dist worksteal --durations=20)

if [ "$quick" = 1 ]; then
  # 3 workers: the quick tests wait on `ncclx` subprocesses more than they compute.
  exec .venv/bin/python -m pytest -q "${xdist[@]}" -n "$workers" -m "not slow and not torch and not browser" "$@"
fi

status=0
run() { echo "+ $*" >&2; "$@" || status=$?; }
junit=$(mktemp -d)
# On an interrupt, the background runs stop too.
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$junit"' EXIT

# The older releases start first, in the background, logging to files.
other() {  # other RELEASE &: the `torch` tests on .venv-RELEASE (exec: $! is pytest itself)
  local tag=${1/./}
  exec ".venv-$1/bin/python" -m pytest -q -m torch -p no:cacheprovider "${xdist[@]}" -n 2 \
    --junitxml="$junit/t$tag.xml" >"$junit/t$tag.log" 2>&1
}
other 2.13 & pid213=$!
other 2.14 & pid214=$!

run .venv/bin/python -m mypy src
lint_paths=(src tests); [ -d benchmarks ] && lint_paths+=(benchmarks)
run .venv/bin/python -m ruff check "${lint_paths[@]}"
# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
run .venv/bin/python -m pytest -q "${xdist[@]}" -n "$workers" --junitxml="$junit/t215.xml" "$@"
for release in 2.13 2.14; do
  pid=pid${release/./}
  rc=0; wait "${!pid}" || rc=$?
  echo "+ .venv-$release/bin/python -m pytest -q -m torch (exit $rc):" >&2
  cat "$junit/t${release/./}.log"
  [ "$rc" = 0 ] || status=$rc
done
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
