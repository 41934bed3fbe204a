"""`ddcheck audit`: targets and ranges, the record's schema, the renderers, and one small real audit (one
release wheel, two backends, both budgets, CPU) whose cells are checked against the smoke runs that made
them, re-run from the cache, and interrupted then finished."""

from __future__ import annotations

import json
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ddcheck.audit import grid, html, markdown
from ddcheck.audit.cells import SCHEMA_FILE, AuditRecord, Cell, Width, schema
from ddcheck.audit.targets import expand, in_range, last_post_releases
from ddcheck.base.errors import UsageError

INDEX = ["0.5.9", "0.5.10", "0.5.10.post1", "0.5.11rc1", "0.5.11", "0.5.23", "0.5.24"]


# ------------------------------------------------------------------------------------ targets


def test_a_range_is_the_index_releases_it_admits():
    asked = []
    got = expand(["sglang>=0.5.10,<0.5.24"], versions=lambda: asked.append(1) or INDEX)
    assert [t.spec for t in got] == ["sglang==0.5.10", "sglang==0.5.10.post1", "sglang==0.5.11", "sglang==0.5.23"]
    assert [t.label for t in got] == ["0.5.10", "0.5.10.post1", "0.5.11", "0.5.23"]  # no pre-release
    assert asked == [1]


def test_a_pin_is_not_a_range_and_asks_no_index():
    got = expand(["sglang==0.5.10"], versions=lambda: pytest.fail("the index was asked for a pin"))
    assert [(t.spec, t.label) for t in got] == [("sglang==0.5.10", "0.5.10")]


def test_a_range_with_no_release_is_a_usage_error():
    with pytest.raises(UsageError, match="no release"):
        expand(["sglang>=9"], versions=lambda: INDEX)
    with pytest.raises(UsageError, match="no such file"):
        expand(["/nonexistent/tree"], versions=lambda: INDEX)


def test_offline_a_range_is_taken_over_the_wheel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DDCHECK_CACHE", str(tmp_path))
    (tmp_path / "wheels").mkdir()
    for v in ("0.5.10", "0.5.23", "0.4.10.post2"):
        (tmp_path / "wheels" / f"sglang-{v}-py3-none-any.whl").touch()

    def offline():
        raise UsageError("the package index's versions of sglang could not be listed: no network")

    notes: list[str] = []
    got = expand(["sglang>=0.5,<0.6"], versions=offline, notes=notes)
    assert [t.label for t in got] == ["0.5.10", "0.5.23"]
    assert notes and "no network" in notes[0] and "wheel cache" in notes[0]


def test_in_range_and_last_post_releases():
    assert in_range("~=0.5.10", INDEX) == ["0.5.10", "0.5.10.post1", "0.5.11", "0.5.23", "0.5.24"]
    assert last_post_releases(["0.5.10", "0.5.10.post1", "0.5.9"]) == ["0.5.9", "0.5.10.post1"]


# ------------------------------------------------------------------------------ record, renderers


def _record() -> AuditRecord:
    w = [Width(label="budget 16", budget=16, verify_width=17, num_draft_tokens=8)]
    cells = [Cell(target="sglang==0.5.10", label="0.5.10", backend="fa3", width="all widths", column="scan",
                  status="bug", exit_code=1, count=2, verdict="2 error finding(s)",
                  evidence=["sglang/a.py:3: DD001 x", "sglang/a.py:9: DD001 y"]),
             Cell(target="sglang==0.5.10", label="0.5.10", backend="fa3", width="budget 16", column="smoke",
                  status="right", exit_code=0, verdict="every path correct <script>", evidence=["sglang/b.py:4: v"]),
             Cell(target="sglang==0.5.10", label="0.5.10", backend="fa3", width="budget 16", column="capture",
                  status="not judged", exit_code=3, verdict="no graph", not_judged="no graph")]
    return AuditRecord(widths=w, cells=cells, targets=["0.5.10"], backends=["fa3"]).judge()


def test_the_exit_code_is_the_contract():
    r = _record()
    assert r.exit_code == 1  # a bug wins over a cell not judged
    r.cells = [c for c in r.cells if c.exit_code != 1]
    assert r.judge().exit_code == 3
    r.cells = [c for c in r.cells if c.exit_code == 0]
    assert r.judge().exit_code == 0


