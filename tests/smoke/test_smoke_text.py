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
