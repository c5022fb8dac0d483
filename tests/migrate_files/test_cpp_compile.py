"""Every C++ fixture, input and output, and the shipped ncclx/compat.h compile with g++ against
the real torch headers: 2.15.0 (C++20) and 2.13.0 (C++17); the header also against 2.14.1, and
without USE_C10D_NCCL (torch.utils.cpp_extension's default, a CPU torch) against 2.13.0.

A fixture whose first line is ``// ncclx-test: no-compile: REASON`` is skipped with that reason;
``// ncclx-test: compile-2.15-only: REASON`` compiles on 2.15 only. The fixtures share one
translation unit per release (tests/cxx.py); the header's extra runs compile it alone. Four g++
runs in all, two at a time, once per module: about 90 s of CPU, then nothing until a file
changes (.cache/cxx/ok).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests import cxx

# One module fixture runs every g++ (tests/cxx.py bounds each at 600 s); a loaded machine
# (7 engineers on 2 cores) stretches 90 s of CPU to minutes of wall time.
pytestmark = [pytest.mark.timeout(1500), pytest.mark.slow]  # g++ over the torch headers: minutes of CPU

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CPP_FIXTURES = FIXTURES / "files" / "cpp"
HARNESS_FIXTURES = FIXTURES / "cxx_harness"
COMPAT_HEADER = (HARNESS_FIXTURES / "compat_header.cpp").resolve()  # only <ncclx/compat.h>
CXX_EXTS = {".cpp", ".cc", ".cxx", ".cu", ".cuh", ".h", ".hpp", ".hh"}
# compat.h without USE_C10D_NCCL (torch.utils.cpp_extension's default), as on a CPU torch.
NO_MACRO = "2.13-no-USE_C10D_NCCL"


def sources() -> list[Path]:
    found = [p for d in (CPP_FIXTURES, HARNESS_FIXTURES) if d.is_dir()
             for p in sorted(d.iterdir()) if p.suffix in CXX_EXTS]
    return [p.resolve() for p in found]


def jobs() -> dict[str, list[Path]]:
    out = {rel: [s for s in sources() if cxx.compiles_on(s, rel)] for rel in ("2.15", "2.13")}
    return out


def params() -> list[object]:
    out: list[object] = []
    for src in sources():
        rel_name = src.relative_to(FIXTURES.resolve())
        for rel in ("2.15", "2.13"):
            mark = cxx.marker(src)
            skip = None
            if not cxx.compiles_on(src, rel):
                assert mark is not None
                skip = f"{mark[0]}: {mark[1]}"
            out.append(pytest.param(rel, src, id=f"{rel}-{rel_name}",
                                    marks=[pytest.mark.skip(reason=skip)] if skip else []))
    out.append(pytest.param("2.14", COMPAT_HEADER, id="2.14-compat_header"))
    out.append(pytest.param(NO_MACRO, COMPAT_HEADER, id=f"{NO_MACRO}-compat_header"))
    return out


@pytest.fixture(scope="module")
def verdicts() -> dict[str, dict[Path, cxx.Verdict] | str]:
    todo: dict[str, tuple[cxx.Toolchain | str, list[Path], str]] = {
        rel: (cxx.toolchain(rel), files, cxx.PRELUDE) for rel, files in jobs().items()}
    todo["2.14"] = (cxx.toolchain("2.14"), [COMPAT_HEADER], "")
    tc = cxx.toolchain("2.13")
    if isinstance(tc, cxx.Toolchain):
        tc = dataclasses.replace(tc, flags=tuple(f for f in tc.flags if f != "-DUSE_C10D_NCCL"))
    todo[NO_MACRO] = (tc, [COMPAT_HEADER], "")
    return cxx.compile_jobs(todo)


@pytest.mark.parametrize(("release", "source"), params())
def test_compiles(verdicts: dict[str, dict[Path, cxx.Verdict] | str], release: str, source: Path) -> None:
    result = verdicts[release]
    if isinstance(result, str):
        pytest.skip(f"cannot compile against torch {release}: {result}")
    verdict = result[source]
    assert verdict.ok, f"{source} does not compile against torch {release}:\n{verdict.output[-6000:]}"
    # A case that compiles only alone cost a g++ run of its own and one more of its unit (20-30 s
    # of CPU each): the shared unit must take it (tests/cxx.py, cases that reopen a namespace).
    assert not verdict.alone, f"{source} compiles against torch {release} alone but not in the shared unit"


def test_every_fixture_marker_is_known() -> None:
    """A misspelt marker would silently compile (or skip) the wrong thing."""
    for src in sources():
        first = src.read_text(encoding="utf-8").split("\n", 1)[0]
        if first.startswith("// ncclx-test:"):
            assert cxx.marker(src) is not None, f"{src}: unknown marker {first!r}"
            assert cxx.marker(src)[1], f"{src}: the marker gives no reason"  # type: ignore[index]


def test_harness_blames_only_the_broken_case(tmp_path: Path) -> None:
    """One unit for many cases, without torch: a broken case and one whose header is missing (a
    fatal error that stops g++) fail alone; the cases around them still pass, none compiled
    alone (a case that reopens ``namespace std`` too); a case's #define does not leak into the
    next one."""
    if cxx.shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    light = cxx.Toolchain("light", "none", "", ("-std=c++17", "-fsyntax-only", "-w"))
    cases = {
        "a_defines.cpp": "#include <vector>\n#define VALUE 1\nstd::vector<int> v{VALUE};\n",
        "b_broken.cpp": "int ok = 1;\nint broken = ;\n",
        "c_uses_name.cpp": "int VALUE = 2;\n",
        "d_missing.cpp": "#include <no_such_header_ncclx.h>\nint x;\n",
        "e_fine.cpp": "#include <string>\nstd::string s = \"x\";\n",
        "f_reopens_std.cpp": "#include <string>\nnamespace std {}\nstd::string reopened;\n",
    }
    paths = []
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    got = cxx.compile_sources(light, paths, prelude="")
    assert {p.name for p, v in got.items() if not v.ok} == {"b_broken.cpp", "d_missing.cpp"}
    assert "b_broken.cpp:2:" in got[tmp_path / "b_broken.cpp"].output
    assert "no_such_header_ncclx.h" in got[tmp_path / "d_missing.cpp"].output
    assert not any(v.alone for v in got.values() if v.ok)
    # Passing cases are remembered: a second run compiles only the failing ones.
    again = cxx.compile_sources(light, paths, prelude="")
    assert all(again[p].alone for p in paths if not again[p].ok)