def test_the_shipped_schema_is_the_models():
    assert json.loads(SCHEMA_FILE.read_text()) == json.loads(json.dumps(schema(), sort_keys=True))


class Grid(HTMLParser):
    """The page's grid cells (td.cell), each with its evidence items; every attribute and tag seen."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict] = []
        self.tags: set[str] = set()
        self.attrs: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs += [v or "" for _, v in attrs]
        a = dict(attrs)
        if tag == "td" and "cell" in (a.get("class") or "").split():
            self.cells.append({"column": a.get("data-column"), "width": a.get("data-width"), "evidence": []})
        elif tag == "li" and self.cells and self._in == "ul":
            self._in = "li"
        elif tag == "ul" and self.cells and "evidence" in (a.get("class") or ""):
            self._in = "ul"

    def handle_endtag(self, tag):
        if tag == "ul":
            self._in = None
        elif tag == "li" and self._in == "li":
            self._in = "ul"

    def handle_data(self, data):
        if self._in == "li":
            self.cells[-1]["evidence"].append(data)


def check_page(record: AuditRecord) -> None:
    """One grid cell per cell of the record, each with its evidence, and nothing fetched from outside."""
    page = html.render(record)
    p = Grid()
    p.feed(page)
    assert sorted((c["width"], c["column"]) for c in p.cells) == sorted((c.width, c.column) for c in record.cells)
    by = {(c.label, c.backend, c.width, c.column): c for c in record.cells}
    assert len(by) == len(record.cells)
    for got, cell in zip(p.cells, [c for _, _, cs in grid.rows(record) for w, col, _ in grid.columns(record)
                                   if (c := cs.get((w, col))) is not None]):
        assert got["evidence"] == cell.evidence
    assert not {"script", "link", "img", "iframe"} & p.tags
    assert not [a for a in p.attrs if "://" in a or a.startswith("//")]


def test_the_page_is_self_contained_with_one_cell_per_result():
    record = _record()
    check_page(record)
    assert "&lt;script&gt;" in html.render(record)  # the verdict's words are text, never markup


def test_markdown_has_a_row_per_target_and_backend():
    text = markdown.render(_record())
    rows = [ln for ln in text.splitlines() if ln.startswith("| 0.5.10 ")]
    assert rows == ["| 0.5.10 | fa3 | 1 bug x2, first a.py:3 |  | 0 right |  | 3 not judged |"]
    assert "not judged: 0.5.10 fa3 budget 16 capture: no graph" in text


def test_markdown_goes_between_a_pages_markers(tmp_path):
    doc = tmp_path / "page.md"
    doc.write_text("# t\n\n<!-- m:start -->\nold\n<!-- m:end -->\ntail\n")
    markdown.write_between(doc, "<!-- m:start -->", "<!-- m:end -->", "new\n")
    markdown.write_between(doc, "<!-- m:start -->", "<!-- m:end -->", "new\n")
    assert doc.read_text() == "# t\n\n<!-- m:start -->\nnew\n<!-- m:end -->\ntail\n"


def test_the_command_renders_a_recorded_audit(tmp_path):
    from typer.testing import CliRunner

    from ddcheck.cli.app import app

    rec = tmp_path / "r.json"
    rec.write_text(_record().model_dump_json())
    out = CliRunner().invoke(app, ["audit", "--from", str(rec), "--format", "markdown"])
    assert out.exit_code == 1 and "| 0.5.10 | fa3 |" in out.output
    for args in (["x", "--from", str(rec)], ["--from", str(rec), "--format", "pdf"], [],
                 ["--from", str(tmp_path / "missing.json")]):  # usage errors: ddcheck.cli.app.main exits 2 on them
        assert isinstance(CliRunner().invoke(app, ["audit", *args]).exception, UsageError), args


# ------------------------------------------------------------------------- one real audit, CPU

@pytest.fixture(scope="session")  # made once: a module fixture is made again when the worker runs another module between
def runs(tmp_path_factory, wheel):
    """One audit of 0.5.10 (fa3, flashinfer; budgets 16 and 4) in a cache of its own, three times:
    interrupted after its third unit was kept, then to the end, then again."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from ddcheck.audit.runner import Audit, Hooks, Options
    from ddcheck.audit.targets import Target

    wheel("0.5.10")  # downloaded (once) before the audit's own cache is set
    before = os.environ["DDCHECK_CACHE"]
    cache = tmp_path_factory.mktemp("audit-cache")
    (cache / "wheels").symlink_to(Path(before) / "wheels", target_is_directory=True)
    os.environ["DDCHECK_CACHE"] = str(cache)
    # one job: the target's smoke units share its kept child in turn (two would start a second child for
    # the same tree, on CI's two cores beside the suite's other worker)
    opts = Options(backends=["fa3", "flashinfer"], budgets=[16, 4], device="cpu", jobs=1)
    target = [Target("sglang==0.5.10", "0.5.10")]
    out: dict = {}
    try:
        for name in ("interrupted", "finished", "again"):
            started, kept = [], []

            def stop_after_three(kind, unit, kept=kept):
                kept.append(json.dumps(unit, sort_keys=True))
                if name == "interrupted" and len(kept) == 3:
                    raise KeyboardInterrupt

            audit = Audit(target, opts, Hooks(started=lambda kind, unit, s=started: s.append(
                json.dumps(unit, sort_keys=True)), kept=stop_after_three))
            try:
                audit.run()
            except KeyboardInterrupt:
                assert name == "interrupted"
            else:
                assert name != "interrupted"
            out[name] = {"started": started, "kept": kept, "record": audit.record(0.0, ["test"])}
    finally:
        os.environ["DDCHECK_CACHE"] = before
    return out


