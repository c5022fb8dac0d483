"""The one table of ``ncclx migrate`` rules.

Everything user-facing about a rule (``ncclx rules``, ``ncclx explain``, ``docs/rules.md``,
SARIF rule metadata) is read from :data:`RULES`; the full text of each rule lives in
``rule_docs/<CODE>.md`` (package data).  Env-var facts are not here: they live in
``ncclx_migrate._torch.envvars`` and the env rules read them from there.

To add a rule: append a :class:`Rule` row (keep codes sorted within their family) and
write ``rule_docs/<CODE>.md``; ``tests/migrate/test_rules_table.py`` checks both.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ._fixkind import FixKind

__all__ = [
    "ROLLBACK_CODES",
    "RULES",
    "SEVERITIES",
    "Rule",
    "get_rule",
    "rule_doc",
    "rule_doc_uri",
    "rules_markdown",
    "severity",
]


@dataclass(frozen=True)
class Rule:
    code: str  # stable: part of the CLI contract
    name: str  # kebab-case, for humans and SARIF
    summary: str  # one line
    fixes: tuple[FixKind, ...]  # the fix kinds the rule can offer (NONE = flag only)
    torch: str  # the torch versions whose behaviour it concerns
    files: str  # "python" or the non-Python kinds it scans

    @property
    def doc_path(self) -> str:
        return f"rule_docs/{self.code}.md"

    @property
    def fix_label(self) -> str:
        return "/".join(k.value for k in self.fixes)


_S, _U, _N = FixKind.SAFE, FixKind.UNSAFE, FixKind.NONE
_PY = "python"
_OTHER = "shell, Dockerfile, YAML, .env, notebooks"
_CPP = "C++, CUDA"

RULES: tuple[Rule, ...] = (
    # --- the rollback toggle and backend names ---
    Rule("NCX101", "rollback-toggle",
         "TORCH_DIST_USE_NCCL2 set to roll back to (or, spelled falsey, failing to roll back to) legacy ProcessGroupNCCL",
         (_U, _N), "2.14, 2.15", _PY),
    Rule("NCX102", "redundant-opt-in",
         "TORCH_DIST_USE_NCCL2=1 is redundant where nccl2 is already the default",
         (_U, _N), "2.14, 2.15", _PY),  # removing it lets an inherited "0" roll back
    Rule("NCX103", "nccl-legacy-backend",
         '"nccl-legacy" used as a backend name (rollback name with no announced future)',
         (_U, _N), "2.14, 2.15", _PY),
    Rule("NCX104", "explicit-nccl2-backend",
         '"nccl2" spelled out where "nccl" builds the same thing (or where the target torch lacks it)',
         (_U, _N), "2.13, 2.14, 2.15", _PY),
    # --- code that behaves differently under nccl2 ---
    Rule("NCX110", "nccl-identity-test",
         '"is this NCCL?" tests (isinstance ProcessGroupNCCL, get_backend(...) == "nccl") that turn false under nccl2',
         (_S, _N), "2.14, 2.15", _PY),
    Rule("NCX111", "legacy-only-member",
         "members that exist only on legacy ProcessGroupNCCL (_group_start, _set_default_timeout, uid, ...)",
         (_S, _U, _N), "2.14, 2.15", _PY),
    Rule("NCX112", "backend-specific-exception",
         "error handling tied to one backend's exception type (except ValueError around NCCL init, bitwise ReduceOp)",
         (_S, _N), "2.14, 2.15", _PY),
    Rule("NCX113", "nccl-error-text-match",
         "matching legacy-only NCCL timeout/watchdog/leak message text that nccl2 does not emit",
         (_N,), "2.15", _PY),
    # --- environment variables (facts: ncclx_migrate._torch.envvars) ---
    Rule("NCX120", "deprecated-fr-env",
         "deprecated TORCH_NCCL_* flight-recorder variable: add (or rename to) its TORCH_FR_* name",
         (_S, _U, _N), "2.15", _PY),
    Rule("NCX121", "empty-fr-dump",
         "flight-recorder dump calls that return nothing for nccl2 groups (_dump_nccl_trace*, _dump_fr_trace* without backend=)",
         (_N,), "2.14, 2.15", _PY),
    Rule("NCX122", "nccl2-ignored-env",
         "TORCH_NCCL_* variable that nccl2 silently ignores (or that no 2.15 backend reads)",
         (_U, _N), "2.15", _PY),
    Rule("NCX123", "unprefixed-env",
         "old unprefixed NCCL_* spelling of a TORCH_NCCL_* variable (accepted with a deprecation warning)",
         (_S, _U, _N), "2.13, 2.14, 2.15", _PY),
    # --- process-group creation ---
    Rule("NCX130", "init-without-device-id",
         "NCCL init_process_group without device_id after code picks LOCAL_RANK's GPU (hardening: nccl2 binds the same one)",
         (_U, _N), "2.15", _PY),
    Rule("NCX131", "new-group-local-sync",
         "new_group(..., use_local_synchronization=True) on an NCCL default group may hang under nccl2",
         (_N,), "2.15", _PY),
    Rule("NCX132", "direct-pg-construction",
         "ProcessGroupNCCL constructed directly: bypasses the nccl switch and stays legacy on every torch",
         (_N,), "2.14, 2.15", _PY),
    Rule("NCX133", "unguarded-lazy-init",
         "Options.lazy_init set without a guard: AttributeError on torch 2.14",
         (_S, _N), "2.14, 2.15", _PY),
    Rule("NCX134", "init-device-mismatch",
         "NCCL init_process_group without device_id where the GPU the code picks can differ from the one nccl2 binds (a break, or maybe one)",
         (_U, _N), "2.15", _PY),
    # --- other files (scanners in _migrate/_files) ---
    Rule("NCX201", "rollback-toggle-files",
         "TORCH_DIST_USE_NCCL2 set in a launch script, Dockerfile, YAML, .env file or notebook",
         (_U, _N), "2.14, 2.15", _OTHER),  # removing an env var is never safe
    Rule("NCX202", "nccl-legacy-backend-files",
         '"nccl-legacy" backend name in a launch script or config (e.g. --backend nccl-legacy)',
         (_U, _N), "2.14, 2.15", _OTHER),
    Rule("NCX203", "deprecated-env-files",
         "deprecated or nccl2-ignored TORCH_NCCL_* / NCCL_* variable in a launch script or config",
         (_S, _U, _N), "2.13, 2.14, 2.15", _OTHER),
    Rule("NCX204", "explicit-nccl2-backend-files",
         '"nccl2" spelled out as a backend in a launch script or config where "nccl" builds the same thing (or where the target torch lacks it)',
         (_U, _N), "2.13, 2.14, 2.15", _OTHER),
    # --- C++ and CUDA extension sources (scanner in _migrate/_files/_cpp/) ---
    Rule("NCX301", "checked-legacy-cast",
         "dynamic_cast (or dynamic_pointer_cast / dynamic_intrusive_pointer_cast) to legacy ProcessGroupNCCL with no nccl2 branch: null under nccl2",
         (_U, _N), "2.14, 2.15", _CPP),
    Rule("NCX302", "unchecked-legacy-cast",
         "static_cast, reinterpret_cast, C-style or static pointer cast to legacy ProcessGroupNCCL: undefined behaviour under nccl2",
         (_N,), "2.14, 2.15", _CPP),
    Rule("NCX303", "legacy-only-member-cpp",
         "a member only legacy ProcessGroupNCCL declares, reached through it with no nccl2 path",
         (_N,), "2.14, 2.15", _CPP),
    Rule("NCX304", "backend-name-nccl-cpp",
         'a backend name compared with "nccl" (getBackendName() == "nccl"): nccl2 answers "nccl2"',
         (_U, _N), "2.14, 2.15", _CPP),
    Rule("NCX305", "legacy-param-binding",
         "a function exposed to Python (pybind11, TORCH_LIBRARY) whose parameter is legacy ProcessGroupNCCL",
         (_N,), "2.14, 2.15", _CPP),
    Rule("NCX306", "legacy-subclass",
         "a class derived from legacy ProcessGroupNCCL: it works only while the rollback does",
         (_N,), "2.14, 2.15", _CPP),
    Rule("NCX307", "legacy-construction",
         "the code builds legacy ProcessGroupNCCL itself (make_intrusive, make_shared, new): it compiles only while the rollback ships",
         (_U, _N), "2.14, 2.15", _CPP),
)

_BY_CODE = {r.code: r for r in RULES}

# How much a finding matters, worst first (``ncclx report`` counts by these):
# break: wrong or failing under nccl2, or once the rollback goes; maybe a break: depends on what
# the code or job does; hardening: works today, stays right under other launchers; deprecated:
# a spelling torch still accepts (with a warning, or redundantly).
SEVERITIES = ("break", "maybe a break", "hardening", "deprecated")
_SEVERITY = {
    "NCX101": "break", "NCX102": "deprecated", "NCX103": "break", "NCX104": "deprecated",
    "NCX110": "break", "NCX111": "break", "NCX112": "maybe a break", "NCX113": "maybe a break",
    "NCX120": "deprecated", "NCX121": "break", "NCX122": "maybe a break", "NCX123": "deprecated",
    "NCX130": "hardening", "NCX131": "maybe a break", "NCX132": "break", "NCX133": "break",
    "NCX134": "maybe a break",
    "NCX201": "break", "NCX202": "break", "NCX203": "deprecated", "NCX204": "deprecated",
    "NCX301": "break", "NCX302": "break", "NCX303": "break", "NCX304": "break", "NCX305": "break",
    "NCX306": "break", "NCX307": "break",
}
# The rollback itself still set: TORCH_DIST_USE_NCCL2 toggles and "nccl-legacy" backend names.
ROLLBACK_CODES = frozenset({"NCX101", "NCX103", "NCX201", "NCX202"})


def severity(code: str, message: str) -> str:
    """A finding's severity: its rule's, unless the message says how sure it is (NCX130/NCX134
    end in "(hardening)", "(a break)", "(maybe a break)"; an explicit "nccl2" on a torch that
    lacks it is a break).  Unknown codes (a newer ncclx's report) count as "maybe a break"."""
    if message.endswith("(a break)"):
        return "break"
    if message.endswith("(maybe a break)"):
        return "maybe a break"
    if message.endswith("(hardening)"):
        return "hardening"
    if "does not exist on torch" in message:
        return "break"
    return _SEVERITY.get(code, "maybe a break")


def get_rule(code: str) -> Rule | None:
    return _BY_CODE.get(code.upper())


def rule_doc(code: str) -> str | None:
    """The full markdown documentation of ``code``, or None if there is no such rule/doc."""
    rule = get_rule(code)
    if rule is None:
        return None
    try:
        return (resources.files(__name__.rpartition(".")[0]) / rule.doc_path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def rule_doc_uri(code: str) -> str | None:
    """A file: URI of ``code``'s documentation in the installed package (SARIF's helpUri), or
    None where the package is not a directory on disk (a zip) or the file is missing."""
    rule = get_rule(code)
    if rule is None:
        return None
    doc = resources.files(__name__.rpartition(".")[0]) / rule.doc_path
    if not isinstance(doc, Path) or not doc.is_file():
        return None
    return doc.resolve().as_uri()


def rules_markdown() -> str:
    """docs/rules.md: the table plus every rule's full doc (checked by a test)."""
    out = [
        "# ncclx migrate rules\n",
        "Generated from `src/ncclx_migrate/_migrate/_rule_table.py` and `rule_docs/*.md` by "
        "`NCCLX_UPDATE_DOCS=1 pytest tests/migrate/test_rules_table.py`; the test fails when it is "
        "stale. `ncclx explain CODE` prints one entry.\n",
        "| Code | Name | Fix | Torch | Files | Summary |",
        "|---|---|---|---|---|---|",
    ]
    for r in RULES:
        out.append(f"| [{r.code}](#{r.code.lower()}) | {r.name} | {r.fix_label} | {r.torch} | {r.files} | {r.summary} |")
    out.append("")
    for r in RULES:
        doc = rule_doc(r.code) or "(no documentation)\n"
        body = doc.split("\n", 1)[1] if doc.startswith("# ") else doc
        out.append(f"## {r.code}\n\n**{r.name}**: {r.summary}\n")
        out.append(body.replace("\n## ", "\n### ").strip() + "\n")
    return "\n".join(out)
