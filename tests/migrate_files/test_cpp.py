"""C++/CUDA sources: what the fixture cases cannot express (the derived member table, macro
uses, grammar gaps) and the real CLI over a folder of extension sources."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ncclx_migrate._migrate._files import scan
from ncclx_migrate._migrate._files._cpp._members import LEGACY_ONLY, derive
from ncclx_migrate._migrate._files._cpp._result import UNDER_WIDTH
from ncclx_migrate._migrate._model import Options
from tests.conftest import run_ncclx

from ._cases import FIXTURES, cases, read

CPP = FIXTURES / "cpp"


def _findings(name: str, text: str, options: Options | None = None) -> list[tuple[int, str]]:
    result = scan(name, text, options or Options())
    assert result is not None and result.error is None, result and result.error
    return [(f.line, f.code) for f in result.findings]


def _torch_include() -> Path:
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed: its headers are the source of the member table")
    inc = Path(torch.__file__).parent / "include"
    if not (inc / "torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCL.hpp").is_file():
        pytest.skip(f"torch {torch.__version__} ships no nccl2 header")
    if not torch.__version__.startswith("2.15."):
        pytest.skip(f"the table is of the 2.15.0 headers, this is torch {torch.__version__}")
    return inc


def test_member_table_is_derived_from_the_installed_headers() -> None:
    assert derive(str(_torch_include())) == LEGACY_ONLY


def test_every_message_fits_88_columns() -> None:
    """88 columns, and the condition of an arm (a finding in one arm only) cut to its width."""
    note = re.compile(r" \(only under `(.*)`\)$")
    for case in cases():
        if case.kind != "cpp":
            continue
        result = scan(case.input.name, read(case.input), Options())
        assert result is not None
        for f in result.findings:
            m = note.search(f.message)
            assert len(note.sub("", f.message)) <= 88, case.id
            assert m is None or len(m.group(1)) <= UNDER_WIDTH, case.id


def test_macro_used_only_where_nccl2_is_handled_is_no_finding() -> None:
    src = (
        "#define AS_LEGACY(b) dynamic_cast<c10d::ProcessGroupNCCL*>(b)\n"
        "int64_t comm(c10d::Backend* b) {\n"
        "  if (auto* p = AS_LEGACY(b)) return p->getCommPtr();\n"
        "  if (auto* q = dynamic_cast<c10d::nccl2::ProcessGroupNCCL*>(b)) return q->getCommPtr();\n"
        "  return 0;\n"
        "}\n"
    )
    assert _findings("x.cpp", src) == []
    # One use without an nccl2 path: the macro is reported, at its definition.
    unguarded = src + "bool legacy(c10d::Backend* b) { return AS_LEGACY(b) != nullptr; }\n"
    assert _findings("x.cpp", unguarded) == [(1, "NCX301")]


def test_export_macro_and_has_include_are_read() -> None:
    src = (
        "#if __has_include(<torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCL.hpp>)\n"
        "#define HAVE_NCCL2 1\n"
        "#endif\n"
        "class MYLIB_API LoggingNCCL : public c10d::ProcessGroupNCCL {};\n"
    )
    assert _findings("x.hpp", src) == [(4, "NCX306")]


def test_a_region_the_grammar_cannot_read_costs_nothing_elsewhere() -> None:
    # A kernel launch in a .cpp file (the C++ grammar has no <<<>>>): an ERROR node there,
    # the cast below is still found; in a .cu file the CUDA grammar reads the launch.
    src = (
        "void go(float* x) { k<<<1, 32>>>(x); }\n"
        "bool is_nccl(c10d::Backend* b) { return dynamic_cast<c10d::ProcessGroupNCCL*>(b) != nullptr; }\n"
    )
    assert _findings("x.cpp", src) == [(2, "NCX301")]
    assert _findings("x.cu", src) == [(2, "NCX301")]


def test_user_class_of_the_same_name_is_not_the_legacy_class() -> None:
    src = (
        "namespace mine {\n"
        "class ProcessGroupNCCL : public c10d::Backend {};\n"
        "bool f(c10d::Backend* b) { return dynamic_cast<ProcessGroupNCCL*>(b) != nullptr; }\n"
        "}\n"
    )
    assert _findings("x.cpp", src) == []


def test_torch_library_impl_with_a_legacy_parameter() -> None:
    src = (
        "at::Tensor sync(const at::Tensor& t, const c10::intrusive_ptr<c10d::ProcessGroupNCCL>& pg) { return t; }\n"
        "TORCH_LIBRARY(myops, m) {\n"
        '  m.def("sync(Tensor t, __torch__.torch.classes.c10d.ProcessGroup pg) -> Tensor");\n'
        '  m.impl("sync", &sync);\n'
        "}\n"
    )
    assert _findings("ops.cpp", src) == [(1, "NCX305")]


def test_fix_never_reuses_a_taken_name() -> None:
    src = read(CPP / "idiom_raw.in.cpp").replace("int64_t comm_ptr", "int nccl_pg_nccl2 = 0;\n  int64_t comm_ptr")
    result = scan("x.cpp", src, Options(apply_unsafe=True))
    assert result is not None and result.new_text is not None
    assert "nccl_pg_nccl22 = dynamic_cast<c10d::nccl2::ProcessGroupNCCL*>" in result.new_text


# --- the real CLI ---
@pytest.fixture(scope="module")
def ext(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ext")
    (root / "csrc").mkdir()
    shutil.copyfile(CPP / "idiom_raw.in.cpp", root / "csrc" / "comm.cpp")
    shutil.copyfile(CPP / "kernel.in.cu", root / "csrc" / "kernels.cu")
    shutil.copyfile(CPP / "pybind.in.cpp", root / "csrc" / "bind.cc")
    (root / "csrc" / "broken.cpp").write_text("bool f() { return dynamic_cast<c10d::ProcessGroupNCCL*>(b; }\n")
    return root


def _copy(ext: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "ext"
    shutil.copytree(ext, dst)
    (dst / "csrc" / "broken.cpp").unlink()
    return dst


def test_cli_reports_cpp_and_cuda_and_a_broken_file(ext: Path) -> None:
    proc = run_ncclx("migrate", ".", cwd=ext)
    assert proc.returncode == 2, proc.stderr  # findings, and a file that could not be processed
    out = proc.stdout + proc.stderr
    assert "csrc/comm.cpp:13:19: NCX301 dynamic_cast" in out and "hidden fixes can be enabled" in out
    assert "csrc/kernels.cu:15:14: NCX301" in out
    assert "csrc/bind.cc:6:24: NCX305" in out
    errors = [line for line in out.splitlines() if "broken.cpp" in line]
    assert errors == ["csrc/broken.cpp: error: cannot parse C++ at line 1, column 58 (tree-sitter's C++ grammar): "
                      "fix the syntax there, or --exclude the file"]


def test_cli_select_ignore_json_sarif(ext: Path) -> None:
    doc = json.loads(run_ncclx("migrate", "--format", "json", "-q", "--select", "NCX305", ".", cwd=ext).stdout)
    assert {f["code"] for f in doc["findings"]} == {"NCX305"}
    doc = json.loads(run_ncclx("migrate", "--format", "json", "-q", "--select", "NCX30", "--ignore", "NCX305",
                               "--exclude", "broken.cpp", ".", cwd=ext).stdout)
    codes = {f["code"] for f in doc["findings"]}
    assert codes == {"NCX301", "NCX303", "NCX304"}
    first = next(f for f in doc["findings"] if f["code"] == "NCX301")
    assert first["fix"] == "unsafe" and "__has_include" in first["detail"]
    sarif = json.loads(run_ncclx("migrate", "--format", "sarif", "--exclude", "broken.cpp", ".", cwd=ext).stdout)
    results = sarif["runs"][0]["results"]
    assert {r["ruleId"] for r in results} >= {"NCX301", "NCX305"}
    assert {r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]} >= {f"NCX30{i}" for i in range(1, 7)}


def test_cli_diff_then_write_then_clean(ext: Path, tmp_path: Path) -> None:
    root = _copy(ext, tmp_path)
    before = (root / "csrc" / "comm.cpp").read_text()
    diff = run_ncclx("migrate", "--diff", "--unsafe-fixes", "csrc/comm.cpp", cwd=root)
    assert "+#include <torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCL.hpp>" in diff.stdout
    assert (root / "csrc" / "comm.cpp").read_text() == before  # --diff writes nothing
    wrote = run_ncclx("migrate", "--write", "--unsafe-fixes", "csrc/comm.cpp", cwd=root)
    assert wrote.returncode == 0, wrote.stdout + wrote.stderr
    assert (root / "csrc" / "comm.cpp").read_text() == read(CPP / "idiom_raw.unsafe.cpp")
    again = run_ncclx("migrate", "csrc/comm.cpp", cwd=root)
    assert again.returncode == 0 and "NCX30" not in again.stdout


def test_cli_suppression_comment(ext: Path, tmp_path: Path) -> None:
    root = _copy(ext, tmp_path)
    path = root / "csrc" / "comm.cpp"
    path.write_text(path.read_text().replace("(backend.get());", "(backend.get());  // ncclx: ignore[NCX301]"))
    proc = run_ncclx("migrate", "csrc/comm.cpp", cwd=root)
    assert proc.returncode == 0 and "NCX301" not in proc.stdout


def test_the_scanner_is_layered() -> None:
    """parse -> views -> names/members/values -> index/bindings -> rules -> fixes -> result: each imports only
    modules of a lower layer (no circle, no rule that reaches into the fixes)."""
    import ast

    import ncclx_migrate._migrate._files._cpp as pkg

    layers = ["_parse", "_views", "_versions", "_names", "_members", "_values", "_index", "_bindings", "_rules", "_setup", "_layout", "_fix", "_result", "__init__"]
    here = Path(pkg.__file__).parent
    assert sorted(p.stem for p in here.glob("*.py")) == sorted(layers)
    for name in layers:
        tree = ast.parse((here / f"{name}.py").read_text(encoding="utf-8"))
        deps = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module}
        assert all(layers.index(d) < layers.index(name) for d in deps), (name, deps)


def test_an_unreadable_region_is_named_and_the_rest_is_scanned() -> None:
    """A region no arm makes readable fails, at its own line; the file's other findings stay."""
    src = (
        "#ifdef USE_C10D_NCCL\n"
        "#if TORCH_VERSION_MAJOR >= 2\n"
        "int64_t a(c10d::Backend* b) {\n"
        "#else\n"
        "int64_t a(c10d::ProcessGroup* b) {\n"
        "#endif\n"
        "  return dynamic_cast<c10d::ProcessGroupNCCL*>(b)->getCommPtr();\n"
        "}\n"
        "bool broken(c10d::Backend* b) { return dynamic_cast<c10d::ProcessGroupNCCL*>(b; }\n"
        "#endif\n"
    )
    result = scan("x.cpp", src, Options(apply_unsafe=True))
    assert result is not None and result.error is not None
    assert result.error.startswith("cannot parse C++ at line 9, column ")
    assert [(f.line, f.code) for f in result.findings] == [(7, "NCX301")]
    assert result.new_text is None and not any(f.applied for f in result.findings)


