"""smoke's text report prints what the tree and the harness said as text, never as rich markup: a
status with no colour of its own (``tree_crash``, ``refused``) and errors or notes holding brackets
(``x[: bs + 1]``, ``[/]``) once made the report itself fail (an internal error on the GPU run of
0.4.10.post2's trtllm_mla)."""

from __future__ import annotations

import io

from rich.console import Console

from ddcheck.smoke.report import PathResult, SmokeReport, render_text


def test_statuses_and_bracketed_text_print_as_they_are():
    report = SmokeReport(target="t", backend="b", device="cpu", dtype="float32", budget=16, width=17,
                         num_draft_tokens=8)
    for status in ("tree_crash", "refused", "pending", "ok"):
        report.paths.append(PathResult(case="ddtree", path="graph", width=17, num_draft_tokens=8, status=status,
                                       error="AttributeError: x[/] at buf[: bs + 1] [bold]"))
    report.limitations.append("stand-in f[/]")
    report.verdict = "tree crash: [/] [red]"
    out = io.StringIO()
    render_text(report, Console(file=out, width=400, color_system=None))
    text = out.getvalue()
    assert "tree_crash" in text and "refused" in text
    assert "x[/] at buf[: bs + 1] [bold]" in text and "stand-in f[/]" in text and "tree crash: [/] [red]" in text


def test_the_header_says_whose_width_w_is():
    """W is ``--budget``'s (DDTree's budget + 1) unless the run was given a launch: then the launch's own."""
    def header(**kw) -> str:
        out = io.StringIO()
        render_text(SmokeReport(target="t", backend="b", device="cpu", dtype="float32", budget=7, width=8,
                                num_draft_tokens=8, **kw), Console(file=out, width=400, color_system=None))
        return out.getvalue().splitlines()[1]

    assert "W = budget 7 + 1 = 8, C = 8" in header()
    launched = header(width_of="launch")
    assert "W = 8 (the launch's verify width), C = 8" in launched and "budget" not in launched
