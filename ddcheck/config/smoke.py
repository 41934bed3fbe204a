"""``ddcheck config --smoke``: the launch, run. It composes the two commands, from a floor above both:
``ddcheck.config`` resolves the launch (C, W, the verify-input class its worker builds, the width its
graph runner captures with) and ``ddcheck.smoke`` runs the tree's verify path (the launch's backend,
or the one the tree picked) at them; neither package imports the other for it. :func:`ddcheck.config.check_launch` takes :func:`launch_smoke` as
its ``smoke`` argument (the CLI's ``config --smoke`` passes it)."""

from __future__ import annotations

from dataclasses import dataclass

from ddcheck.base.findings import Finding
from ddcheck.config.api import _jsonable
from ddcheck.config.facts import LaunchFacts
from ddcheck.config.speculative import SpecSettings
from ddcheck.rules import launch_rules
from ddcheck.tree.sources import SourceTree


@dataclass
class SmokeRun:
    """The launch's verify path, run (what the ``smoke`` rules judge): smoke's exit code and verdict, the
    backend, C and W, and the verify input it ran with."""

    exit_code: int
    verdict: str
    backend: str
    C: int
    W: int
    inputs: str


def _unjudged(message: str, to_judge: str) -> str:
    """The asked-for smoke did not run: could not judge (exit 3 unless there are errors)."""
    return f"launch-smoke: {message}; {to_judge}"


def launch_capture(s: SpecSettings) -> dict:
    """The launch's CUDA-graph runner as config read it (``graph_capture``, once, in ``judge._apply``): the width
    it captures target verify at, where, and its replay gate; ``off`` where the launch runs without graphs."""
    if not s.cuda_graph:
        return {"off": "CUDA graphs are disabled for this launch"}
    return {"width": s.capture_width, "at": s.capture_at or "", "gate_at": s.replay_gate_at or ""}


def launch_smoke(s: SpecSettings, tree: SourceTree, device: str = "cpu") -> list[Finding] | str:
    """The launch, run: the tree's verify path at the launch's C and W, with the verify-input
    class its worker builds, captured at the width its graph runner captures with, on the backend of its
    verify path (passed, or picked by the tree's start-up code for the GPU) where ddcheck smoke runs it
    (``device``: cpu, the Triton interpreter, or cuda): the findings of the rules that judge the run, or
    why it could not run (the launch is then not judged by it)."""
    from ddcheck.contract import backends
    from ddcheck.smoke import run_smoke

    W, C = s.verify_width, s.num_draft_tokens
    name = s.verify_backend  # the launch's, or the one the tree's start-up code picked for it
    spec = backends.BACKENDS.get(name) if name else None
    if spec is None or not spec.runs or W is None or C is None:
        runs = ", ".join(b.name for b in backends.BACKENDS.values() if b.runs)
        why = ("W or C is not known" if W is None or C is None else
               f"ddcheck smoke has no runner for {name}: {spec.why_not}" if spec is not None else
               f"ddcheck smoke does not run {name or 'an unknown backend'} (it runs {runs}); it is judged statically")
        return _unjudged(f"not run: {why}", "a launch whose backend ddcheck smoke runs (`ddcheck smoke "
                         "--list-backends`), or config without --smoke")
    values = {k: v for k, v in s.values.items() if _jsonable(v)} if s.values else None
    r = run_smoke(tree.label, budget=W - 1, num_draft_tokens=C, device=device,
                  launch=values, capture=launch_capture(s), backend=name)
    inputs = r.verify_inputs.get(f"W={W} C={C}")
    if inputs is None:
        inputs = "ddcheck's stand-in verify input"
    else:
        inputs = ("an instance of " if inputs.split()[0] in r.verify_input_instances
                  else "a stand-in with the fields of ") + inputs
    if r.exit_code not in (0, 1):  # 3: the smoke could not run here (torch missing, a crash); 2: it was refused
        to_judge = "; ".join(n["to_judge"] for n in r.not_judged) or "a smoke run that does not fail"
        return _unjudged(f"could not run: {r.verdict}", to_judge)
    facts = LaunchFacts(tree, s, release=s.release,
                        smoke=SmokeRun(r.exit_code, r.verdict, name, C, W, inputs))
    return [f for rule in launch_rules("smoke") for f in rule.check(facts)]
