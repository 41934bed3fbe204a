"""The result of ``ddcheck config``: the report (its findings are :class:`ddcheck.base.findings.Finding` s,
as every command's), its header in words (the launch as the tree resolved it), its JSON, and where the
launch set each finding (:func:`locate`). Selection, suppressions, the exit code and every format are
:mod:`ddcheck.diagnostics`' (one road for every command's findings)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field, computed_field, field_serializer, field_validator

from ddcheck.base.errors import verdict
from ddcheck.base.findings import Finding, Severity, finding_from_dict
from ddcheck.config.speculative import SpecSettings
from ddcheck.rules import get_rule
from ddcheck.tree.sources import SourceTree


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
    findings: list = Field(default_factory=list)  # Finding s (in the JSON: Finding.to_dict())
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
    command_exit_code: int | None = Field(default=None, exclude=True)  # set by the command (--fail-on, selection)

    @field_validator("findings", mode="before")
    @classmethod
    def _findings(cls, value):
        return [f if isinstance(f, Finding) else finding_from_dict(f) for f in value or []]

    @field_serializer("findings")
    def _plain_findings(self, findings: list) -> list[dict]:
        return [f.to_dict() for f in findings]

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.error]

    @property
    def judged(self) -> bool:
        return not self.not_judged

    @computed_field  # in the JSON: the command's exit code by the one contract
    @property
    def exit_code(self) -> int:
        """0 only when the tree's own code judged the launch and found nothing wrong; errors win over 3
        (the command's own code, with --fail-on and the selection applied, where it set one)."""
        if self.command_exit_code is not None:
            return self.command_exit_code
        return verdict(bool(self.errors), not self.judged)

    def names(self, severity: str | None = None) -> set[str]:
        """The names of the rules of its findings (at ``severity``, or all)."""
        return {get_rule(f.rule).name for f in self.findings if severity is None or f.severity.value == severity}


def add_smoke(report, ran) -> None:
    """The asked-for smoke's findings, or why it could not run (the launch is then not judged by it)."""
    if isinstance(ran, str):
        report.not_judged.append(ran)
    else:
        report.findings.extend(ran)


def sort_findings(report) -> None:
    """What stops the launch first, then by rule; stable otherwise."""
    report.findings.sort(key=lambda f: (-f.severity.rank, f.rule))


LIMITATIONS_SHOWN = 6


class _Lines(list):
    """The header's lines as the text formats print them ((text, style) spans, :mod:`ddcheck.diagnostics.formats`)."""

    def print(self, text: str, style: str = "", **_: object) -> None:
        self.append([(text, style)])


def header_lines(report: Report) -> list:
    """The report's header: the launch as the tree's code resolved it, what it could not judge."""
    console = _Lines()
    s = report.settings
    console.append([("ddcheck config", "bold"), (f" - SGLang {report.release} ({report.target})", "")])
    if s is not None and s.algorithm:
        console.print(f"  {s.algorithm_requested}"
                      + (f" -> {s.algorithm}" if s.algorithm_requested and s.algorithm != s.algorithm_requested.upper() else "")
                      + f": W={s.verify_width} C={s.num_draft_tokens} steps={s.num_steps} topk={s.eagle_topk}"
                      + f" verify-backend={s.verify_backend or 'auto'}"
                      + (" (picked by the tree)" if s.verify_backend and any(p.value == s.verify_backend
                                                                             for p in report.backends_picked) else "")
                      + f" page={s.page_size}"
                      + f" cuda-graph={'on' if s.cuda_graph else 'off'}")
        if s.verify_input and len(s.verify_sites) <= 1:
            console.print(f"  verify input: {s.verify_input} (built at {s.verify_input_at})", highlight=False)
        if len(s.verify_sites) > 1 or any(site.reached is False for site in s.verify_sites):
            console.print(f"  verify inputs on the step{f' from {s.step_entry}' if s.step_entry else ''}:",
                          highlight=False, markup=False)
            for site in s.verify_sites:
                w = site.width if site.width is not None else (
                    f"{'?' if site.width_min is None else site.width_min}..{'?' if site.width_max is None else site.width_max}")
                state = {True: "reached", None: "reached on some steps", False: "not reached"}[site.reached]
                console.print(f"    {site.cls} at {site.at}: W={w} (draft_token_num={site.width_expr}"
                              + (f"; {site.width_from}" if site.width_from else "") + f"), {state}", highlight=False,
                              markup=False)
                if site.reached is False:
                    console.print(f"      {site.why}", highlight=False, markup=False)
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
    return console


def footer_lines(report: Report) -> list:
    """After the findings: what the verdict is when there are none, or their counts."""
    if not report.findings:
        return [[("not judged (exit 3)", "yellow")]] if report.not_judged else [[("no findings", "green")]]
    counts = {v: sum(1 for f in report.findings if f.severity is v) for v in Severity}
    return [[(f"{counts[Severity.error]} errors, {counts[Severity.warning]} warnings, {counts[Severity.info]} info",
              "bold red" if counts[Severity.error] else "bold")]
            + ([(" (and not judged: see above)", "yellow")] if report.not_judged and not counts[Severity.error] else [])]


def _gpu_text(g: GpuReport) -> str:
    what = " ".join(x for x in (g.name, f"({g.arch})" if g.name and g.arch else g.arch) if x) or g.vendor
    return f"{what}, " + (f"assumed: {g.source}" if g.assumed else f"from {g.source}")


def render_json(report: Report) -> str:
    return report.model_dump_json(indent=2)


# ---------------------------------------------------------------------------------------------
# where the launch set each finding, and where it is located
# ---------------------------------------------------------------------------------------------

_KEY = re.compile(r"^(?P<key>[A-Za-z0-9_-]+)\s*:")


def locate(report: Report, argv: list[str], file: str | None, tree: SourceTree | None = None) -> None:
    """Fill each finding's ``set_at`` (where the launch set the flags its rule concerns: ``--flag value``
    on the command line, ``FILE:LINE`` in the ``--config`` YAML; the command line wins, as in SGLang) and
    its location: the launch file's line where the launch set it there, else the command line's argument,
    else where the tree decided it (its first evidence, at the tree's display path), else the launch."""
    keys: dict[str, int] = {}
    if file is not None:
        for n, line in enumerate(Path(file).read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            m = _KEY.match(line)
            if m:
                keys.setdefault(m.group("key").replace("_", "-"), n)
    for f in report.findings:
        rule = get_rule(f.rule)
        where, in_file, given_first = [], None, None
        for flag in (rule.flags if rule else []):
            option = "--" + flag.replace("_", "-")
            given = _given(argv, option)
            if given is not None:
                where.append(given)
                given_first = given_first or given
            elif option[2:] in keys:
                where.append(f"{file}:{keys[option[2:]]}")
                in_file = in_file or keys[option[2:]]
        f.set_at = where
        if in_file is not None:
            f.path, f.line = file, in_file
        elif given_first is not None:
            f.argument = given_first
        elif f.evidence:
            e = f.evidence[0]
            src = tree.find(e.path) if tree is not None and e.path else None
            f.path, f.relpath, f.line = (src.display if src is not None else e.path), e.path, max(e.line, 1)
        f.end_line = f.line


def _given(argv: list[str], option: str) -> str | None:
    for i, tok in enumerate(argv):
        if tok == option:
            value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else ""
            return f"{option} {value}".strip()
        if tok.startswith(option + "="):
            return tok
    return None
