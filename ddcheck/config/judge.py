"""The launch judged by the tree's own start-up code: run in ``python -m ddcheck.config.child``, never
in ddcheck's own process (:func:`ddcheck.config.api.check_launch` starts it). The tree's modules, the
environment, torch's probes and the root logger are patched here, in the worker, for the run."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable

from ddcheck.base.errors import UsageError
from ddcheck.config.environ import TreeOutput, launch_environ
from ddcheck.config.hub import HubError, hub_config
from ddcheck.base.findings import Finding
from ddcheck.config.evidence import scan_errors, verify_findings_by_backend
from ddcheck.config.facts import LaunchFacts
from ddcheck.config.target import backend_files
from ddcheck.config.flags import ParseError, closest_options, flag_table, merge_config_file, parse
from ddcheck.config.gpu import Gpu
from ddcheck.config.report import GpuReport, PickedBackend, Report, add_smoke, sort_findings
from ddcheck.rules import launch_rule, launch_rules
from ddcheck.config.selection import apply as apply_selection, platform_of, select_backends, settle
from ddcheck.config.speculative import VerifySite, SpecSettings, flags_as_given
from ddcheck.config.treerun import TreeRun, load_config, run_handler, server_args_values
from ddcheck.config.words import launch_env, server_argv
from ddcheck.tree.sources import SourceTree
from ddcheck.tree.names import (ATTENTION_BACKEND, DISABLE_CUDA_GRAPH, MAX_RUNNING_REQUESTS, MODEL_FIELDS,
                                  SPECULATIVE_ALGORITHM, SPECULATIVE_DDTREE_BUDGET,
                                  SPECULATIVE_DFLASH_BLOCK_SIZE, SPECULATIVE_EAGLE_TOPK,
                                  SPECULATIVE_NUM_DRAFT_TOKENS, SPECULATIVE_NUM_STEPS)
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.worker import graph_capture, verify_inputs


def judge(argv: list[str], tree: SourceTree, file: str | None, draft_config: str | None,
          model_config: str | None, machine: Gpu,
          smoke: Callable[[SpecSettings, SourceTree], Finding | str | None] | None = None) -> Report:
    """The launch through the tree's own code, under the launch's environment, its prints kept. ``smoke``
    is called where the checks ran to the end (a None it returns adds nothing)."""
    try:
        configs = load_config(draft_config), load_config(model_config)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    output = TreeOutput()
    with launch_environ(launch_env(argv)) as environ, output:
        report = _check(argv, tree, file, configs, machine, smoke, environ)
    report.tree_stdout, report.tree_stderr = output.stdout, output.stderr
    if report.settings is not None:
        report.settings.env = environ.reported()
    return report


TORCH_REMEDY = "install torch (`pip install 'ddcheck[smoke]'`, or torch itself) and run ddcheck config again"


def _torch_missing(stand_ins: list[str], failed: str | None = None) -> bool:
    """torch could not be imported here and the tree's code asked for it (it got a stand-in, or its
    import stopped the run: a torch that is found but does not import is as good as none)."""
    return any(m.split(".")[0] == "torch" for m in stand_ins) or (
        importlib.util.find_spec("torch") is None and bool(stand_ins)) or bool(
        re.search(r"No module named '(torch|triton)\b", failed or ""))


def _why_not(what: str, failed: str | None, supply: list[str], torch_missing: bool) -> str:
    """Why the tree's code could not decide ``what``, said as what to install or pass."""
    at = re.search(r"\(at ([^()]+)\)$", failed or "")
    where = f" (it stopped at {at.group(1)})" if at else ""
    if torch_missing:
        return f"{what}: torch is not installed here, and the tree's code needs it{where}; {TORCH_REMEDY}"
    if supply:
        return (f"{what}: the tree's code reads a model config ddcheck does not have{where}; pass "
                f"{' and '.join(dict.fromkeys(supply))} (a local folder or file holding its config.json)")
    return f"{what}: {failed}" if failed else what