def test_an_arm_that_handles_nccl2_is_not_lost_in_a_view() -> None:
    """One view keeps the #else arm without nccl2's cast: a finding needs every view that
    shows its line to find it (torch 2.13 has no nccl2 class to cast to)."""
    src = (
        "#if TORCH_VERSION_MAJOR >= 2\n"
        "int64_t a(c10d::Backend* b) {\n"
        "#else\n"
        "int64_t a(c10d::ProcessGroup* b) {\n"
        "#endif\n"
        "  if (auto* p = dynamic_cast<c10d::ProcessGroupNCCL*>(b)) return p->getCommPtr();\n"
        "#if __has_include(<torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCL.hpp>)\n"
        "  if (auto* q = dynamic_cast<c10d::nccl2::ProcessGroupNCCL*>(b)) return q->getCommPtr();\n"
        "#else\n"
        "  (void)b;\n"
        "#endif\n"
        "  return 0;\n"
        "}\n"
    )
    assert _findings("x.cpp", src) == []
    assert _findings("x.cpp", src.replace("nccl2::", "")) == [(6, "NCX301"), (8, "NCX301")]


def test_use_shim_adds_the_include_folder_to_a_provable_setup_py(tmp_path: Path) -> None:
    """--use-shim rewrites comm.cpp to include <ncclx/compat.h>: a setup.py that builds it with
    torch.utils.cpp_extension from literal sources gets the folder in include_dirs; a build that
    cannot be read (sources from glob, CMake) is told in the finding what to add."""
    from ncclx_migrate._migrate._runner import Mode, run

    opts = Options(apply_safe=True, apply_unsafe=True, use_shim=True)
    (tmp_path / "csrc").mkdir()
    shutil.copyfile(CPP / "idiom_raw.in.cpp", tmp_path / "csrc" / "comm.cpp")
    setup_py = tmp_path / "setup.py"
    setup_py.write_text(
        "from setuptools import setup\n"
        "from torch.utils.cpp_extension import BuildExtension, CppExtension\n\n"
        'setup(ext_modules=[CppExtension("ext", ["csrc/comm.cpp"])], cmdclass={"build_ext": BuildExtension})\n')
    files = [str(setup_py), str(tmp_path / "csrc" / "comm.cpp")]
    report = run(files, opts, Mode(write=True), jobs=1)
    text = setup_py.read_text()
    assert 'CppExtension("ext", ["csrc/comm.cpp"], include_dirs=[ncclx_migrate.backend.get_include()])' in text
    assert "import ncclx_migrate.backend\n" in text
    compile(text, "setup.py", "exec")
    detail = next(f.detail for o in report.outcomes for f in o.result.findings if f.code == "NCX301")
    assert "added to setup.py's include_dirs" in detail
    assert run(files, opts, Mode(write=True), jobs=1).outcomes[0].result.new_text is None  # nothing more

    # Sources computed by glob: not provable, the setup.py is left alone and the finding says what to add.
    shutil.copyfile(CPP / "idiom_raw.in.cpp", tmp_path / "csrc" / "comm.cpp")
    setup_py.write_text(
        "import glob\nfrom setuptools import setup\nfrom torch.utils.cpp_extension import CppExtension\n\n"
        'setup(ext_modules=[CppExtension("ext", glob.glob("csrc/*.cpp"))])\n')
    before = setup_py.read_text()
    report = run(files, opts, Mode(write=True), jobs=1)
    assert setup_py.read_text() == before
    detail = next(f.detail for o in report.outcomes for f in o.result.findings if f.code == "NCX301")
    assert "ncclx_migrate.backend.get_include()" in detail and "target_include_directories" in detail


