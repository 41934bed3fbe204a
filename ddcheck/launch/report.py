"""The result of ``ddcheck config`` and its two renderings (rich text, JSON)."""

from __future__ import annotations

from pydantic import BaseModel, Field, computed_field

from ddcheck.errors import verdict
from ddcheck.launch.checks import ConfigFinding
from ddcheck.launch.speculative import SpecSettings


class GpuReport(BaseModel):
    """The GPU the launch was judged for (``--gpu``, found on this machine, or assumed)."""

    vendor: str
    arch: str | None = None
    name: str | None = None
    source: str  # "--gpu H100", "nvidia-smi", the driver's file, or why it was assumed
    assumed: bool = False


class PickedBackend(BaseModel):
    """An attention backend the launch left to SGLang, as the tree's start-up code picked it."""

    field: str  # attention_backend, prefill_attention_backend, decode_attention_backend, ...
    value: str
    picked_at: str | None = None  # file:line of the tree's return that produced it
    set_at: str | None = None  # file:line of the write (or declaration) of the field


class Report(BaseModel):
    target: str
    release: str
    argv: list[str] = Field(default_factory=list, description="server arguments after --config merge")
    settings: SpecSettings | None = None
    findings: list[ConfigFinding] = Field(default_factory=list)
    scan_engine: str | None = None
    handler: str | None = None  # the tree's speculative start-up handler that ran (file:line)
    tree_note: str | None = None  # why the tree's own code could not run (the ast tables were used)
    # What of the tree's run was not its own code running for real (a stand-in called, a start-up
    # statement that could not run here, a model config read from its file by ddcheck).
    tree_limitations: list[str] = Field(default_factory=list)
    gpu: GpuReport | None = None  # the GPU the launch was judged for
    # Backends the launch left to SGLang: picked by the tree's start-up code for that GPU and model
    # (the orchestrator that ran, file:line, in backend_selection_by), or why none could be.
    backends_picked: list[PickedBackend] = Field(default_factory=list)
    backend_selection_by: str | None = None
    backend_selection_note: str | None = None
    verdict_depends_on_gpu: bool = False  # a backend was picked for an assumed GPU
    # Why the tree's own code did not decide the launch, each with what to install or pass: exit 3
    # (could not judge) unless there are errors.
    not_judged: list[str] = Field(default_factory=list)
    # What the tree's own code printed while ddcheck ran it (imports, start-up): the tree's, not the report's.
    tree_stdout: str = ""
    tree_stderr: str = ""

    @property
    def errors(self) -> list[ConfigFinding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def judged(self) -> bool:
        return not self.not_judged

    @computed_field  # in the JSON: the command's exit code by the one contract
    @property
    def exit_code(self) -> int:
        """0 only when the tree's own code judged the launch and found nothing wrong; errors win over 3."""
        return verdict(bool(self.errors), bool(self.not_judged))

    def ids(self, level: str | None = None) -> set[str]:
        return {f.id for f in self.findings if level is None or f.level == level}


LIMITATIONS_SHOWN = 6
_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


def render_text(report: Report, console=None) -> None:
    from rich.console import Console

    console = console or Console(soft_wrap=True)  # long evidence lines stay whole in CI logs
    s = report.settings
    console.print(f"[bold]ddcheck config[/] - SGLang {report.release} ({report.target})")
    if s is not None and s.algorithm:
        console.print(f"  {s.algorithm_requested}"
                      + (f" -> {s.algorithm}" if s.algorithm_requested and s.algorithm != s.algorithm_requested.upper() else "")
                      + f": W={s.verify_width} C={s.num_draft_tokens} steps={s.num_steps} topk={s.eagle_topk}"
                      + f" verify-backend={s.verify_backend or 'auto'}"
                      + (" (picked by the tree)" if s.verify_backend and any(p.value == s.verify_backend
                                                                             for p in report.backends_picked) else "")
                      + f" page={s.page_size}"
                      + f" cuda-graph={'on' if s.cuda_graph else 'off'}")
        if s.verify_input:
            console.print(f"  verify input: {s.verify_input} (built at {s.verify_input_at})", highlight=False)
        if s.verify_width_per_step:
            lo, hi = ("?" if v is None else v for v in (s.verify_width_min, s.verify_width))
            console.print(f"  W is computed each step (draft_token_num={s.verify_width_per_step}): from {lo} to {hi}",
                          highlight=False, markup=False)
        if s.env:
            console.print("  environment: " + " ".join(f"{k}={v}" for k, v in s.env.items()), highlight=False,
                          markup=False)
        if report.gpu is not None:
            console.print(f"  GPU: {_gpu_text(report.gpu)}", highlight=False, markup=False)
        for p in report.backends_picked:
            console.print(f"  {p.field}={p.value}: left to SGLang, picked by the tree's code at "
                          f"{p.picked_at or p.set_at or '?'}" + (f" (set at {p.set_at})" if p.picked_at and p.set_at else ""),
                          highlight=False, markup=False)
        if report.backend_selection_note:
            console.print(f"  backend choice: {report.backend_selection_note}", highlight=False, markup=False)
        if report.verdict_depends_on_gpu:
            console.print("  the verdict depends on the GPU, which was assumed: pass --gpu (sm80, sm90, sm100, "
                          "sm120, or a product: H100, B200...) for the GPU the launch runs on", highlight=False,
                          markup=False)
        how = (f"resolved by the tree's own start-up code ({report.handler})" if s.resolved_by == "tree" else
               "not resolved: the tree's own start-up code did not run (the flags as given are shown)")
        console.print(f"  {how}", highlight=False, markup=False)
        for line in report.tree_limitations[:LIMITATIONS_SHOWN]:
            console.print(f"    limitation: {line}", highlight=False, markup=False)
        if len(report.tree_limitations) > LIMITATIONS_SHOWN:
            console.print(f"    ... {len(report.tree_limitations) - LIMITATIONS_SHOWN} more (--format json lists them)",
                          highlight=False, markup=False)
    elif s is not None:
        console.print("  no speculative algorithm: nothing speculative to check")
    printed = [x for x in (report.tree_stdout, report.tree_stderr) if x]
    if printed:
        console.print(f"  the tree printed {sum(x.count(chr(10)) or 1 for x in printed)} line(s) while it ran "
                      "(--format json: tree_stdout, tree_stderr)", highlight=False, markup=False)
    for why in report.not_judged:
        console.print(f"could not judge: {why}", highlight=False, markup=False)
    if not report.findings:
        console.print("[yellow]not judged (exit 3)[/]" if report.not_judged else "[green]no findings[/]")
        return
    for f in report.findings:
        console.print(f"[{_STYLE[f.level]}]{f.level:<7}[/] [bold]{f.id}[/] [{f.consequence.value}]", highlight=False)
        console.print(f"        {f.message}", highlight=False, markup=False)
        if f.fix:
            console.print(f"        fix: {f.fix}", highlight=False, markup=False)
        for e in f.evidence:
            console.print(f"        at {e}" + (f"  {e.text}" if e.text else ""), highlight=False, markup=False)
    n = len(report.errors)
    console.print(f"[{'bold red' if n else 'green'}]{n} error(s)[/]"
                  + (" [yellow](and not judged: see above)[/]" if report.not_judged and not n else ""))


def _gpu_text(g: GpuReport) -> str:
    what = " ".join(x for x in (g.name, f"({g.arch})" if g.name and g.arch else g.arch) if x) or g.vendor
    return f"{what}, " + (f"assumed: {g.source}" if g.assumed else f"from {g.source}")


def render_json(report: Report) -> str:
    return report.model_dump_json(indent=2)