def _check(argv, tree, file, configs, machine, smoke, environ) -> Report:
    """The launch through the tree's own code, under the launch's environment (``environ``)."""
    try:
        table = flag_table(tree)
    except LookupError as exc:
        raise UsageError(str(exc)) from exc
    args = server_argv(argv)
    if file is not None:
        args = ["--config", str(file)] + args
    report = Report(target=tree.label, release=table.release, argv=args,
                    gpu=GpuReport(vendor=machine.vendor, arch=machine.arch, name=machine.name,
                                  source=machine.source, assumed=machine.assumed))
    rel = f"SGLang {table.release}"
    try:
        if "--config" in args and table.supports_config_file:
            args = report.argv = merge_config_file(table, args)
        ns = parse(table, args)
    except ParseError as exc:
        msg = str(exc)
        # the flags the user meant, where the release does not know or cannot tell apart the one given
        meant = closest_options(table, args, msg) if "unrecognized arguments" in msg or "ambiguous option" in msg \
            else {}
        said = "; ".join(f"{word}: did you mean {' or '.join(near)}?" for word, near in meant.items())
        report.findings.extend(_ask("parse", LaunchFacts(tree, release=rel, parse_error=msg, closest=said)))
        return report
    algo = ns.get(SPECULATIVE_ALGORITHM)
    if algo is not None and table.algorithms is not None and algo.upper() not in table.algorithms:
        report.findings.extend(_ask("algorithm", LaunchFacts(tree, release=rel, algorithm=algo,
                                                             algorithms=tuple(table.algorithms))))
        return report
    s = report.settings = flags_as_given(ns, table)
    if s.algorithm is None:
        return report
    values = server_args_values(tree, ns, table.field_defaults)
    hub_notes = []  # model ids read through the Hugging Face cache, or why they could not be
    for (key, rev), index, flag in zip(MODEL_FIELDS, (1, 0), ("--model-config", "--draft-config")):
        if configs[index] is None and isinstance(values.get(key), str):
            try:
                found = hub_config(values[key], values.get(rev))
            except HubError as exc:
                hub_notes.append((f"{exc}", flag))
                continue
            if found is not None:
                configs = (found.data, configs[1]) if index == 0 else (configs[0], found.data)
                report.tree_limitations.append(f"{'the draft model' if index == 0 else 'the model'}'s config "
                                               f"{values[key]} read from the Hugging Face cache: {found.path}")
    sel = select_backends(tree, values, machine, *configs)
    if sel.left:  # the launch leaves backends to SGLang: the tree's own code picks them for this GPU
        apply_selection(sel, values, s)
        report.backend_selection_by = sel.entry
        report.backends_picked = [PickedBackend(field=p.field, value=p.value, picked_at=p.picked_at, set_at=p.set_at)
                                  for p in sel.picked.values() if isinstance(p.value, str)]
        report.verdict_depends_on_gpu = machine.assumed and bool(report.backends_picked)
        if sel.failed or ATTENTION_BACKEND in sel.left and ATTENTION_BACKEND not in sel.picked:
            report.backend_selection_note = (f"the tree's start-up code ({sel.entry}) could not pick one here: "
                                             f"{sel.failed}" if sel.failed else
                                             f"the tree's start-up code ({sel.entry}) left "
                                             f"attention_backend unset here") + (
                f"; it read what ddcheck does not have: pass {' and '.join(sel.supply)} (or a local --model-path "
                "folder with its config.json)" if sel.supply else "")
            report.tree_limitations.extend(x for x in sel.limitations if x not in report.tree_limitations)
    run = run_handler(tree, values, *configs, gpu=machine.vendor, platform=platform_of(machine))
    report.handler = str(run.handler) if run.handler else None
    report.tree_limitations = list(dict.fromkeys(report.tree_limitations + list(run.limitations)))
    torch_missing = _torch_missing(run.stand_in_modules, run.failed)
    supply = [n.supply for n in run.needs if n.supply] + [flag + " PATH" for _, flag in hub_notes]
    if sel.left and (sel.failed or ATTENTION_BACKEND in sel.left and ATTENTION_BACKEND not in sel.picked):
        why = _why_not("the attention backend is left to SGLang and its start-up code could not pick it here",
                       sel.failed, list(sel.supply) + supply, torch_missing)
        report.not_judged.append(why if "pass " in why else why + "; pass --attention-backend NAME, the backend "
                                 "the server will use, to judge the launch on it")
    if run.ok:
        explicit = {k: v for k, v in ns.items() if k in s.raw or _given(args, table, k)}
        # A table rule is kept (with its id and fix) when the tree's run went through its guard:
        # raised there or logged there. Rules whose guard the tree skipped are dropped.
        facts = LaunchFacts(tree, s, release=rel, run=run, explicit=explicit)
        fired = {(w.path, w.line) for w in [run.rejected_at, *(log.where for log in run.logged)] if w is not None}
        confirmed = [f for f in _ask("startup", facts) if any((e.path, e.line) in fired for e in f.evidence)]
        covered = {(e.path, e.line) for f in confirmed for e in f.evidence}
        report.findings.extend(confirmed)
        report.findings.extend(f for f in _ask("tree_run", facts)
                               if not any((e.path, e.line) in covered for e in f.evidence))
        if run.rejected:
            s.resolved_by = "tree"
            return report
        _apply(s, run, tree, environ.for_tree())
        if sel.picked:  # the speculative handler may change a backend it was left (the tree's own rewrite)
            settle(s, {f: run.values.get(f) for f in sel.picked})
        report.not_judged += _draft_architecture(s, tree, run, configs, machine)
        each = _per_site(s, tree)
        unknown_widths = [(x, why) for x in each for why in _widths_not_judged(x)]
        stage = "site"  # ddcheck's tables of start-up guards only label the tree's own rejections (above)
    else:
        # Fails closed: no table stands in for the tree's start-up code. What the scan says of a backend
        # the launch names, whatever W is, is still reported.
        report.tree_note = run.failed
        report.not_judged.append(_why_not("the tree's start-up code could not run here", run.failed, supply,
                                          torch_missing))
        facts = LaunchFacts(tree, s, release=rel, run=run)
        stage = "tree_failed"
        each = [s]
    if report.not_judged:
        report.not_judged += [note for note, _ in hub_notes]
    seen: set[str] = set()
    for x in each:  # every reached site is judged: a finding at any of them counts
        for f in _ask(stage, facts.at(x)):
            key = repr((f.rule, f.message, [(e.path, e.line) for e in f.evidence]))
            if key not in seen:
                seen.add(key)
                report.findings.append(f)
    if run.ok:
        report.not_judged += list(dict.fromkeys(
            why for x, why in unknown_widths if not (x.verify_width_per_step and _any_width_is_right(x, tree, run))))
    if any(f.rule == "DD200" for f in report.findings):
        report.scan_engine = scan_errors(tree, [])[1]
    if smoke is not None and (ran := smoke(s, tree)) is not None:
        add_smoke(report, ran)
    sort_findings(report)
    return report


