"""The result of ``ddcheck config``, its two own renderings (rich text, JSON), and its findings as rules:
where the launch set each one, which the user selected, ignored or suppressed, and the findings model the
scan's reporters print (SARIF, GitHub annotations; :mod:`ddcheck.cli.config`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field, computed_field

from ddcheck.base.errors import verdict
from ddcheck.base.findings import Finding, Severity
from ddcheck.config.verdicts import ConfigFinding, Consequence
from ddcheck.config.speculative import SpecSettings
from ddcheck.rules import get_rule, rule_of
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
    command_exit_code: int | None = Field(default=None, exclude=True)  # set by the command (--fail-on, selection)

    @property
    def errors(self) -> list[ConfigFinding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def judged(self) -> bool:
        return not self.not_judged and all(f.judged for f in self.findings)

    @computed_field  # in the JSON: the command's exit code by the one contract
    @property
    def exit_code(self) -> int:
        """0 only when the tree's own code judged the launch and found nothing wrong; errors win over 3
        (the command's own code, with --fail-on and the selection applied, where it set one)."""
        if self.command_exit_code is not None:
            return self.command_exit_code
        return verdict(bool(self.errors), not self.judged)

    def ids(self, level: str | None = None) -> set[str]:
        return {f.id for f in self.findings if level is None or f.level == level}


def add_smoke(report, ran) -> None:
    """The asked-for smoke's finding; one that could not run leaves the launch not judged by it."""
    report.findings.append(ran)
    if not ran.judged:
        report.not_judged.append(f"{ran.id}: {ran.message}; {ran.fix}")


def sort_findings(report) -> None:
    """What stops the launch first; stable otherwise."""
    rank = {"error": 0, "warning": 1, "info": 2}
    report.findings.sort(key=lambda f: rank.get(f.level, 3))


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
    if not report.findings:
        console.print("[yellow]not judged (exit 3)[/]" if report.not_judged else "[green]no findings[/]")
        return
    for f in report.findings:
        console.print(f"[{_STYLE[f.level]}]{f.level:<7}[/] [bold]{f.id}[/] [{f.consequence.value}]"
                      + (f" {f.rule}" if f.rule else ""), highlight=False)
        console.print(f"        {f.message}", highlight=False, markup=False)
        if f.set_at:
            console.print(f"        set by the launch: {', '.join(f.set_at)}", highlight=False, markup=False)
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


# ---------------------------------------------------------------------------------------------
# the findings as rules: where the launch set them, selection, suppressions, the findings model
# ---------------------------------------------------------------------------------------------

_SUPPRESSION = re.compile(r"(?:^|\s)#\s*ddcheck:\s*ignore(?:\[(?P<rules>[^\]]*)\])?(?P<reason>[^#]*)")
_KEY = re.compile(r"^(?P<key>[A-Za-z0-9_-]+)\s*:")


@dataclass
class LaunchSuppression:
    """A ``# ddcheck: ignore[ID] reason`` of a launch file (it covers the whole launch), or a
    ``--suppress ID:reason`` (``line`` 0: the command line)."""

    rules: list[str]
    reason: str
    path: str = ""
    line: int = 0
    text: str = ""
    used: set[str] = field(default_factory=set)


def launch_suppressions(file: str | None) -> list[LaunchSuppression]:
    """The suppression comments of an SGLang ``--config`` YAML file, by line."""
    if file is None:
        return []
    out = []
    for n, line in enumerate(Path(file).read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        m = _SUPPRESSION.search(line)
        if m:
            rules = [r.strip() for r in (m.group("rules") or "").split(",") if r.strip()]
            out.append(LaunchSuppression(rules, m.group("reason").strip(), file, n, m.group(0).strip()))
    return out


def command_line_suppressions(values: list[str]) -> list[LaunchSuppression]:
    """``--suppress ID:reason`` values (``ID`` a rule id or name)."""
    out = []
    for v in values:
        rule, _, reason = v.partition(":")
        out.append(LaunchSuppression([rule.strip()] if rule.strip() else [], reason.strip(), text=f"--suppress {v}"))
    return out


def locate(report: Report, argv: list[str], file: str | None) -> None:
    """Fill each finding's ``set_at``: where the launch set the flags its rule concerns (``--flag value``
    on the command line, ``FILE:LINE`` in the ``--config`` YAML); the command line wins, as in SGLang."""
    keys: dict[str, int] = {}
    if file is not None:
        for n, line in enumerate(Path(file).read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            m = _KEY.match(line)
            if m:
                keys.setdefault(m.group("key").replace("_", "-"), n)
    for f in report.findings:
        rule = get_rule(f.rule) if f.rule else None
        where = []
        for flag in (rule.flags if rule else []):
            option = "--" + flag.replace("_", "-")
            given = _given(argv, option)
            if given is not None:
                where.append(given)
            elif option[2:] in keys:
                where.append(f"{file}:{keys[option[2:]]}")
        f.set_at = where


def _given(argv: list[str], option: str) -> str | None:
    for i, tok in enumerate(argv):
        if tok == option:
            value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else ""
            return f"{option} {value}".strip()
        if tok.startswith(option + "="):
            return tok
    return None


def select(report: Report, selected: list[str], ignored: list[str], suppressions: list[LaunchSuppression]) -> None:
    """Keep only the findings of ``selected`` rules (all when empty) that are not ``ignored`` nor
    suppressed with a reason; add a DD100 finding for each suppression without a rule or a reason (or
    naming an unknown rule), a DD101 for each rule it names that suppressed nothing."""
    chosen = {_rule_id(r) for r in selected}
    dropped = {_rule_id(r) for r in ignored}
    kept = []
    for f in report.findings:
        if (chosen and f.rule not in chosen) or f.rule in dropped:
            continue
        hit = next((s for s in suppressions if s.reason and f.rule in {_rule_id(r) for r in s.rules}), None)
        if hit is not None:
            hit.used.add(f.rule)
            continue
        kept.append(f)
    for s in suppressions:
        if not s.rules or not s.reason:
            kept.append(_meta("DD100", s, "no_rule_id" if not s.rules else "no_reason"))
            continue
        unknown = [r for r in s.rules if _rule_id(r) is None]
        if unknown:
            kept.append(_meta("DD100", s, "unknown_rule", rules=", ".join(unknown)))
        unused = [r for r in s.rules if _rule_id(r) is not None and _rule_id(r) not in s.used]
        if unused:
            kept.append(_meta("DD101", s, "unused", rules=", ".join(unused)))
    report.findings = [f for f in kept if f.rule not in dropped and (not chosen or f.rule in chosen)]


def _rule_id(name: str) -> str | None:
    rule = get_rule(name)
    return rule.id if rule is not None else None


def _meta(rule_id: str, s: LaunchSuppression, case: str, **facts: str) -> ConfigFinding:
    rule = rule_of(rule_id)
    return ConfigFinding(id=rule.name, level=rule.severity.value, consequence=Consequence.NONE,
                         message=rule.message(case, **facts), set_at=[f"{s.path}:{s.line}" if s.path else s.text])


def exit_code(report: Report, fail_on: Severity, before: list[ConfigFinding]) -> int:
    """1: a finding at or above ``fail_on`` is left; else 3 when a check could not run (``before`` the
    selection: ignoring or suppressing it never makes a could-not-judge a 0); else 0."""
    if any(Severity(f.level).rank >= fail_on.rank for f in report.findings):
        return 1
    return 3 if report.not_judged or any(not f.judged for f in before) else 0


def as_findings(report: Report, tree: SourceTree | None, file: str | None) -> list[Finding]:
    """The findings in the scan's model, for its reporters: located at the launch file's line where the
    launch set it there, else where the tree decided it (the tree file's display path), else nowhere."""
    out = []
    for f in report.findings:
        path, line = "", 0
        in_file = next((w for w in f.set_at if file and w.startswith(f"{file}:")), None)
        if in_file is not None:
            path, line = file, int(in_file.rpartition(":")[2])
        elif f.decided_at:
            rel, _, n = f.decided_at.rpartition(":")
            src = tree.find(rel) if tree is not None and rel else None
            path, line = (src.display if src is not None else rel), int(n) if n.isdigit() else 0
        rule = f.rule or ""
        at_tree = in_file is None and bool(f.decided_at)  # located where the tree decided it
        text = f.message + (f" Set by the launch: {', '.join(f.set_at)}." if f.set_at else "") + (
            f" Decided by the tree at {f.decided_at}." if f.decided_at and not at_tree else "")
        out.append(Finding(rule=rule, severity=Severity(f.level), path=path, line=max(line, 1) if path else 0,
                           column=0, end_line=max(line, 1) if path else 0, end_column=0, symbol=f.id,
                           message=text, hint=f.fix or None))
    return out
