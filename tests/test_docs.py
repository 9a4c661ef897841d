"""The docs link: no Sphinx role is left in ``fcn/``, and the front door's links land.

mkdocstrings reads Markdown, so a reStructuredText role (``:func:`` and a name in backticks)
reaches the page as raw text. A cross-reference is written ``[`name`][]`` (resolved in the
docstring's scope: ``scoped_crossrefs`` in mkdocs.yml) or ``[`name`][fcn.module.name]``; a name
outside the package or a private one is plain code (double backticks). The strict docs build
fails on a reference it cannot resolve, and ``docs/hooks.py`` on a role left on any built page.

README.md and CHANGELOG.md link to repository files and their headings
(``benchmarks/README.md#...``): each target must exist, each heading as GitHub (and the site's
``toc``) spells its anchor, so a renamed heading cannot leave a dead link behind.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fcn"
FRONT_DOOR = ("README.md", "CHANGELOG.md")

LINK = re.compile(r"\]\(([^)\s]+)\)")

ROLE = re.compile(r":(?:func|mod|class|data|meth|attr|exc|obj):`")


def raw_roles(root: Path) -> list[str]:
    """``file:line: text`` of each Sphinx role in the Python files under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if ROLE.search(line):
                found.append(f"{path.relative_to(root.parent)}:{number}: {line.strip()}")
    return found


def test_no_sphinx_role_is_left_in_the_docstrings():
    found = raw_roles(PACKAGE)
    assert not found, (
        f"{len(found)} lines with a Sphinx role, which the API pages show raw; write "
        "[`name`][] or [`name`][fcn.module.name] (plain ``name`` outside fcn or private):\n"
        + "\n".join(found)
    )


def test_the_check_finds_a_role(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        '"""See [`f`][] and ``g``,\nnot :func:`f` nor :data:`~pkg.X`."""\n', encoding="utf-8"
    )
    assert raw_roles(tmp_path / "pkg") == ['pkg/mod.py:2: not :func:`f` nor :data:`~pkg.X`."""']


def anchor(heading: str) -> str:
    """A Markdown heading's anchor as GitHub (and Python-Markdown's ``toc``) writes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def dead_links(path: Path) -> list[str]:
    """The relative links of ``path`` whose file or heading does not exist."""
    dead = []
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, fragment = target.partition("#")
        linked = (path.parent / file) if file else path
        if not linked.exists():
            dead.append(f"{path.name}: {target} (no file {file})")
        elif fragment:
            headings = [
                line.lstrip("#")
                for line in linked.read_text(encoding="utf-8").splitlines()
                if line.startswith("#")
            ]
            if fragment not in {anchor(h) for h in headings}:
                dead.append(f"{path.name}: {target} (no such heading in {file or path.name})")
    return dead


def test_the_front_door_links_land():
    dead = [link for name in FRONT_DOOR for link in dead_links(ROOT / name)]
    assert not dead, "links to nothing:\n" + "\n".join(dead)


def test_anchors_are_spelled_as_github_does():
    assert anchor("Time to accuracy: `fcn.train`'s defaults (Dec 6 2026, AMX Xeon)") == (
        "time-to-accuracy-fcntrains-defaults-dec-6-2026-amx-xeon"
    )
    assert anchor("Not run yet") == "not-run-yet"


def test_the_check_finds_dead_links(tmp_path):
    (tmp_path / "b.md").write_text("# Real heading\n", encoding="utf-8")
    (tmp_path / "README.md").write_text(
        "[x](b.md#real-heading) [y](b.md#gone) [z](missing.md) [w](https://x.org/a.md#b)\n",
        encoding="utf-8",
    )
    assert dead_links(tmp_path / "README.md") == [
        "README.md: b.md#gone (no such heading in b.md)",
        "README.md: missing.md (no file missing.md)",
    ]