def _ask(stage: str, facts: LaunchFacts) -> list[Finding]:
    """The findings of the rules the registry asks at ``stage`` (:func:`ddcheck.rules.launch_rules`)."""
    return [f for rule in launch_rules(stage) for f in rule.check(facts)]


def _draft_architecture(s: SpecSettings, tree: SourceTree, run: TreeRun, configs, machine: Gpu) -> list[str]:
    """Whether the draft model uses MLA, where a check turns on it (a topk-1 guard in the draft
    backend's MLA module only): from the tree's own ModelConfig, on the server args its start-up code
    left. What could not be decided here is said, with what would decide it."""
    hit = LaunchFacts(tree, s).mla_topk_guard()
    if hit is None or hit[2]:
        return []
    from ddcheck.config.architecture import attention_arch

    arch = attention_arch(tree, run.values, *configs, gpu=machine.vendor, platform=platform_of(machine), draft=True)
    s.draft_mla, s.draft_attention_arch_at = arch.mla, arch.at
    if arch.mla is not None:
        return []
    backend, ev, _ = hit
    guard = f"{ev[0].path}:{ev[0].line}"
    what = (f"mla-topk: topk={s.eagle_topk} with draft backend {backend!r}, whose MLA module only supports topk 1 "
            f"({guard}): whether the draft model ({arch.model}) uses MLA is decided by the tree's ModelConfig from "
            f"its config, which could not be built here")
    supply = arch.supply or ([] if configs[0] is not None else ["--draft-config PATH"])
    return [_why_not(what, arch.why, supply, _torch_missing([], arch.why))]


def _given(args: list[str], table, dest: str) -> bool:
    spec = table.flag(dest)
    return spec is not None and any(a.split("=", 1)[0] in spec.options for a in args)


def _any_width_is_right(s: SpecSettings, tree: SourceTree, run: TreeRun) -> bool:
    """The launch's verify step is right whatever W the worker computes: its backend's verify path has
    no width fixed at start-up (the scan finds none), and its graphs are off or replay only the width
    they captured (narrower steps run eagerly)."""
    b = s.verify_backend
    if b is None or b not in backend_files(tree) or (s.cuda_graph and not s.replay_gate_at):
        return False
    if not verify_findings_by_backend(tree, [b]).get(b):
        return True
    # what the verify-width check says of a width that differs from C on this launch's paths
    other = s.model_copy(update={"verify_width_min": (s.num_draft_tokens or 0) + 1, "verify_width": None})
    return not launch_rule("DD200").check(LaunchFacts(tree, other, run=run))


def _widths_not_judged(s: SpecSettings) -> list[str]:
    """Why W or C is not known for this launch, from the tree's own code (empty: both are)."""
    out = []
    if s.num_draft_tokens is None:
        out.append("C (speculative_num_draft_tokens) is not set by the tree's start-up code for this launch; "
                   "pass --speculative-num-draft-tokens (or the flags the tree derives it from)")
    where = f" ({s.verify_input} built at {s.verify_input_at}: draft_token_num={s.verify_width_expr})" \
        if s.verify_input else ""
    if s.verify_input is None:
        out.append(f"the tree's worker for {s.algorithm} builds no verify input ddcheck can read for this launch"
                   + (f" ({s.worker_note})" if s.worker_note else ""))
    elif s.verify_width is None and s.verify_width_min is None:
        out.append(f"the verify width W could not be evaluated from the tree's worker{where}")
    elif s.verify_width is None or s.verify_width_min is None:
        end = "upper" if s.verify_width is None else "lower"
        out.append(f"the {end} end of the per-step verify width could not be evaluated from the tree's "
                   f"worker{where}")
    return out


