#!/usr/bin/env bash
# Set up what the project needs on a fresh machine (idempotent), as much as asked:
#   demo  (scripts/demo.sh)        .venv: torch 2.15.0 (CUDA build from PyPI; runs on CPU) + ncclx-migrate
#   main  (scripts/test.sh --quick) the above + the test tools (the `test` extra), and
#         .venv-notorch  ncclx-migrate without torch (the codemod and `doctor --level static` need none)
#         .whl/nvidia_cuda_crt-13.2*.whl  the CUDA crt/ headers the C++ compile tests need (tests/cxx.py)
#   all   (scripts/test.sh)         the above, and
#         .venv-2.13     torch 2.13.0 (CPU wheel; local file where the machine has one) + ncclx-migrate
#         .venv-2.14     torch 2.14.1 (the nccl2 opt-in release; local file where the machine has one) + ncclx-migrate
#         /usr/bin/chromium  Debian's chromium for the browser tests, installed when run as root
#         slurm-wlm, munge   Debian's Slurm for the `slurm` tests (scripts/slurm-local.sh), as root
# Usage: scripts/bootstrap.sh [demo|main|all]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
what=${1:-all}

# .ncclx-ready-HASH: the venv has the package and the test tools; .ncclx-demo-HASH: the package
# alone (what scripts/demo.sh runs). HASH follows pyproject.toml, so a changed one reinstalls.
hash=$(sha1sum pyproject.toml | cut -c1-12)
tools=1; [ "$what" = demo ] && tools=0

mkvenv() {  # mkvenv DIR TORCH_SPEC [pip env...]
  local dir=$1 spec=$2; shift 2
  local ready="$dir/.ncclx-ready-$hash" demo="$dir/.ncclx-demo-$hash"
  [ -f "$ready" ] && return 0
  [ "$tools" = 0 ] && [ -f "$demo" ] && return 0
  if [ ! -f "$demo" ]; then
    echo "bootstrap: creating $dir ($spec)" >&2
    [ -x "$dir/bin/python" ] || "$PY" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
    # Explicit returns: called as `mkvenv A || mkvenv B`, where bash ignores set -e.
    if [ "$spec" != none ]; then
      env "$@" "$dir/bin/python" -m pip install -q "$spec" numpy || return 1
    fi
    "$dir/bin/python" -m pip install -q -e . || return 1
    touch "$demo"
  fi
  [ "$tools" = 0 ] && return 0
  echo "bootstrap: adding the test tools to $dir" >&2
  "$dir/bin/python" -m pip install -q -e ".[test]" || return 1
  touch "$ready"
}

# The browser tests (-m browser) drive Debian's chromium through Playwright (from PyPI, in the
# `test` extra); Playwright never downloads a browser of its own here (no network for that).
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
if [ "$what" = all ] && [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing chromium (browser tests)" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
      || echo "bootstrap: could not install chromium: the browser tests will skip (and fail in CI)" >&2
  else
    echo "bootstrap: /usr/bin/chromium is missing and this is not root: the browser tests will skip" \
      "(as root: apt-get install chromium)" >&2
  fi
fi

# The `slurm` tests run a one-node Slurm (scripts/slurm-local.sh) from Debian's packages.
if [ "$what" = all ] && ! command -v slurmctld >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing slurm-wlm and munge (slurm tests)" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge; } >/dev/null 2>&1 \
      || echo "bootstrap: could not install slurm-wlm/munge: the slurm tests will skip (and fail in CI)" >&2
  else
    echo "bootstrap: slurm-wlm is missing and this is not root: the slurm tests will skip" \
      "(as root: apt-get install slurm-wlm munge)" >&2
  fi
fi

# The C++ compile tests (tests/cxx.py) compile against the CUDA headers of torch's NVIDIA wheels,
# whose host_config.h forwards to crt/ headers that only PyPI's header-only nvidia-cuda-crt
# wheel has; the tests unzip it. Without it they skip with the reason.
crt_wheel() { ls .whl/nvidia_cuda_crt-13.2*.whl >/dev/null 2>&1; }
if [ "$what" != demo ] && ! crt_wheel; then
  mkdir -p .whl
  crt_spec='nvidia-cuda-crt>=13.2,<13.3'
  "$PY" -m pip download -q --no-deps "$crt_spec" -d .whl >/dev/null 2>&1 \
    || PIP_CONFIG_FILE=/dev/null "$PY" -m pip download -q --no-deps "$crt_spec" -d .whl >/dev/null 2>&1 \
    || echo "bootstrap: could not download $crt_spec: the C++ compile tests will skip" >&2
fi

# The machine's pip config may cap torch at 2.14.1: 2.15.0 comes from PyPI without it.
mkvenv .venv torch==2.15.0 PIP_CONFIG_FILE=/dev/null
[ "$what" = demo ] && exit 0
mkvenv .venv-notorch none
if [ "$what" = all ]; then
  # 2.13.0: the CPU wheel on local disk where present, else PyPI.
  mkvenv .venv-2.13 torch==2.13.0 || mkvenv .venv-2.13 torch==2.13.0 PIP_CONFIG_FILE=/dev/null
  # 2.14.1: the local file the machine's pip config points at where present, else PyPI.
  mkvenv .venv-2.14 torch==2.14.1 || mkvenv .venv-2.14 torch==2.14.1 PIP_CONFIG_FILE=/dev/null
fi
