"""The file kinds ``ncclx migrate`` reads besides Python: one :class:`Kind` record each.

A kind says how a file is recognised (its name, suffix or ``#!`` line), which scanner reads
it, how its comments are written (what an ``ncclx: ignore`` looks like in it) and, in one
line, what it is (for messages and docs/migrate.md).  :func:`file_kind` and the scan in
``__init__`` derive from :data:`KINDS`; adding a kind is its module and one line here.
Scanners are imported when a file of their kind is scanned, not at start-up.

``pipeline``: "text" kinds go through :class:`._checks.Collector` (NCX201-NCX204, offset
edits, the fixed point in ``__init__``); "cpp" and "notebook" run pipelines of their own.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .._suppress import HASH, SLASHES

__all__ = ["KINDS", "Kind", "descriptions", "file_kind", "kind_named", "markdown_table"]

_SHEBANG = re.compile(r"^\ufeff?#!\s*\S*?(?:/|\benv\s+(?:-\S+\s+)*)(?:ba|da|k|z)?sh\b")


@dataclass(frozen=True)
class Kind:
    name: str
    description: str  # what it is, as a message or docs/migrate.md lists it
    scanner: str  # "module:function" in this package; text kinds: fn(text, sink)
    names: tuple[str, ...] = ()  # whole file names, lower case
    suffixes: tuple[str, ...] = ()  # lower case, with the dot
    prefixes: tuple[str, ...] = ()  # lower case (``dockerfile.``)
    shebang: bool = False  # a file without a dot in its name whose #! line runs a shell
    comments: tuple[str, ...] = (HASH,)  # the comment markers an ``ncclx: ignore`` follows (_suppress)
    pipeline: str = "text"
    path_arg: bool = False  # the scanner takes the path first: fn(path, text, sink)
    _fn: list[Callable[..., object]] = field(default_factory=list, compare=False, repr=False)

    def matches_name(self, lower: str) -> bool:
        return lower in self.names or lower.endswith(self.suffixes) or lower.startswith(self.prefixes)

    def scan_fn(self) -> Callable[..., object]:
        if not self._fn:
            module, _, function = self.scanner.partition(":")
            self._fn.append(getattr(importlib.import_module(module, __package__), function))
        return self._fn[0]


# In the order names are tried: the first kind that claims a name has it.
KINDS: tuple[Kind, ...] = (
    Kind("cpp", "C++ and CUDA extension sources (.cpp .cc .cxx .cu .cuh .hip .h .hpp .hh)", "._cpp:scan_cpp",
         suffixes=(".cpp", ".cc", ".cxx", ".cu", ".cuh", ".hip", ".h", ".hpp", ".hh"), comments=(SLASHES,), pipeline="cpp"),
    Kind("shell", "shell and sbatch scripts (.sh .bash .sbatch .slurm .envrc, or a #! shell script)",
         "._shell:scan_shell", names=(".envrc",), suffixes=(".sh", ".bash", ".sbatch", ".slurm"), shebang=True,
         path_arg=True),
    Kind("yaml", "YAML: Kubernetes, compose, CI and Helm values (.yaml .yml)", "._yaml:scan_yaml",
         suffixes=(".yaml", ".yml")),
    Kind("notebook", "Jupyter notebooks (.ipynb)", "._notebook:scan_notebook", suffixes=(".ipynb",),
         pipeline="notebook"),
    Kind("dotenv", ".env files (.env, NAME.env)", "._dotenv:scan_dotenv", names=(".env",), suffixes=(".env",)),
    Kind("dockerfile", "Dockerfiles and Containerfiles (Dockerfile, Dockerfile.NAME, NAME.Dockerfile)", "._dockerfile:scan_dockerfile",
         names=("dockerfile", "containerfile"), suffixes=(".dockerfile",), prefixes=("dockerfile.", "containerfile.")),
    Kind("make", "Makefiles (Makefile, GNUmakefile, .mk): export directives and recipe lines", "._make:scan_make",
         names=("makefile", "gnumakefile"), suffixes=(".mk",)),
    Kind("tox", "tox.ini: setenv and commands of [testenv] sections, pytest-env's [pytest] env", "._tox:scan_tox",
         names=("tox.ini",)),
    Kind("pytest_env", "pytest-env settings: env in pyproject.toml's [tool.pytest.ini_options] and "
         "[tool.pytest_env], and in pytest.ini", "._pytest_env:scan_pytest_env",
         names=("pyproject.toml", "pytest.ini"), path_arg=True),
    Kind("jenkins", "Jenkinsfiles: environment {} blocks, withEnv lists and sh steps", "._jenkins:scan_jenkins",
         names=("jenkinsfile",), suffixes=(".jenkinsfile",), prefixes=("jenkinsfile.",), comments=(SLASHES, HASH)),
    Kind("hcl", "HCL job files (Nomad .nomad .hcl, Terraform .tf): env blocks and maps, argv lists",
         "._hcl:scan_hcl", suffixes=(".nomad", ".hcl", ".tf"), comments=(HASH, SLASHES)),
)

_BY_NAME = {k.name: k for k in KINDS}


def kind_named(name: str) -> Kind:
    return _BY_NAME[name]


def descriptions() -> list[str]:
    """One line per kind, in registry order (Python files come before all of them)."""
    return [k.description for k in KINDS]


def file_kind(path: str, text: str | None = None) -> str | None:
    """The name of the kind ``path`` is (``text``: its content, for a ``#!`` line), or None."""
    base = os.path.basename(path)
    lower = base.lower()
    for kind in KINDS:
        if kind.matches_name(lower):
            return kind.name
    if text is not None and "." not in base and _SHEBANG.match(text):
        return next(k.name for k in KINDS if k.shebang)
    return None


def markdown_table() -> str:
    """The table of kinds in docs/migrate-files.md ("Which files"), which a test keeps equal to this."""
    rows = ["| Kind | Files and what is read |", "|---|---|"]
    rows += [f"| `{k.name}` | {k.description} |" for k in KINDS]
    return "\n".join(rows) + "\n"