def _apply(s: SpecSettings, run: TreeRun, tree: SourceTree, environ: dict[str, str] | None = None) -> None:
    """The settings as the tree's start-up code left them, and W from the tree's worker (its verify
    input's ``draft_token_num``, evaluated for these values and this environment): no table."""
    v = run.values
    s.resolved_by, s.values = "tree", v
    algo = v.get(SPECULATIVE_ALGORITHM)
    s.algorithm = algo.upper() if isinstance(algo, str) else s.algorithm
    for field, key in (("num_steps", SPECULATIVE_NUM_STEPS), ("eagle_topk", SPECULATIVE_EAGLE_TOPK),
                       ("num_draft_tokens", SPECULATIVE_NUM_DRAFT_TOKENS),
                       (MAX_RUNNING_REQUESTS, MAX_RUNNING_REQUESTS)):
        if isinstance(v.get(key), int):
            setattr(s, field, v[key])
    if isinstance(v.get(SPECULATIVE_DDTREE_BUDGET), int):
        s.ddtree_budget = v[SPECULATIVE_DDTREE_BUDGET]
    if isinstance(v.get(SPECULATIVE_DFLASH_BLOCK_SIZE), int):
        s.dflash_block_size = v[SPECULATIVE_DFLASH_BLOCK_SIZE]
    if v.get(DISABLE_CUDA_GRAPH):
        s.cuda_graph = False
    s.verify_width = s.verify_width_min = None
    facts = verify_inputs(tree, s.algorithm, v, environ=environ) if s.algorithm else None
    s.worker_note = facts.note if facts is not None else ""
    s.step_entry = facts.entry or None if facts is not None else None
    s.verify_sites = [VerifySite(
        cls=c.cls, at=f"{c.path}:{c.line}", reached=c.reached, why=c.reached_why, width=c.width,
        width_min=c.width if c.width is not None else c.width_min,
        width_max=c.width if c.width is not None else c.width_max, width_expr=c.width_expr,
        width_from=c.width_from,
        per_step=c.width_expr if c.width is None and (c.per_step or c.width_min != c.width_max) else None,
        fields=c.attrs, input_type=c.input_type, sets=c.kwargs) for c in (facts.sites if facts else [])]
    reached = [site for site in s.verify_sites if site.reached is not False]
    if reached:
        _judge_site(s, reached[0], tree)


def reached_sites(s: SpecSettings) -> list[VerifySite]:
    """The verify-input sites the launch's step reaches (each is judged)."""
    return [site for site in s.verify_sites if site.reached is not False]


def _judge_site(s: SpecSettings, site: VerifySite, tree: SourceTree) -> None:
    """Sets the verify-input fields of ``s`` to ``site``'s, and the graph runner's capture for it."""
    s.verify_input, s.verify_input_fields, s.verify_input_type = site.cls, site.fields, site.input_type
    s.verify_input_kinds = _class_and_bases(tree, site.cls, site.at.rsplit(":", 1)[0])
    s.verify_input_at = site.at
    s.verify_input_sets = site.sets
    s.verify_width_expr = site.width_expr
    s.verify_width, s.verify_width_min = site.width_max, site.width_min
    s.verify_width_per_step = site.per_step
    if s.algorithm and s.cuda_graph:
        cap = graph_capture(tree, s.algorithm, s.values, set(s.verify_input_fields) if s.verify_input else None)
        s.capture_width, s.capture_at, s.replay_gate_at = cap.width, cap.at or None, cap.gate_at or None


def _class_and_bases(tree: SourceTree, cls: str, path: str) -> list[str]:
    """``cls`` (as the module at ``path`` names it) and its bases in the tree, by name; [] where not found."""
    mods = TreeModules.of(tree)
    hit = mods.find_class(cls, mods.dotted(path))
    return [node.name for _, node, _ in mods.class_chain(hit[1].name, hit[2])] if hit is not None else []


def _per_site(s: SpecSettings, tree: SourceTree) -> list[SpecSettings]:
    """The launch's settings once per reached site (the first is ``s`` itself)."""
    out = [s]
    for site in reached_sites(s)[1:]:
        other = s.model_copy(deep=True)
        other.values = s.values
        _judge_site(other, site, tree)
        out.append(other)
    return out
