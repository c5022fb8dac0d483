"""compiled-extensions on real shared objects, put on PYTHONPATH of the real `ncclx doctor
--level static`: stubs built with gcc whose undefined symbols are the ones an extension compiled
against torch's headers keeps (for the hostile-file and reporting cases), and real extensions
built with g++ against the torch 2.15 headers and linked with libtorch
(tests/fixtures/cxx_harness/doctor_shapes.cpp: one translation unit, one .so per shape, kept in
.cache/cxx/doctor-so/ under a hash of the compiler, torch, source and shipped header)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from tests import cxx
from tests.conftest import _made_once, run_ncclx

from .conftest import check, doctor_json

LEGACY_TYPEINFO = "_ZTIN4c10d16ProcessGroupNCCLE"
LEGACY_MEMBER = "_ZN4c10d16ProcessGroupNCCL10getCommPtrEv"
LEGACY_OPTIONS = "_ZN4c10d16ProcessGroupNCCL7Options6createEb"
NCCL2_TYPEINFO = "_ZTIN4c10d5nccl216ProcessGroupNCCLE"
NCCL2_MEMBER = "_ZNK4c10d5nccl216ProcessGroupNCCL10getCommPtrEv"
BACKEND_TYPEINFO = "_ZTIN4c10d7BackendE"

# package folder -> the symbols its _C.so leaves undefined
STUBS = {
    "legacy_ti": [LEGACY_TYPEINFO],
    "legacy_members": [LEGACY_MEMBER, LEGACY_OPTIONS],
    "both": [LEGACY_TYPEINFO, LEGACY_MEMBER, NCCL2_TYPEINFO, NCCL2_MEMBER],
    "neither": [BACKEND_TYPEINFO],
    "torch/lib": [LEGACY_TYPEINFO],  # torch's own libraries are not findings
    "nvidia/nccl/lib": [LEGACY_TYPEINFO],
}


def _stub(cc: str, path: Path, symbols: list[str]) -> None:
    src = path.with_suffix(".c")
    src.write_text("".join(f"extern char {s}[];\nvoid* ref{i}(void) {{ return {s}; }}\n"
                           for i, s in enumerate(symbols)))
    # Undefined symbols are allowed in a shared object by default (no -z defs).
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(path), str(src)], check=True, capture_output=True)
    src.unlink()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sys.path folder of stub extensions, one gcc build per module."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (gcc) to build the stub shared objects")
    root = tmp_path_factory.mktemp("site")
    for pkg, symbols in STUBS.items():
        (root / pkg).mkdir(parents=True)
        name = "libfake.so" if "/" in pkg else "_C.cpython-311-x86_64-linux-gnu.so"
        _stub(cc, root / pkg / name, symbols)
    # legacy_ti was installed by pip: its RECORD names the distribution.
    info = root / "legacy_ti_dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: legacy-ti-dist\nVersion: 1.0\n")
    (info / "RECORD").write_text("legacy_ti/_C.cpython-311-x86_64-linux-gnu.so,,\n")
    # Hostile neighbours: a corrupt ELF (a truncated real one), a FIFO, a symlink loop, text.
    (root / "corrupt").mkdir()
    whole = (root / "both" / "_C.cpython-311-x86_64-linux-gnu.so").read_bytes()
    (root / "corrupt" / "_C.so").write_bytes(whole[:200] + b"\xff" * 64)
    os.mkfifo(root / "corrupt" / "fifo.so")
    os.symlink("loop.so", root / "corrupt" / "loop.so")
    os.symlink(".", root / "corrupt" / "again")  # a folder loop
    (root / "corrupt" / "libtext.so").write_text("/* GNU ld script */\nGROUP ( libc.so.6 )\n")
    return root


def _run(site: Path, *args: str, **env: str) -> dict[str, Any]:
    pythonpath = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return doctor_json("--level", "static", *args, env={"PYTHONPATH": pythonpath, **env}, timeout=60)


def test_nccl2_default_fails_naming_each_legacy_only_package(site: Path) -> None:
    report = _run(site)
    c = check(report, "compiled-extensions")
    assert c["status"] == "fail" and report["_rc"] == 1
    d = c["details"]
    assert d["nccl_builds"] == "nccl2"
    assert d["legacy_only_packages"] == ["legacy-ti-dist", "legacy_members"]
    by_pkg = {x["package"]: x for x in d["legacy_only"]}
    assert by_pkg["legacy-ti-dist"]["symbol"] == LEGACY_TYPEINFO
    assert by_pkg["legacy_members"]["symbol"] in (LEGACY_MEMBER, LEGACY_OPTIONS)
    assert by_pkg["legacy_members"]["legacy_symbols"] == 2
    assert d["both_classes"] == [str(site / "both" / "_C.cpython-311-x86_64-linux-gnu.so")]
    listed = json.dumps(d)
    for absent in ("neither", "torch/lib", "nvidia/nccl", "fifo.so", "loop.so", "libtext.so"):
        assert absent not in listed, absent
    ours = [u for u in d["unreadable"] if u["path"].startswith(str(site))]
    assert [u["path"] for u in ours] == [str(site / "corrupt" / "_C.so")]
    assert ours[0]["reason"].startswith(("corrupt", "not a readable ELF")), ours
    assert "legacy-ti-dist, legacy_members" in c["message"] and LEGACY_TYPEINFO in c["message"]
    assert c["remedy"].startswith("upgrade legacy-ti-dist to a build that knows c10d::nccl2::ProcessGroupNCCL")
    assert "roll back (TORCH_DIST_USE_NCCL2=0" in c["remedy"]


def test_rollback_warns_and_says_keep_it(site: Path) -> None:
    c = check(_run(site, TORCH_DIST_USE_NCCL2="0"), "compiled-extensions")
    assert c["status"] == "warn"
    assert c["details"]["nccl_builds"] == "nccl-legacy"
    assert "work while \"nccl\" builds the legacy class" in c["message"]
    assert "keep the legacy class" in c["remedy"]


def test_no_rollback_on_a_torch_without_it(site: Path) -> None:
    c = check(_run(site, "--target-torch", "2.16"), "compiled-extensions")
    assert c["status"] == "fail"
    assert "this torch has no legacy rollback" in c["remedy"] and "TORCH_DIST_USE_NCCL2" not in c["remedy"]


def test_text_output_names_package_file_symbol_and_fix(site: Path) -> None:
    pythonpath = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    proc = run_ncclx("doctor", "--level", "static", "--check", "compiled-extensions",
                     env={"PYTHONPATH": pythonpath, "COLUMNS": "200"}, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    out = proc.stdout
    assert "FAIL  compiled-extensions" in out
    assert (f"- legacy-ti-dist: {site}/legacy_ti/_C.cpython-311-x86_64-linux-gnu.so references the legacy "
            f"ProcessGroupNCCL only ({LEGACY_TYPEINFO})") in out
    assert "fix: upgrade legacy_members to a build that knows c10d::nccl2::ProcessGroupNCCL" in out


def test_clean_path_is_ok() -> None:
    c = check(doctor_json("--level", "static", timeout=60), "compiled-extensions")
    assert c["status"] == "ok", c
    assert c["details"]["shared_objects"] > 0


def test_merge_compares_it_across_reports(site: Path, tmp_path: Path) -> None:
    paths = []
    for name, report in (("node-a", _run(site)), ("node-b", doctor_json("--level", "static", timeout=60)),
                         ("node-c", doctor_json("--level", "static", timeout=60))):
        report.pop("_rc")
        (tmp_path / f"{name}.json").write_text(json.dumps(report))
        paths.append(str(tmp_path / f"{name}.json"))
    merged = json.loads(run_ncclx("doctor", "merge", *paths, "--json").stdout)
    c = check(merged, "compiled-extensions")
    assert c["status"] == "fail"
    assert "node-a.json" in c["message"]
    cc = check(merged, "cluster-consistency")
    assert "(node-a.json) has extensions built for legacy only: ['legacy-ti-dist', 'legacy_members']" in cc["message"]


def test_hostile_files_give_a_reason_not_an_exception(site: Path) -> None:
    from ncclx_migrate._doctor._elfsyms import read_refs

    corrupt = site / "corrupt"
    assert read_refs(str(corrupt / "fifo.so")) == "not a regular file"  # and no hang
    assert str(read_refs(str(corrupt / "loop.so"))).startswith("cannot open it")
    assert read_refs(str(corrupt / "libtext.so")) == "not an ELF file"
    assert str(read_refs(str(corrupt / "_C.so"))).startswith(("corrupt", "not a readable ELF"))
    assert read_refs(str(site / "both" / "_C.cpython-311-x86_64-linux-gnu.so")).nccl2 == [  # type: ignore[union-attr]
        NCCL2_TYPEINFO, NCCL2_MEMBER]


def test_walk_is_bounded(tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ncclx_migrate._doctor import _sofiles

    deep = tmp_path.joinpath(*["d"] * (_sofiles.MAX_DEPTH + 1))
    deep.mkdir(parents=True)
    shutil.copy(site / "neither" / "_C.cpython-311-x86_64-linux-gnu.so", deep / "_deep.so")
    shutil.copy(site / "neither" / "_C.cpython-311-x86_64-linux-gnu.so", tmp_path / "d" / "_shallow.so")
    found = _sofiles.walk([str(tmp_path)])
    assert [Path(f.path).name for f in found.files] == ["_shallow.so"] and not found.stopped
    monkeypatch.setattr(_sofiles, "MAX_ENTRIES", 3)
    assert _sofiles.walk([str(tmp_path)]).stopped.startswith("stopped after 3 directory entries")


def test_a_file_reachable_from_two_entries_is_named_as_imported(tmp_path: Path, site: Path) -> None:
    """cwd (sys.path's "") above a PYTHONPATH folder: the package is the import name, once."""
    from ncclx_migrate._doctor import _sofiles

    pkg = tmp_path / "checkout" / "src" / "myext"
    pkg.mkdir(parents=True)
    shutil.copy(site / "legacy_members" / "_C.cpython-311-x86_64-linux-gnu.so", pkg / "_C.so")
    found = _sofiles.walk([str(tmp_path / "checkout"), str(tmp_path / "checkout" / "src")])
    assert [_sofiles.owner(f) for f in found.files] == ["myext"]


# Real extensions: module -> (package folder, what the doctor must say of it).
SHAPES_SOURCE = cxx.ROOT / "tests" / "fixtures" / "cxx_harness" / "doctor_shapes.cpp"
SHAPES = ("subclass", "commptr", "member", "binding", "selfbuilt", "inline", "both", "compat", "neither")
SO_SUFFIX = ".cpython-311-x86_64-linux-gnu.so"
LEGACY_CTOR = ("_ZN4c10d16ProcessGroupNCCLC1EN3c1013intrusive_ptrINS_5StoreENS1_6detail34intrusive_target_"
               "default_null_typeIS3_EEEEiiNS2_INS0_7OptionsENS5_IS8_EEEE")
GET_NCCL_COMM = ("_ZN4c10d16ProcessGroupNCCL11getNCCLCommERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE")
SPLIT_COUNTER = "_ZNK4c10d16ProcessGroupNCCL19getCommSplitCounterEv"
# One more module from the same object: every legacy-only shape with default visibility (its
# functions and the weak template instances over the legacy class exported), the modules and
# helpers that name nccl2 hidden and collected.
ALL_LEGACY = "legacy_all"
ALL_LEGACY_MAP = ("{ local: PyInit_shape_both; PyInit_shape_compat; PyInit_shape_neither; *shape_both*; "
                  "*shape_compat*; *shape_neither*; *5nccl2*; *5ncclx*; };\n")


def _build_shapes(out: Path) -> str:
    """doctor_shapes.cpp compiled once (-ffunction-sections), then one .so per module linked
    with --gc-sections and a version script exporting only its PyInit_: each keeps only the
    torch symbols its own code needs. "" when built, else the reason to skip."""
    flags = cxx.extension_flags()
    if isinstance(flags, str):
        return flags
    link = [f for f in flags if f.startswith(("-L", "-l", "-Wl,"))]
    compile_flags = [f for f in flags if f != "-shared" and f not in link]
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    obj = tmp / "shapes.o"
    proc = subprocess.run(["g++", *compile_flags, "-ffunction-sections", "-fdata-sections", "-c",
                           str(SHAPES_SOURCE), "-o", str(obj)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise AssertionError(f"building {SHAPES_SOURCE} failed:\n{proc.stderr[-6000:]}")
    for shape in SHAPES:
        script = tmp / f"{shape}.map"
        script.write_text(f"{{ global: PyInit_shape_{shape}; local: *; }};\n")
        proc = subprocess.run(["g++", "-shared", "-Wl,--gc-sections", f"-Wl,--version-script={script}", str(obj),
                               "-o", str(tmp / f"shape_{shape}{SO_SUFFIX}"), *link],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise AssertionError(f"linking shape_{shape} failed:\n{proc.stderr[-4000:]}")
        script.unlink()
    script = tmp / f"{ALL_LEGACY}.map"
    script.write_text(ALL_LEGACY_MAP)
    proc = subprocess.run(["g++", "-shared", "-Wl,--gc-sections", f"-Wl,--version-script={script}", str(obj),
                           "-o", str(tmp / f"shape_{ALL_LEGACY}{SO_SUFFIX}"), *link],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"linking shape_{ALL_LEGACY} failed:\n{proc.stderr[-4000:]}")
    script.unlink()
    obj.unlink()
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return ""


@pytest.fixture(scope="module")
def real_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sys.path folder holding each shape as its own package (ext_<shape>/shape_<shape>.so)."""
    if not shutil.which("g++"):
        pytest.skip("g++ is not installed")
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        pytest.skip("torch is not installed")
    key = hashlib.sha256("\0".join([
        cxx._gxx_version(), torch_version, sys.version, SHAPES_SOURCE.read_text(), cxx._shipped_header(),
        " ".join(SHAPES), SO_SUFFIX, "gc-sections+version-script", ALL_LEGACY_MAP,
    ]).encode()).hexdigest()[:24]
    built = cxx.CACHE / "doctor-so" / key
    built.parent.mkdir(parents=True, exist_ok=True)
    reason = _made_once(built.with_suffix(".json"), lambda: _build_shapes(built))
    if reason:
        pytest.skip(f"cannot build a torch extension here: {reason}")
    root = tmp_path_factory.mktemp("real_site")
    for shape in (*SHAPES, ALL_LEGACY):
        (root / f"ext_{shape}").mkdir()
        shutil.copy(built / f"shape_{shape}{SO_SUFFIX}", root / f"ext_{shape}")  # the walk follows no link
    return root


def _real(site: Path, *args: str) -> dict[str, Any]:
    return check(_run(site, *args), "compiled-extensions")


@pytest.mark.slow  # g++ builds the shapes once (about 25 s of CPU, then cached) and imports torch
@pytest.mark.torch
def test_real_extensions_each_named_with_its_symbol(real_site: Path) -> None:
    c = _real(real_site)
    d = c["details"]
    assert c["status"] == "fail" and d["nccl_builds"] == "nccl2"
    ours = {x["package"]: x for x in d["legacy_only"] if x["path"].startswith(str(real_site))}
    # Each legacy shape alone is found, by the torch symbol its own code needs.
    assert sorted(ours) == ["ext_binding", "ext_commptr", f"ext_{ALL_LEGACY}", "ext_member", "ext_selfbuilt",
                            "ext_subclass"]
    assert ours["ext_subclass"]["symbol"] == GET_NCCL_COMM  # a protected member, through the subclass
    assert ours["ext_commptr"]["symbol"] in (LEGACY_TYPEINFO, LEGACY_MEMBER)
    assert ours["ext_commptr"]["legacy_symbols"] == 2  # the cast's typeinfo and getCommPtr
    assert ours["ext_member"]["symbol"] == SPLIT_COUNTER  # a static_cast needs no typeinfo
    assert ours["ext_binding"]["symbol"] == LEGACY_TYPEINFO  # pybind11's type check
    assert ours["ext_selfbuilt"]["symbol"] == LEGACY_CTOR and ours["ext_selfbuilt"]["builds_own"]
    assert not any(x["builds_own"] for p, x in ours.items() if p != "ext_selfbuilt")
    assert d["builds_own_legacy_packages"] == ["ext_selfbuilt"]
    # Default visibility exports dozens of weak instances (c10::intrusive_ptr<c10d::ProcessGroupNCCL>
    # members...); the evidence named is still an import from torch (undefined symbols come first).
    every = ours[f"ext_{ALL_LEGACY}"]
    assert every["legacy_symbols"] > 20 and not every["builds_own"]
    assert every["symbol"] in (LEGACY_TYPEINFO, LEGACY_MEMBER, GET_NCCL_COMM, SPLIT_COUNTER, LEGACY_CTOR,
                               "_ZN4c10d16ProcessGroupNCCL7OptionsC1Eb"), every["symbol"]
    # Silent on both casts and on <ncclx/compat.h>: listed as handling both classes.
    both = sorted(Path(p).name for p in d["both_classes"] if p.startswith(str(real_site)))
    assert both == [f"shape_both{SO_SUFFIX}", f"shape_compat{SO_SUFFIX}"]
    listed = json.dumps(d)
    assert "ext_neither" not in listed
    # Only inline members on a static_cast leave no symbol at all (docs/doctor.md says so).
    assert "ext_inline" not in listed
    problems = {p["message"].split(":", 1)[0]: p for p in d["problems"]}
    assert problems["ext_commptr"]["status"] == "fail" and "a cast to it gives null" in problems["ext_commptr"]["message"]
    # Its own legacy group works on 2.15 whatever "nccl" builds: a warning, not a cast's failure.
    assert problems["ext_selfbuilt"]["status"] == "warn"
    assert "builds its own legacy group" in problems["ext_selfbuilt"]["message"]
    assert "TORCH_DIST_USE_NCCL2" not in problems["ext_selfbuilt"]["remedy"]
    assert "build its own legacy ProcessGroupNCCL: ext_selfbuilt" in c["message"] or \
        "builds its own legacy ProcessGroupNCCL: ext_selfbuilt" in c["message"]


@pytest.mark.slow
@pytest.mark.torch
def test_real_self_built_fails_without_the_rollback(real_site: Path) -> None:
    c = _real(real_site, "--target-torch", "2.16")
    problems = {p["message"].split(":", 1)[0]: p for p in c["details"]["problems"]}
    assert problems["ext_selfbuilt"]["status"] == "fail"
    assert "this torch has no legacy rollback" in problems["ext_selfbuilt"]["remedy"]


@pytest.mark.slow
@pytest.mark.torch
def test_real_extension_without_section_headers(real_site: Path, tmp_path: Path) -> None:
    """A real .so whose section headers are gone (sstrip) is read from its dynamic segment
    (DT_GNU_HASH only, as g++ links it) with the same symbols."""
    from ncclx_migrate._doctor._elfsyms import read_refs

    so = real_site / "ext_commptr" / f"shape_commptr{SO_SUFFIX}"
    data = bytearray(so.read_bytes())
    assert data[4] == 2  # ELF64: e_shoff at 0x28, e_shnum at 0x3c, e_shstrndx at 0x3e
    data[0x28:0x30] = bytes(8)
    data[0x3C:0x40] = bytes(4)
    stripped = tmp_path / so.name
    stripped.write_bytes(bytes(data))
    whole, bare = read_refs(str(so)), read_refs(str(stripped))
    assert not isinstance(whole, str) and not isinstance(bare, str), (whole, bare)
    assert sorted(bare.legacy) == sorted(whole.legacy) == sorted([LEGACY_TYPEINFO, LEGACY_MEMBER])
    assert bare.nccl2 == []