def test_added_lines_follow_the_clang_format_column_limit(tmp_path: Path) -> None:
    """With a .clang-format above the file, every line a fix adds fits its ColumnLimit (broken
    after `=`, between arguments, before `||`/`:`); without one, the lines are as before."""
    src = read(CPP / "idiom_raw.in.cpp")
    opts = Options(apply_unsafe=True)
    plain = scan(str(tmp_path / "plain" / "comm.cpp"), src, opts)
    assert plain is not None and plain.new_text == read(CPP / "idiom_raw.unsafe.cpp")
    assert max(len(line) for line in plain.new_text.splitlines()) > 80
    (tmp_path / "styled" / "src").mkdir(parents=True)
    path = tmp_path / "styled" / "src" / "comm.cpp"
    (tmp_path / "styled" / ".clang-format").write_text("---\nLanguage: Cpp\nBasedOnStyle: Google\nColumnLimit: 80\n")
    result = scan(str(path), src, opts)
    assert result is not None and result.new_text is not None
    old = set(src.splitlines())
    added = [line for line in result.new_text.splitlines() if line not in old]
    assert added and all(len(line) <= 80 for line in added), [x for x in added if len(x) > 80]
    assert "      dynamic_cast<c10d::nccl2::ProcessGroupNCCL*>(backend.get());" in added
    again = scan(str(path), result.new_text, opts)
    assert again is not None and again.new_text is None
    from ncclx_migrate._migrate._files._cpp._parse import parse_bytes

    tree, _ = parse_bytes("x.cpp", result.new_text.encode())
    assert not tree.root_node.has_error


