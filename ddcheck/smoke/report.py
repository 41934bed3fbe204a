"""Result models for ``ddcheck smoke`` and their text rendering.

Exit codes (the one contract, ddcheck.base.errors): 0 every path correct; 1 the controls (W == C) are right
but a W != C path is wrong (wrong numbers, metadata that breaks the verify contract, or rows written
past the verify batch) -- the bug, or the capture width (the verdict says which); 2 a bad argument or
a target that cannot be obtained; 3 could not judge: the harness could not run the verify path (torch
missing, a crash, a control wrong), ``not_judged`` says why and what would make it judgeable. A crash
is never reported as 1.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Optional

from pydantic import BaseModel, Field

# "refused": the tree's worker raises before it builds the verify input for this backend (no verify batch
# reaches it); "tree_crash": the backend's own code reads state of its own that neither its constructor
# nor the entry points called as the tree's runner calls them set (a crash of the tree, not the harness);
# "not_judged": the tree has no class for the verify input the backend gets, or it does not build here
Status = Literal["ok", "wrong", "crash", "pending", "refused", "tree_crash", "not_judged"]


class PathResult(BaseModel):
    case: str  # "ddtree" (W != C), "control" (W == C), "seed" (budget 7, C = 8)
    path: str  # "eager" | "graph"
    width: int  # W, tokens verified per request
    num_draft_tokens: int  # C, speculative_num_draft_tokens the backend was built with
    capture_width: Optional[int] = None  # width the graph was captured at (graph path only)
    status: Status = "pending"
    tokens: int = 0
    wrong_tokens: int = 0
    unwritten_tokens: int = 0
    max_abs_err: Optional[float] = None
    metadata: dict[str, Any] = Field(default_factory=dict)  # the backend's contract fields, as the path left them
    contract_fields: list[str] = Field(default_factory=list)  # those the contract judged (set on this path)
    violations: list[dict[str, Any]] = Field(default_factory=list)  # contract.Violation.to_dict() each
    # writes past the verify batch: {buffer, rows (written past its end), batch_rows, where}, each
    out_of_bounds: list[dict[str, Any]] = Field(default_factory=list)
    entry_points: list[str] = Field(default_factory=list)
    error: Optional[str] = None
    seconds: float = 0.0


class HarnessTrace(BaseModel):
    """What the backend touched: sglang files run for real, helpers provided, fake attributes."""

    real_modules: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)  # tree files read (what a GPU run must carry)
    provided_calls: dict[str, int] = Field(default_factory=dict)  # launch values set on the tree's ServerArgs
    stand_ins_called: list[str] = Field(default_factory=list)  # "name at relpath:line", while the backend ran
    stand_in_modules: list[str] = Field(default_factory=list)  # modules that cannot be imported here
    stopped: dict[str, str] = Field(default_factory=dict)  # tree modules / start-up calls that stopped: why
    startup_stand_ins: list[str] = Field(default_factory=list)  # stand-ins the tree's start-up code called
    started: list[str] = Field(default_factory=list)  # the tree's own start-up functions that ran
    # handed objects like a tree class whose module stopped while imported, read from its source: label ->
    # {class, defined_at, module, stopped (why), to_run (what would make it run), unread_bases}
    from_source: dict[str, dict[str, Any]] = Field(default_factory=dict)
    reads: dict[str, list[str]] = Field(default_factory=dict)
    missing: dict[str, list[str]] = Field(default_factory=dict)


class SmokeReport(BaseModel):
    target: str
    backend: str  # where the backend source came from
    attention_backend: str = "triton"  # ddcheck.contract.backends name
    kernels: Optional[str] = None  # what computed attention numbers; None: judged by the contract alone
    device: str
    dtype: str
    budget: int
    width: int
    num_draft_tokens: int
    # "budget": W = --budget + 1, DDTree's width; "launch": the verify width of the launch the run was given
    width_of: str = "budget"
    prefix_lens: list[int] = Field(default_factory=list)
    heads: str = ""  # "q/kv x head_dim"
    block_m: Optional[int] = None  # extend kernel row block for this head size on this device
    # "tree": each case's graph path captures at the width the tree's graph runner captures target verify at for
    # that case's launch (C where it gives none); "C" or "W": --graph-capture-width's override
    graph_capture_width: str = "tree"
    # "W=17 C=8" -> {width (captured at; None: not run, the runner replays no graph for it), runner_width, at
    # (path:line where the runner sets it), gate_at (where it refuses another width), source: "runner",
    # "launch" (as `ddcheck config` read it), "override", "none" (the runner gives none: C), "off" (the launch
    # runs without CUDA graphs)}
    graph_capture: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # set where W is --budget's probe: no drafter of the tree builds it (why, and what the backend is handed)
    probe: Optional[str] = None
    seed: int = 0
    tolerance: dict[str, float] = Field(default_factory=dict)
    paths: list[PathResult] = Field(default_factory=list)
    exit_code: int = 3
    verdict: str = ""
    # exit 3: [{what, why, to_judge}] (ddcheck.base.errors.not_judged): what could not be judged and how it could be
    not_judged: list[dict[str, str]] = Field(default_factory=list)
    limitations: list[str] = Field(default_factory=list)
    config_facts: dict[str, Any] = Field(default_factory=dict)  # for `ddcheck config`
    # "W=17 C=8" -> the tree's own verify-input class used for that case, where the tree has one
    verify_inputs: dict[str, str] = Field(default_factory=dict)
    # of those, the classes the backend met as real instances (built by the tree's own class code)
    verify_input_instances: list[str] = Field(default_factory=list)
    # "W=17 C=8" -> the keywords of the worker's verify-input call that were not evaluated here, and why
    # (the harness's value was used for those)
    worker_call: dict[str, dict[str, str]] = Field(default_factory=dict)
    # "W=17 C=8" -> the tree's own function that built the verify input's mask for that case
    tree_masks: dict[str, str] = Field(default_factory=dict)
    # paths that faulted on the device ("case/path"): each ended its process, the paths after it ran in a new one
    device_faults: list[str] = Field(default_factory=list)
    restart: bool = False  # a worker's report that stopped at a device fault (its parent starts the next)
    harness: HarnessTrace = Field(default_factory=HarnessTrace)
    # "tree": the tree's own code ran (ddcheck.smoke.loader); "fakes": it stopped on this machine and
    # ddcheck's fakes of the sglang runtime gave the verdict (the limitations say why)
    loader: str = "tree"
    seconds: float = 0.0

    def width_said(self, budget: bool = False) -> str:
        """W in words: ``--budget``'s (``budget``: with its value), or the launch's verify width."""
        if self.width_of == "launch":
            return f"W = {self.width} (the launch's verify width)"
        return f"W = budget {self.budget} + 1 = {self.width}" if budget else f"W = budget + 1 = {self.width}"

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=indent)


def text_console(stderr: bool = False):
    """The console every command prints through (:mod:`ddcheck.diagnostics.console`)."""
    from ddcheck.diagnostics.console import console

    return console(stderr)


def render_text(report: SmokeReport, console=None) -> None:
    """Print a compact human summary with rich."""
    from rich.markup import escape
    from rich.table import Table

    console = console or text_console()
    console.print(f"[bold]ddcheck smoke[/] {report.target}  backend: {report.attention_backend} ({report.backend})"
                  + ("" if report.kernels else "; judged by the verify contract (its kernels do not run here)"))
    console.print(f"device {report.device} {report.dtype}, heads {report.heads}, prefixes {report.prefix_lens}, "
                  f"{report.width_said(budget=True)}, C = {report.num_draft_tokens}, "
                  f"row block {report.block_m}")
    if report.probe:
        console.print(f"[yellow]probe[/]: {escape(report.probe)}", highlight=False)
    for case, e in report.graph_capture.items():
        where = (f"the tree's graph runner captures at {e.get('runner_width')} ({e.get('at')}"
                 + (f"; replays no other width, {e['gate_at']}" if e.get("gate_at") else "") + ")"
                 if e.get("runner_width") is not None else "the tree's graph runner gives no capture width")
        how = {"override": f"overridden (--graph-capture-width {report.graph_capture_width})",
               "launch": "the launch's, as `ddcheck config` read it", "none": "C",
               "off": "the launch runs without CUDA graphs"}.get(e.get("source"), "")
        got = f"captured at {e['width']}" if e.get("width") is not None else "not run (the batch runs eagerly)"
        console.print(escape(f"graph {case}: {got}: {where}" + (f"; {how}" if how else "")), highlight=False)
    table = Table(show_lines=False)
    numbers = report.kernels is not None
    for col in ("case", "path", "W", "C", "status", *(("wrong", "unwritten", "max err") if numbers else ()),
                "contract"):
        table.add_column(col)
    for p in report.paths:
        style = {"ok": "green", "wrong": "red", "crash": "magenta", "tree_crash": "magenta",
                 "not_judged": "magenta"}.get(p.status, "")
        cells = (str(p.wrong_tokens), str(p.unwritten_tokens),
                 "" if p.max_abs_err is None else f"{p.max_abs_err:.2e}") if numbers else ()
        contract = f"{len(p.violations)} of {len(p.contract_fields)} fields wrong" if p.violations else \
            (f"{len(p.contract_fields)} fields right" if p.contract_fields else "")
        table.add_row(p.case, p.path + (f"@{p.capture_width}" if p.capture_width else ""), str(p.width),
                      str(p.num_draft_tokens), f"[{style}]{p.status}[/]" if style else p.status, *cells, contract)
    if report.paths:  # none ran (torch missing, a bad target): no empty table
        console.print(table)
    for p in report.paths:
        if p.error:
            console.print(f"[magenta]{p.case}/{p.path}[/]: {escape(p.error)}")
        for v in p.violations:
            console.print(escape(f"  {p.case}/{p.path} {v['field']}: {v['term']}: expected {_short(v['expected'])}, "
                                 f"got {_short(v['got'])}"), highlight=False)
        for o in p.out_of_bounds:
            console.print(escape(f"  {p.case}/{p.path} out of bounds: wrote {o['rows']} row(s) past the "
                                 f"{o['batch_rows']} of {o['buffer']}"), highlight=False)
    for case, cls in report.verify_inputs.items():
        reads = sorted({a for label, attrs in report.harness.reads.items() if cls.split()[0] in label for a in attrs})
        how = "an instance of" if cls.split()[0] in report.verify_input_instances else "a stand-in with the fields of"
        console.print(escape(f"verify input {case}: {how} the tree's own {cls}; the backend read "
                             f"{', '.join(reads) or 'nothing'}"), highlight=False)
    for case, builder in report.tree_masks.items():
        console.print(escape(f"tree mask {case}: built by the tree's own {builder}"), highlight=False)
    for note in report.limitations:
        console.print(f"[yellow]limitation[/]: {escape(note)}")
    for n in report.not_judged:
        console.print(f"[magenta]not judged[/]: {escape(n['what'])}; to judge it: {escape(n['to_judge'])}",
                      highlight=False)
    colour = {0: "green", 1: "red"}.get(report.exit_code, "magenta")
    console.print(f"[bold {colour}]exit {report.exit_code}[/]: {escape(report.verdict)}")


def _short(values: Any, n: int = 6) -> str:
    if not isinstance(values, list):
        return "" if values is None else str(values)
    return str(values if len(values) <= n else values[:n] + ["..."])
