"""The README and docs/ hold together: the README stays short, each rule's page under docs/rules/ is
what its definition makes, the rule tables list every rule, and every relative link resolves (file and
anchor)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ddcheck.cli.app import app
from ddcheck.rules import all_rules

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = sorted([README, REPO / "rules" / "README.md", *(REPO / "docs").rglob("*.md")])


def generator():
    spec = importlib.util.spec_from_file_location("gen_rule_docs", REPO / "docs" / "gen_rule_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------------------- README size


def test_readme_reads_in_five_minutes():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300
    assert README.stat().st_size <= 25 * 1024


# ------------------------------------------------------------------------------------------ rule pages


def test_every_rule_page_is_in_step_with_its_definition():
    gen = generator()
    assert gen.stale(gen.pages()) == [], "run: python docs/gen_rule_docs.py"


@pytest.mark.parametrize("rule_id", sorted(all_rules()))
def test_a_rule_page_holds_what_explain_prints(rule_id):
    printed = CliRunner().invoke(app, ["explain", rule_id])  # not a terminal: the Markdown as it is
    assert printed.exit_code == 0 and printed.output.startswith(f"# {rule_id} ")
    assert printed.output in (REPO / "docs" / "rules" / f"{rule_id}.md").read_text(encoding="utf-8")


def test_the_check_finds_a_stale_a_missing_and_an_orphan_page(tmp_path, monkeypatch):
    gen = generator()
    monkeypatch.setattr(gen, "PAGES", tmp_path)
    wanted = gen.pages()
    assert len(gen.stale(wanted)) == len(all_rules())  # all missing
    assert gen.main([]) == 0 and gen.stale(wanted) == [] and gen.main(["--check"]) == 0
    first = sorted(wanted)[0]
    first.write_text(first.read_text() + "an edit by hand\n")
    (tmp_path / "DD999.md").write_text("old")
    assert gen.stale(wanted) == [f"{first.name}: differs from its rule", "DD999.md: no such rule"]
    assert gen.main(["--check"]) == 1


@pytest.mark.parametrize("page, prefix, face", [(README, "docs/rules/", "scan"), (REPO / "docs" / "scan.md", "rules/", "scan"),
                                               (REPO / "docs" / "config.md", "rules/", "config"),
                                               (REPO / "docs" / "smoke.md", "rules/", "smoke")],
                         ids=["README.md", "docs/scan.md", "docs/config.md", "docs/smoke.md"])
def test_the_rule_tables_list_every_rule_with_its_page(page, prefix, face):
    """The scan's rules in the README and docs/scan.md (with the suppression rules, which config reports
    too), config's in docs/config.md, smoke's in docs/smoke.md."""
    rows = re.findall(r"^\| \[(DD\d+)\]\(([^)]+)\) ([a-z0-9-]+) \| (\w+) \|", page.read_text(encoding="utf-8"), re.M)
    assert [(rid, link, name, sev) for rid, link, name, sev in rows] == \
        [(r.id, f"{prefix}{r.id}.md", r.name, r.severity.value) for r in all_rules().values() if r.face == face]


# ------------------------------------------------------------------------------------------- links

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1", re.M | re.S)  # fenced blocks, indented ones (in lists) too


def prose(text: str) -> str:
    """The text without fenced blocks and code spans, where brackets are code, not links."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    # a heading keeps its code spans' words (`ddcheck smoke` -> ddcheck-smoke); a fence's `# comment` is no heading
    text = FENCE.sub("", page.read_text(encoding="utf-8")).replace("`", "")
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def broken_links(page: Path) -> list[str]:
    out = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not relative
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            out.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            out.append(f"{target}: no heading #{anchor} in {dest.name}")
    return out


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_link_check_finds_a_missing_file_and_anchor(tmp_path):
    (tmp_path / "other.md").write_text("# `ddcheck smoke`: the real path\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#ddcheck-smoke-the-real-path) [gone](nope.md) [bad](other.md#nope) "
                    "[web](https://example.com/x.md) `[code](nope.md)`\n```\n[fenced](nope.md)\n```\n")
    assert broken_links(page) == ["nope.md: no such file", "other.md#nope: no heading #nope in other.md"]
