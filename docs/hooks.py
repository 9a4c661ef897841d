"""MkDocs hooks: repository files as pages, and no raw Sphinx role on any page.

- A page that is one repository file (``--8<-- "README.md"``) gets that file with its links to
  other such files (``benchmarks/README.md#...``, ``CHANGELOG.md``) pointed at their pages, so
  the README's links work both on the repository and on the site.
- mkdocstrings reads Markdown, not reStructuredText, so a role written in a docstring
  (``:func:`` and a name in backticks) reaches the page as plain text; a page that shows one
  fails the strict build. Write a cross-reference instead: ``[`name`][]`` (resolved in the
  docstring's scope) or ``[`name`][fcn.module.name]``. ``tests/test_docs.py`` checks the
  docstrings themselves; this checks every built page.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.fcn")

SITE_PAGES = {"benchmarks/README.md": "benchmarks.md", "CHANGELOG.md": "changelog.md"}
"""Repository files the site shows as pages (docs/benchmarks.md, docs/changelog.md)."""

INCLUDE = re.compile(r'^--8<-- "([^"]+)"[ \t]*$', re.MULTILINE)

ROLE = re.compile(r":(?:func|mod|class|data|meth|attr|exc|obj):(?:<code>|`)[^<`]*")


def on_page_markdown(markdown: str, page, config, **kwargs) -> str:
    root = Path(config.config_file_path).parent

    def include(match: re.Match) -> str:
        text = (root / match.group(1)).read_text(encoding="utf-8")
        for path, site_page in SITE_PAGES.items():
            text = text.replace(f"]({path}", f"]({site_page}")
        return text

    return INCLUDE.sub(include, markdown)


def on_page_content(html: str, page, **kwargs) -> str:
    for match in ROLE.finditer(html):
        log.warning(
            "%s shows a raw Sphinx role %r: write a cross-reference ([`name`][])",
            page.file.src_uri,
            match.group(0).replace("<code>", "`"),
        )
    return html