@pytest.mark.slow
@pytest.mark.xdist_group("audit")  # one worker makes the module's audit once
@pytest.mark.network
def test_cells_are_the_verdicts_of_their_runs(runs):
    record = runs["finished"]["record"]
    cells = {(c.backend, c.width, c.column): c for c in record.cells}
    assert len(cells) == len(record.cells) == 2 * 2 + 2 * 2 * 3
    for c in record.cells:
        if c.column in ("smoke", "fixed", "capture") and c.report:
            report = json.loads(Path(c.report).read_text())
            if c.column == "capture" and c.exit_code == 3 and report["exit_code"] in (0, 1):
                # the run's graph path did not run here: the capture width is not judged, and why is the run's
                assert c.not_judged in report["limitations"]
                assert not any(p["case"] == "ddtree" and p["path"] == "graph" for p in report["paths"])
                continue
            assert c.verdict.removeprefix("= the shipped run (the fix changes nothing): ") == report["verdict"]
            assert c.exit_code == (report["exit_code"] if report["exit_code"] in (0, 1) else 3)
            assert c.status == ("not judged" if c.exit_code == 3 else "right" if c.exit_code == 0
                                else report["verdict"].split(":")[0])
    # the scan's DD001 in FA3's file (first at flashattention_backend.py:288), none in flashinfer's
    scan = cells[("fa3", "all widths", "scan")]
    assert scan.exit_code == 1 and scan.evidence[0].startswith("sglang/srt/layers/attention/flashattention_backend.py:288:")
    assert cells[("flashinfer", "all widths", "scan")].exit_code == 0
    assert cells[("fa3", "all widths", "fix")].status == "pending fix"
    for b in (16, 4):  # FA3: wrong as shipped, right after the default fix, at W > C and W < C
        assert cells[("fa3", f"budget {b}", "smoke")].status == "bug"
        assert cells[("fa3", f"budget {b}", "fixed")].exit_code == 0, cells[("fa3", f"budget {b}", "fixed")].verdict
        assert cells[("flashinfer", f"budget {b}", "smoke")].exit_code == 0
        assert cells[("flashinfer", f"budget {b}", "fixed")].verdict.startswith("= the shipped run")
        # flashinfer's graph path needs CUDA: its capture width is not judged here, and says why
        cap = cells[("flashinfer", f"budget {b}", "capture")]
        assert cap.exit_code == 3 and "graph path" in cap.not_judged
    assert record.exit_code == 1


@pytest.mark.slow
@pytest.mark.xdist_group("audit")  # one worker makes the module's audit once
@pytest.mark.network
def test_a_rerun_is_answered_from_the_cache(runs):
    again, finished = runs["again"], runs["finished"]["record"]
    assert again["started"] == [] and again["record"].computed == 0
    assert all(c.cached for c in again["record"].cells)
    strip = lambda r: [c.model_dump(exclude={"cached", "seconds"}) for c in r.cells]  # noqa: E731
    assert strip(again["record"]) == strip(finished)


