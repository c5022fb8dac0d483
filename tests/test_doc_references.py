"""Every file the docs, rule pages, messages and code comments cite is one a user has: a page or
file of this repository (a torch file with its version, or a pytorch PR, is cited in words and
is not checked here). A link's #anchor names a heading of the page it points to."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".git", ".cache", ".whl", "__pycache__", "node_modules", "build", "dist"}

# Where users read what we cite: the README, docs/, the package (rule pages, messages, comments),
# the example project and the scripts a user runs.
SOURCES = ["README.md", "docs", "src", "examples", "scripts", "benchmarks", "tests"]
TEXT_SUFFIXES = {".md", ".py", ".sh", ".h", ".cpp", ".txt", ".toml", ".yaml", ".yml"}

# A cited markdown page, or a path inside this repository.
CITED_PAGE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)(?:#([\w-]+))?")
CITED_PATH = re.compile(r"(?<![\w/.-])((?:src/ncclx_migrate|tests|docs|scripts|benchmarks|examples)/[\w./-]*\.\w+)")
# Where a repository path in prose is a citation (tests and examples name made-up paths as data).
PATH_SOURCES = ("README.md", "docs", "src", "scripts", "benchmarks")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
# "NVIDIA/nccl-tests' doc/PERFORMANCE.md": a file of another public project, named with it.
FOREIGN = re.compile(r"\b[A-Za-z][\w-]*/[\w.-]+'s?\s+$")
NOTES = re.compile(r"shared/reference|\b(?:nccl2-compat|cpp-extensions|flight-recorder-and-reconfigure"
                   r"|real-world-patterns|field-reports|house-notes)\b")


def _skipped(parts: tuple[str, ...]) -> bool:
    """Build output and environments, not the repository's own files."""
    return bool(SKIP_DIRS & set(parts)) or any(p.startswith(".venv") or p.endswith(".egg-info") for p in parts)


def _files() -> list[Path]:
    out: list[Path] = []
    for name in SOURCES:
        top = ROOT / name
        if top.is_file():
            out.append(top)
            continue
        for path in top.rglob("*"):
            rel = path.relative_to(ROOT).parts
            if path.is_file() and path.suffix in TEXT_SUFFIXES and not _skipped(rel):
                out.append(path)
    return out


def _repo_names() -> set[str]:
    names = set()
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT).parts
        if _skipped(rel):
            continue
        names.add(path.name)
    return names


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_\[\]()]", lambda m: "_" if m.group() == "_" else "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", page.read_text(encoding="utf-8"), flags=re.M)}


def _resolve(target: str, here: Path) -> Path | None:
    for base in (here.parent, ROOT, ROOT / "docs"):
        cand = (base / target).resolve()
        if cand.exists() and ROOT in cand.parents:
            return cand
    return None


def test_nothing_cites_the_engineers_notes() -> None:
    found = []
    for path in _files():
        if path == Path(__file__).resolve():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if NOTES.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert not found, "cites notes users do not have:\n" + "\n".join(found)


def test_every_cited_page_and_anchor_exists() -> None:
    names = _repo_names()
    bad = []
    for path in _files():
        if path.relative_to(ROOT).parts[0] not in PATH_SOURCES:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        fenced = False
        for n, line in enumerate(text.splitlines(), 1):
            where = f"{path.relative_to(ROOT)}:{n}"
            if path.suffix == ".md" and line.lstrip().startswith("```"):
                fenced = not fenced
            if fenced:  # an example's code names the example's own files
                continue
            targets = [(m.group(1), m.group(2)) for m in CITED_PAGE.finditer(line)
                       if not FOREIGN.search(line[:m.start()])]
            if path.suffix == ".md":
                for link in MD_LINK.findall(line):
                    if not re.match(r"[a-z]+:|#", link):
                        file, _, anchor = link.partition("#")
                        targets.append((file, anchor or None))
            for file, anchor in targets:
                page = _resolve(file, path)
                if page is None and "/" not in file and file in names:
                    continue  # a file of the repo named by its name alone
                if page is None:
                    bad.append(f"{where}: {file} is not in the repository")
                elif anchor and page.suffix == ".md" and anchor not in _anchors(page):
                    bad.append(f"{where}: {file} has no heading for #{anchor}")
            for m in CITED_PATH.finditer(line) if not line.lstrip().startswith("$ ") else []:
                cited = m.group(1)
                if "*" in cited or "{" in cited or FOREIGN.search(line[:m.start()]):
                    continue
                if _resolve(cited, path) is None:
                    bad.append(f"{where}: {cited} is not in the repository")
    assert not bad, "\n".join(sorted(set(bad)))


def test_readme_names_every_dependency_and_no_test_count() -> None:
    """README's dependency list is pyproject.toml's (pyyaml was missing), and it states no
    passed/skipped count, which went stale with every test added (issue 37)."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~ ]", d, maxsplit=1)[0] for d in deps}
    [line] = [ln for ln in readme.split("\n\n") if ln.startswith("The package needs only")]
    grammar = {"cpp": "C++", "cuda": "CUDA", "make": "make", "toml": "TOML", "groovy": "Groovy", "hcl": "HCL",
               "bash": "bash", "dockerfile": "Dockerfile", "yaml": "YAML"}
    said = {n for n in names if (grammar.get(n.removeprefix("tree-sitter-"), "?") if n.startswith("tree-sitter-")
                                 else n.replace("tree-sitter", "tree-sitter's")) in line}
    assert said == names, sorted(names - said)
    assert not re.search(r"\b[\d,]+ passed\b", readme)
