"""The repository stands alone, and its modules stay small.

Strategy: read the checkout's own text files (what a clone holds, as git lists it:
code, tests, benches, docs, packaging, README, Makefile, pyproject, CI) and
check what the project promises of them: no reference to a design document
or folder outside the repository; every section of docs/design.md that the
code or a page cites exists there, and every link of README.md and docs/*.md,
and every page the code names, points at a file and heading that exist
(headings made into anchors as GitHub makes them); the LICENSE is MIT, in
the contributors' name, as pyproject says; no module of core/, app/ or
bench/ is over 600 lines.
"""

import re
import subprocess
import tomllib
from pathlib import Path
from typing import Final

from tests.support import paths

REPO: Final = paths.REPO
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
#: A section number anywhere in a page of the guide (they all cite the design).
SECTION: Final = re.compile(r"§(\d+(?:\.\d+)?)")
#: A markdown link or image: its target.
LINK: Final = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
#: A page of the guide named in code, a comment or a page, with its anchor if any.
PAGE_NAMED: Final = re.compile(r"\b(docs/[\w-]+\.md|README\.md)(?:#([\w-]+))?")
#: A README section named in words: README, a colon or 's, then its title in quotes.
README_SECTION: Final = re.compile('README(?::|\'s) "([^"]+)"')
FENCE: Final = re.compile(r"^```.*?^```", re.M | re.S)


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


def guide_pages() -> list[Path]:
    """README.md and every page under docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def prose(path: Path) -> str:
    """A page without its fenced code blocks (what is in them is no link)."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, no punctuation, spaces as hyphens."""
    words = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", words).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a page (a repeated one gets -1, -2, as GitHub does)."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", prose(path), re.M):
        anchor, n = slug(heading), 0
        while (anchor if n == 0 else f"{anchor}-{n}") in found:
            n += 1
        found.add(anchor if n == 0 else f"{anchor}-{n}")
    return found


def design_sections() -> set[str]:
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", DESIGN.read_text(encoding="utf-8"), re.M))


def test_slug_makes_anchors_as_github_does() -> None:
    assert slug("3.10 Gateway and bridge") == "310-gateway-and-bridge"
    assert slug("Whose is it? One rule, for the server's requests") == (
        "whose-is-it-one-rule-for-the-servers-requests"
    )
    assert slug("`mcp-tray quit` and the **stop**") == "mcp-tray-quit-and-the-stop"


def test_every_section_a_page_of_the_guide_cites_is_a_section_of_the_design() -> None:
    sections = design_sections()
    cited = {
        (str(page.relative_to(REPO)), section)
        for page in guide_pages()
        for section in SECTION.findall(prose(page))
    }

    assert len(cited) > 10
    assert {(where, section) for where, section in cited if section not in sections} == set()


def test_every_link_of_a_page_of_the_guide_points_at_a_file_and_heading_that_exist() -> None:
    broken = []
    links = 0
    for page in guide_pages():
        for target in LINK.findall(prose(page)):
            if re.match(r"[a-z]+:", target):
                continue  # a web address: not the repository's to check
            links += 1
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")

    assert links > 30  # the pages link to each other: this check checks something
    assert broken == []


def test_every_page_of_the_guide_the_code_names_exists_with_the_heading_named() -> None:
    readme_headings = set(re.findall(r"^#{1,6} (.+)$", prose(REPO / "README.md"), re.M))
    broken = []
    for path in text_files():
        text = path.read_text(encoding="utf-8")
        for name, anchor in PAGE_NAMED.findall(text):
            page = REPO / name
            if not page.exists():
                broken.append(f"{path.relative_to(REPO)}: {name} (no such page)")
            elif anchor and anchor not in anchors(page):
                broken.append(f"{path.relative_to(REPO)}: {name}#{anchor} (no such heading)")
        for section in README_SECTION.findall(text):
            if section not in readme_headings:
                broken.append(f'{path.relative_to(REPO)}: README "{section}" (no such section)')

    assert broken == []


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
    """Helpers shared by tests (and by the benches) live in tests/support/ and conftest,
    so a test file can move or go without breaking another."""
    importing = re.compile(r"^\s*(?:from|import)\s+tests(?:\.\w+)*\.test_\w+", re.MULTILINE)
    offenders = [
        str(path.relative_to(REPO))
        for folder in ("tests", "bench")
        for path in (REPO / folder).rglob("*.py")
        if importing.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