@pytest.mark.slow
@pytest.mark.xdist_group("audit")  # one worker makes the module's audit once
@pytest.mark.network
def test_an_interrupted_audit_finishes_the_rest_only(runs):
    first, second = runs["interrupted"], runs["finished"]
    assert len(first["kept"]) >= 3 and first["record"].cells  # some cells were done
    assert set(second["started"]).isdisjoint(first["kept"])  # nothing kept was computed again
    assert set(second["started"]) | set(first["kept"]) == set(first["kept"]) | set(second["kept"])
    assert any(c.cached for c in second["record"].cells) and not all(c.cached for c in second["record"].cells)


@pytest.mark.slow
@pytest.mark.xdist_group("audit")  # one worker makes the module's audit once
@pytest.mark.network
def test_the_record_validates_against_the_shipped_schema(runs):
    jsonschema = pytest.importorskip("jsonschema")
    record = runs["finished"]["record"]
    data = json.loads(record.model_dump_json())
    jsonschema.validate(data, json.loads(SCHEMA_FILE.read_text()))
    assert AuditRecord.model_validate(data) == record
    check_page(record)


def test_a_launch_is_a_width_judged_by_config(tmp_path):
    """A launch of --launch-file: config's verdict at the launch's own C and W; its backend (torch_native)
    is one smoke does not run, so no smoke unit starts for it."""
    from ddcheck.audit.runner import Audit, Hooks, Options, read_launches
    from ddcheck.audit.targets import Target
    from ddcheck.config import check_launch

    repo = Path(__file__).resolve().parents[2]
    tree = repo / "fixtures" / "trees" / "newer_ddtree"
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-algorithm", "DDTREE",
            "--speculative-ddtree-budget", "3", "--speculative-num-draft-tokens", "16", "--attention-backend",
            "torch_native", "--speculative-ddtree-pad"]
    launches = tmp_path / "launches.txt"
    launches.write_text("# one launch\n\n" + " ".join(argv) + "\n")
    assert read_launches(launches) == [argv]
    started = []
    audit = Audit([Target(str(tree), "newer_ddtree")], Options(backends=["triton"], budgets=[], launches=[argv]),
                  Hooks(started=lambda kind, unit: started.append(kind)))
    audit.run()
    record = audit.record(0.0, [])
    (cell,) = [c for c in record.cells if c.column == "config"]
    expected = check_launch(argv, sglang=str(tree))
    assert (cell.verify_width, cell.num_draft_tokens) == (4, 16)
    assert cell.exit_code == (expected.exit_code if expected.exit_code in (0, 1) else 3)
    assert cell.backend == expected.settings.verify_backend == "torch_native"
    assert "smoke" not in started and started.count("config") == 1


def test_a_width_the_trees_runner_never_replays_is_judged_on_its_eager_path():
    """0.5.16/0.5.23's runner captures at C and its replay gate sends other widths to the eager path
    (decode_cuda_graph_runner.py:524 / :867 on those releases): the capture cell is the eager verdict,
    citing the gate, not "not judged"; with no gate read it stays not judged."""
    from ddcheck.audit.targets import Target
    from ddcheck.audit.verdicts import capture_cell

    w = Width(label="budget 16", budget=16, verify_width=17, num_draft_tokens=8)
    facts = {"exit_code": 0, "verdict": "every path correct", "width": 17, "num_draft_tokens": 8, "paths": [
        {"case": "ddtree", "path": "eager"}], "limitations": ["a batch of W = 17 runs eagerly, so its graph path is not run"],
        "graph_capture": {"W=17 C=8": {"runner_width": 8, "at": "r.py:262", "gate_at": "r.py:524"}}}
    cell = capture_cell(Target("sglang==0.5.16", "0.5.16"), "fa3", w, facts)
    assert (cell.status, cell.exit_code) == ("runs eagerly", 0) and "r.py:524: its replay gate" in cell.evidence
    facts["graph_capture"]["W=17 C=8"]["gate_at"] = ""
    assert capture_cell(Target("sglang==0.5.16", "0.5.16"), "fa3", w, facts).exit_code == 3
