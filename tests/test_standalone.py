"""The repository stands alone, and its modules stay small.

Strategy: read the checkout's own text files (what a clone holds, as git lists it:
code, tests, benches, docs, packaging, README, Makefile, pyproject, CI) and
check what the project promises of them: no reference to a design document
or folder outside the repository; every section of docs/design.md that the
code cites exists there; the LICENSE is MIT, in the contributors' name, as
pyproject says; no module of core/, app/ or bench/ is over 600 lines.
"""

import re
import subprocess
import tomllib
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parents[1]
DESIGN: Final = REPO / "docs" / "design.md"
#: What a fresh clone holds that is text the project wrote.
FOLDERS: Final = ("app", "core", "tests", "bench", "docs", "packaging", "resources", ".github")
FILES: Final = ("README.md", "Makefile", "pyproject.toml", "LICENSE")
SUFFIXES: Final = {".py", ".md", ".toml", ".yml", ".yaml", ".json", ".txt", ".desktop", ".in"}
#: No module of core/, app/ or bench/ is longer than this.
MAX_LINES: Final = 600

# Spelled in pieces, so that this file does not match itself.
OUTSIDE: Final = re.compile(r"\.\./" + "shared|/work/" + r"shared|\bDESIGN(?:\.md| §?\d)")
CITED: Final = re.compile(r"docs/design\.md(?:\s*|\n#:\s*)§(\d+(?:\.\d+)?)")


def text_files() -> list[Path]:
    """What a clone holds (git's files, those not yet committed included) of ours."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    paths = [REPO / name for name in listed.split("\0") if name]
    return [
        path
        for path in paths
        if path.is_file()
        and (
            path.name in FILES
            or (path.parts[len(REPO.parts)] in FOLDERS and path.suffix in SUFFIXES)
        )
    ]


def test_nothing_refers_to_a_design_document_or_folder_outside_the_repository() -> None:
    offending = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in text_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]

    assert offending == []


def test_every_section_of_the_design_that_the_code_cites_is_in_docs() -> None:
    headings = set(
        re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", DESIGN.read_text(encoding="utf-8"), re.M)
    )
    cited = {
        (str(path.relative_to(REPO)), section)
        for path in text_files()
        for section in CITED.findall(path.read_text(encoding="utf-8"))
    }

    assert len(cited) > 20  # the code cites it: these are not words nobody reads
    assert {(where, section) for where, section in cited if section not in headings} == set()


def test_the_license_is_mit_in_the_contributors_name_as_pyproject_says() -> None:
    license_text = (REPO / "LICENSE").read_text(encoding="utf-8")
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    assert license_text.startswith("MIT License\n")
    assert "Copyright (c) 2026 mcp-tray contributors" in license_text
    assert "MIT" in str(project.get("license"))


def test_no_module_of_core_app_or_bench_is_over_600_lines() -> None:
    lengths = {
        str(path.relative_to(REPO)): len(path.read_text(encoding="utf-8").splitlines())
        for folder in ("core", "app", "bench")
        for path in (REPO / folder).rglob("*.py")
    }

    over = {path: n for path, n in lengths.items() if n > MAX_LINES}
    assert not over, over


def test_no_module_of_core_or_app_is_part_of_an_import_circle() -> None:
    """Every import, at the top or inside a function, as grimp reads them: modules that
    import each other, however far round, are one thing split in two (the desktop
    entry and its per-OS modules were, until the launcher left them)."""
    import grimp

    graph = grimp.build_graph("core", "app")
    edges = {m: graph.find_modules_directly_imported_by(m) & graph.modules for m in graph.modules}
    assert [sorted(circle) for circle in circles(edges)] == []


def circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            step = next(successors, None)
            if step is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        part.add(member)
                        if member == node:
                            break
                    if len(part) > 1:
                        found.append(part)
            elif step not in index:
                index[step] = low[step] = len(index)
                stack.append(step)
                on_stack.add(step)
                work.append((step, iter(sorted(edges[step]))))
            elif step in on_stack:
                low[node] = min(low[node], index[step])
    return found


def test_the_circle_finder_finds_a_circle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(edges) == [{"a", "b", "c"}]


def test_no_test_module_imports_another() -> None:
    """Helpers shared by tests live in support modules (tests/*_support.py, conftest),
    so a test file can move or go without breaking another."""
    importing = re.compile(r"^\s*(?:from|import)\s+tests(?:\.\w+)*\.test_\w+", re.MULTILINE)
    offenders = [
        str(path.relative_to(REPO))
        for path in (REPO / "tests").rglob("*.py")
        if importing.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