def test_conditionals_are_the_grammars_directives() -> None:
    """A directive inside a comment or raw string is none; #elif/#else arms carry their condition."""
    from ncclx_migrate._migrate._files._cpp._parse import parse_bytes
    from ncclx_migrate._migrate._files._cpp._views import conditionals

    src = (b'const char* s = R"x(\n#if A\n)x";\n/*\n#else\n*/\n'
           b"#if TORCH_VERSION_MAJOR >= 2\nint a;\n#elif defined(OLD)\nint b;\n#else\nint c;\n#endif\n"
           b"#ifdef USE_C10D_NCCL\n#else  // no NCCL\n#endif\n")
    tree, _ = parse_bytes("x.cpp", src)
    assert [[a.condition for a in g.arms] for g in conditionals(src, tree.root_node)] == [
        ["TORCH_VERSION_MAJOR >= 2", "TORCH_VERSION_MAJOR < 2 && defined(OLD)",
         "TORCH_VERSION_MAJOR < 2 && !defined(OLD)"],
        ["defined(USE_C10D_NCCL)", "!defined(USE_C10D_NCCL)"],
    ]


def test_a_version_arm_is_read_against_the_supported_range() -> None:
    """An arm torch 2.14 compiles (nccl2, legacy cast null) is reported when the project still
    supports 2.14, and not once its oldest torch is 2.15: no torch with nccl2 it supports
    compiles the arm then. A condition on a patch release no one can pin down stays reported."""
    src = (
        "#include <torch/version.h>\n"
        "bool legacy(c10d::Backend* b) {\n"
        "#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 15\n"
        "  return dynamic_cast<c10d::ProcessGroupNCCL*>(b) != nullptr;\n"
        "#elif TORCH_ABI_VERSION < ((2ULL << 56) | (15ULL << 48) | (1ULL << 40))\n"
        "  return dynamic_cast<c10d::ProcessGroupNCCL*>(b) != nullptr;\n"
        "#endif\n"
        "  return false;\n"
        "}\n"
    )
    assert _findings("x.cu", src, Options(target_torch=(2, 13))) == [(4, "NCX301"), (6, "NCX301")]
    assert _findings("x.cu", src, Options(target_torch=(2, 15))) == [(6, "NCX301")]
    assert _findings("x.cu", src, Options(target_torch=(2, 16))) == []


