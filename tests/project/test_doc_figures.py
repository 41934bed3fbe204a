"""Every figure in docs/ says what printed it: a section (a page's text under one heading) with a measured
number (a time, a size, a share, "N/N as expected") or a table a bench script writes (between its
``<!-- name:begin -->`` markers) names a ``bench/*.py`` that exists, or the ``ddcheck audit`` command
(the matrix as a product, whose recorded JSON the tables are rendered from), so the figure can be made
again, and made again when it goes stale."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted((REPO / "docs").glob("*.md"))
# a measured quantity: 14 s, 0.29 s, 5 ms, 1.7 MB, 44 MiB, 3%, 16/16 as expected, 52 runs in 3925.2 s
MEASURED = re.compile(r"(?<![\w.:/-])\d+(?:[.,]\d+)*\s?(?:s|ms|µs|min|KB|kB|KiB|MB|MiB|GB|GiB|%)(?![\w/])"
                      r"|\b\d+/\d+ (?:runs )?as expected")
# what is not a measurement: a setting (a timeout), code (`...`), a link or path
NOT_MEASURED = re.compile(r"`[^`]*`|\(\S+\)|\d+\s?s timeout")
MARKED_TABLE = re.compile(r"<!-- [\w-]+:(?:begin|start) -->")
BENCH = re.compile(r"bench/[\w/]+\.py")
AUDIT = re.compile(r"`ddcheck audit [^`]+`")  # the command with its arguments, as run


def sections(page: Path) -> list[tuple[str, str]]:
    """(heading, text) of each section of a markdown page, code blocks left out."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    parts = re.split(r"^(#{1,6} .*)$", text, flags=re.M)
    return [("(top)", parts[0])] + list(zip(parts[1::2], parts[2::2]))


def figures(text: str) -> list[str]:
    found = MEASURED.findall(NOT_MEASURED.sub(" ", text))
    return found + MARKED_TABLE.findall(text)


def unsourced(page: Path) -> list[str]:
    out = []
    for heading, text in sections(page):
        named = [b for b in BENCH.findall(text) if (REPO / b).is_file()] + AUDIT.findall(text)
        if figures(text) and not named:
            out.append(f"{page.name} {heading.strip()}: {figures(text)[:3]}")
    return out


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_figure_names_its_bench_script(page):
    assert unsourced(page) == []


def test_the_check_finds_a_figure_without_its_script(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Speed\n\nA release takes about 5 s.\n\n## Made\n\n`python bench/smoke_time.py`: 13 s\n")
    assert unsourced(page) == ["p.md # Speed: ['5 s']"]
    page.write_text("# M\n\n<!-- smoke-time:begin -->\n| a |\n|---|\n<!-- smoke-time:end -->\n")
    assert unsourced(page) and not figures("a 5 s timeout, `sleep 3s`, a 14-s run")