def test_a_parameter_is_not_a_member_of_the_same_name() -> None:
    """Variables are found by scope: the parameter `backend` of a function returning a
    reference (its declarator nests the parameters one level deeper) is a value from the
    caller, not the self-built member `backend` of a class of the file."""
    src = (
        "struct Grid {\n"
        "  c10::intrusive_ptr<c10d::Backend> backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(nullptr, 0, 1);\n"
        "};\n"
        "c10d::Backend*& pick(c10d::Backend*& backend) {\n"
        "  auto* p = dynamic_cast<c10d::ProcessGroupNCCL*>(backend);\n"
        "  return backend;\n"
        "}\n"
        "void close(Grid& g) { dynamic_cast<c10d::ProcessGroupNCCL*>(g.backend.get())->shutdown(); }\n"
    )
    assert _findings("x.cpp", src) == [(2, "NCX307"), (5, "NCX301")]


def test_an_elif_arm_names_only_what_the_version_macros_leave_open() -> None:
    """Arms read one at a time (each opens the `if` the code after them closes): the `#if`
    arm is torch 2.13's, so the `#elif` and `#else` arms are reported, each under the project
    macro alone; "not torch older than 2.14" holds on every torch with nccl2 and goes unsaid."""
    src = (
        "int64_t comm(const c10::intrusive_ptr<c10d::ProcessGroup>& pg, bool a) {\n"
        "  auto backend = pg->getBackend(c10::DeviceType::CUDA);\n"
        "#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 14\n"
        "  if (a) {\n"
        "    auto* p = static_cast<c10d::ProcessGroupNCCL*>(backend.get());\n"
        "#elif defined(EXT_FAST)\n"
        "  if (!a) {\n"
        "    auto* p = dynamic_cast<c10d::ProcessGroupNCCL*>(backend.get());\n"
        "#else\n"
        "  {\n"
        "    auto* p = reinterpret_cast<c10d::ProcessGroupNCCL*>(backend.get());\n"
        "#endif\n"
        "    return p->getCommPtr();\n"
        "  }\n"
        "}\n"
    )
    result = scan("x.cpp", src, Options(target_torch=(2, 13)))
    assert result is not None and result.error is None
    assert [(f.line, f.code, f.detail.split(". ")[0]) for f in result.findings] == [
        (8, "NCX301", "Only under `defined(EXT_FAST)`"), (11, "NCX302", "Only under `!defined(EXT_FAST)`")]


@pytest.mark.parametrize("ext", [".cpp", ".cc", ".cu", ".cuh", ".hip", ".h", ".hpp"])
def test_own_subclass_cast_is_cleared_in_every_dialect(ext: str) -> None:
    """A legacy-typed reference (parameter, member, the file's accessor) cast to the code's own
    subclass is not a break in any dialect: only the subclass and the real cast are."""
    text = read(FIXTURES / "cpp" / "own_subclass.in.cu").replace("__global__ void touch", "void touch")
    text = text.replace("touch<<<1, 32>>>(x);", "touch(x);")
    assert _findings(f"x{ext}", text) == [(11, "NCX306"), (38, "NCX301")]


def test_a_copy_of_own_groups_handed_to_a_call_is_judged_as_before() -> None:
    """The sorted copy of the runtime's own groups is its own only while nothing else may fill
    it: handed whole to another function, its elements may come from torch."""
    text = read(FIXTURES / "cpp" / "own_copies.in.cpp")
    assert [c for _, c in _findings("x.cpp", text)] == ["NCX307"]
    handed = text.replace("  for (auto& [team, backend] : ordered) {", "  refill(ordered);\n  for (auto& [team, backend] : ordered) {")
    assert [c for _, c in _findings("x.cpp", handed)] == ["NCX307", "NCX304", "NCX301", "NCX303"]
