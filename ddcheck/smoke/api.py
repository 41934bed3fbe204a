"""``run_smoke`` / ``smoke_main``: the cases, the verdict and the exit code."""

from __future__ import annotations

import difflib
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ddcheck.base.errors import EXIT_NOT_JUDGED, EXIT_USAGE, not_judged
from ddcheck.smoke import requirements
from ddcheck.smoke.loader import BACKEND_RELPATH, HarnessError, LoadContext, SglangImporter, SmokeUsageError, \
    from_source_note
from ddcheck.smoke.report import HarnessTrace, PathResult, SmokeReport, render_text
from ddcheck.tree.names import INIT_CUDA_GRAPH_STATE, INIT_FORWARD_METADATA, SPEC_INFO_MODULE, SPEC_REGISTRY_MODULE
from ddcheck.tree.names import SERVER_ARGS_SETTER, SINGLE_PROCESS_STARTUP
from ddcheck.tree.names import SPECULATIVE_ALGORITHM, SPECULATIVE_EAGLE_TOPK, SPECULATIVE_NUM_DRAFT_TOKENS, SPECULATIVE_NUM_STEPS
from ddcheck.tree.names import DDTREE, EAGLE, EAGLE_VERIFY_INPUT, SPECULATIVE_DDTREE_BUDGET, SPECULATIVE_PREFIX

if TYPE_CHECKING:
    from ddcheck.base.children import Kept

SMOKE_CHILD = ["-m", "ddcheck.smoke.child"]  # the interpreter's arguments that start a smoke child

SEED_BUDGET, SEED_C = 7, 8  # the DDTree seed configuration: budget 7 verifies 8 = C tokens
PATHS = ("eager", "graph")
DEVICES = re.compile(r"cpu|cuda(:\d+)?")  # cpu: Triton's interpreter; cuda[:N]: a GPU


def backend_name(name: str) -> str:
    """The known backend called ``name``, in any case; ValueError with a "did you mean" and the choices."""
    from ddcheck.contract import backends

    found = {b.lower(): b for b in backends.BACKENDS}
    if name.lower() in found:
        return found[name.lower()]
    # a misspelt name, or one of the backend's file (flashattention_backend.py is fa3)
    like = {**{b.relpath.rsplit("/", 1)[-1].removesuffix(".py").removesuffix("_backend"): b.name
               for b in backends.BACKENDS.values()}, **found}
    close = difflib.get_close_matches(name.lower(), list(like), n=1)
    hint = f"; did you mean {like[close[0]]!r}?" if close else ""
    raise ValueError(f"unknown backend {name!r}{hint} (known: {', '.join(backends.BACKENDS)})")


def check_device(device: str) -> None:
    """ValueError unless ``device`` is one smoke runs on."""
    if not DEVICES.fullmatch(device):
        raise ValueError(f"unknown device {device!r}: cpu (Triton's interpreter), cuda or cuda:N")


def default_shape(device: str, dtype: str | None = None):
    """Small shapes on CPU (the Triton interpreter runs a kernel launch in well under a second),
    model-like ones on a GPU."""
    import torch

    from ddcheck.smoke.batch import Shape

    if device == "cpu":
        return Shape(dtype=getattr(torch, dtype or "float32"))
    return Shape(num_q_heads=32, num_kv_heads=8, head_dim=128, dtype=getattr(torch, dtype or "bfloat16"),
                 max_context_len=16384, pool_size=65536, max_bs=32)


def default_prefix_lens(device: str) -> list[int]:
    # Different per request, one past a 64-key block so the prefix loop runs more than once.
    return [11, 37, 70] if device == "cpu" else [100, 517, 1030, 64, 2047, 333]


def default_tolerance(dtype) -> tuple[float, float]:
    import torch

    return {torch.float32: (1e-3, 1e-3), torch.float16: (4e-3, 4e-3), torch.bfloat16: (2e-2, 2e-2)}.get(
        dtype, (2e-2, 2e-2))


def run_smoke(
    target: str,
    *,
    backend_file: str | None = None,
    backend_source: str | None = None,
    budget: int = 16,
    num_draft_tokens: int = 8,
    device: str = "cpu",
    seed: int = 0,
    prefix_lens: list[int] | None = None,
    dtype: str | None = None,
    graph_capture_width: Literal["tree", "C", "W"] = "tree",
    seed_case: bool = True,
    isolate: bool = True,
    timeout: float = 1800,
    launch: dict | None = None,
    backend: str = "triton",
    done: list[dict] | None = None,
    restartable: bool = False,
    capture: dict | None = None,
    kept: "Kept | None" = None,
) -> "SmokeReport":
    """Run the target's TritonAttnBackend on a DDTree batch of W = budget + 1 tokens per request
    with the backend built for C = ``num_draft_tokens``; compare against a float64 reference.

    ``backend_file``/``backend_source`` replace the tree's ``triton_backend.py`` (a fixed copy);
    the base backend and kernels still come from the tree. The graph path captures at the width the
    tree's CUDA-graph runner captures target verify at for each case's launch (``graph_capture_width=
    "tree"``; C where the runner gives none); "C" or "W" overrides it. ``isolate`` runs it in a fresh
    interpreter (see :mod:`ddcheck.smoke.child`). ``launch``: the ``server_args`` values of a launch as
    the tree's start-up resolved them (``ddcheck config --smoke``), whose algorithm's worker gives the verify
    input, and which the tree's ``ServerArgs`` is given without running its start-up again; ``capture``: that
    launch's graph runner as ``ddcheck config`` read it (``{"width", "at", "gate_at"}``, or ``{"off": why}``
    for a launch without CUDA graphs). By default the tree's DDTREE worker, if it has one; where it has
    none, ``budget`` is a probe (``SmokeReport.probe``). ``backend``: a
    name from :mod:`ddcheck.contract.backends` (``ddcheck smoke --list-backends``); backends without runnable
    kernels are judged by the verify contract alone.

    Every width runs, W < C included: the batch's tensors and the backend's output are backed by spare
    rows, and rows a path writes past the batch are reported (``PathResult.out_of_bounds``) and make
    it wrong.

    A path that faults on the device (a CUDA device-side assert) ends the process's CUDA context: its
    result is kept and, isolated, the paths after it run in a new process (``done``: the results so far;
    ``restartable``: a child's run, whose parent does that). ``kept``: isolated runs of the same target
    share a child process there (:class:`ddcheck.base.children.Kept`); a run whose kept child dies is run
    again in a fresh one, so it is judged as it always was.
    """
    try:
        backend = backend_name(backend)  # in any case; an unknown name is the harness failure below
    except ValueError:
        pass
    args = dict(target=target, backend_file=backend_file, backend_source=backend_source, budget=budget,
                num_draft_tokens=num_draft_tokens, device=device, seed=seed,
                prefix_lens=prefix_lens, dtype=dtype, graph_capture_width=graph_capture_width, seed_case=seed_case,
                launch=launch, backend=backend, capture=capture)
    t0 = time.perf_counter()
    report = _blank_report(args)
    try:
        spec = _backend(backend)
        try:
            check_device(device)
        except ValueError as exc:
            raise SmokeUsageError(str(exc)) from None
        missing = requirements.problem(device)
        if missing:  # the line says what to install: could not judge here
            raise HarnessError(missing, missing)
        _check_widths(budget, num_draft_tokens)
        if graph_capture_width not in ("tree", "C", "W"):
            raise SmokeUsageError(f"graph_capture_width must be 'tree' (the tree's graph runner's), 'C' or 'W', "
                                  f"not {graph_capture_width!r}")
        if isolate:
            if backend_file is not None and backend_source is None:
                try:
                    args["backend_source"] = Path(backend_file).read_text(encoding="utf-8")
                except OSError:
                    pass  # the child reports the unreadable file
            return _isolated(args, timeout, report, kept)
        _run(report, target, backend_file, backend_source, prefix_lens, dtype,
             graph_capture_width, seed_case, launch, spec, done, capture)
    except SmokeUsageError as exc:
        report.exit_code, report.verdict = EXIT_USAGE, f"usage: {exc}"
    except HarnessError as exc:
        _unjudged(report, f"harness failure: {exc}", exc.to_judge)
    except Exception as exc:  # never let a crash look like a verdict
        _unjudged(report, f"harness failure: {type(exc).__name__}: {exc}")
    else:
        if not report.restart:
            _verdict(report)
        elif not restartable:  # no parent to run the paths after the fault
            p = report.paths[-1]
            _unjudged(report, f"harness failure: {p.case}/{p.path} faulted on the device ({p.error}) and no "
                              f"path after it can run in this process", "run isolated (the default)")
    report.seconds = round(time.perf_counter() - t0, 2)
    return report


def _backend(name: str):
    """The named backend, if smoke can run it here; else the reason, as a harness failure."""
    from ddcheck.contract import backends

    try:
        spec = backends.get(backend_name(name))
    except ValueError as exc:
        raise SmokeUsageError(str(exc)) from None
    if not spec.runs:
        raise HarnessError(f"smoke cannot run the {name} backend here: {spec.why_not}",
                           "run it where its kernels run, or judge it with `ddcheck scan`")
    return spec


def _blank_report(args: dict) -> SmokeReport:
    from ddcheck.contract import backends

    spec = backends.BACKENDS.get(args["backend"])
    relpath = spec.relpath if spec else BACKEND_RELPATH
    label = args["backend_file"] or ("<backend_source>" if args["backend_source"] is not None
                                     else f"{args['target']}!{relpath}")
    return SmokeReport(target=args["target"], backend=label, attention_backend=args["backend"],
                       kernels=spec.kernels if spec else None, device=args["device"], dtype=args["dtype"] or "",
                       budget=args["budget"], width=args["budget"] + 1, num_draft_tokens=args["num_draft_tokens"],
                       seed=args["seed"], graph_capture_width=args["graph_capture_width"],
                       width_of="launch" if args.get("launch") else "budget")


def _check_widths(budget: int, c: int) -> None:
    """W and C any size (every width runs in padded buffers, see build_batch)."""
    if budget < 0 or c < 1:
        raise SmokeUsageError("budget must be >= 0 and num_draft_tokens >= 1")


def _isolated(args: dict, timeout: float, fail: SmokeReport, kept: "Kept | None" = None) -> SmokeReport:
    """Run in a child process (:mod:`ddcheck.smoke.child`); any failure to produce a report is exit 3 (not
    judged)."""
    import os
    import tempfile

    from ddcheck.base.children import Child

    env = dict(os.environ)
    if args.get("device", "cpu") != "cpu":  # a kernel's fault is raised where it is launched, in its path
        env.setdefault("CUDA_LAUNCH_BLOCKING", "1")
    deadline = time.monotonic() + timeout
    earlier: list[SmokeReport] = []  # reports of children that stopped at a device fault
    with tempfile.TemporaryDirectory(prefix="ddcheck-smoke-") as tmp:
        env["TMPDIR"] = tmp  # what a child leaves behind (one that ends abruptly) goes with this folder
        while True:
            left = max(1.0, deadline - time.monotonic())
            answer = None
            if kept is not None and not earlier:
                # its own folder is its temporary one (ddcheck.base.children.serve): not this run's, which goes
                with kept.lease((args["target"], args.get("device", "cpu")), SMOKE_CHILD,
                                {k: v for k, v in env.items() if k != "TMPDIR"}, prefix="ddcheck-smoke-") as child:
                    answer = child.ask(args, left)
                    if "died" not in answer and SmokeReport.model_validate(answer["report"]).restart:
                        child.close()  # a device fault ended its CUDA context: it serves no other run
                if "died" in answer:  # perhaps of what an earlier run left in it: this run, on its own
                    answer = None
            if answer is None:
                with Child(SMOKE_CHILD, env, prefix="ddcheck-smoke-") as child:
                    answer = child.ask(args, max(1.0, deadline - time.monotonic()))
            if "died" in answer:
                _unjudged(fail, f"harness failure: the smoke child process {answer['died']}",
                          *(("a machine with more time (the child's timeout), or a GPU (--device cuda)",)
                            if answer["died"].startswith("did not answer") else ()))
                return fail
            report = SmokeReport.model_validate(answer["report"])
            # a new process per fault; each one runs at least the faulted path, so this ends
            if not report.restart or len(report.paths) <= len(args.get("done") or ()):
                break
            earlier.append(report)
            args = dict(args, done=[p.model_dump() for p in report.paths])
    for before in earlier:  # what the stopped children saw and found
        _merge(report.harness, before.harness)
        report.device_faults = list(dict.fromkeys(before.device_faults + report.device_faults))
        report.limitations = list(dict.fromkeys(before.limitations + report.limitations))
    if report.restart:
        p = report.paths[-1]
        _unjudged(report, f"harness failure: {p.case}/{p.path} faulted on the device ({p.error}) in a new "
                          f"process as well", "a tree whose paths run on this device")
        report.restart = False
    elif earlier:
        report.limitations.append(
            "a path faulted on the device (" + ", ".join(report.device_faults) + "): it is judged as it failed, "
            "and the paths after it ran in a new process (a fault ends a process's CUDA context)")
    return report


def _run(report: SmokeReport, target, backend_file, backend_source, prefix_lens, dtype,
         capture_mode, seed_case, launch, spec, done: list[dict] | None = None, capture: dict | None = None) -> None:
    """The cases and paths, in order; ``done``: the results, in that order, of the paths a process before
    this one ran (up to a device fault, which ends a process's CUDA context): not run again."""
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
    except ImportError as exc:
        raise HarnessError(f"{exc.name} is not installed: {requirements.EXTRA}",
                           f"install torch and triton: {requirements.EXTRA}") from exc
    from ddcheck.tree.sources import TargetError, installed_sglang, open_target
    from ddcheck.smoke.harness import DeviceFault

    w, c, device = report.width, report.num_draft_tokens, report.device
    if device == "cpu" and not _interpreted():
        raise HarnessError("triton was imported before TRITON_INTERPRET=1 was set; run with isolate=True")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise HarnessError(f"device {device} requested but torch sees no CUDA device",
                           "run on a machine with a CUDA device, or with --device cpu")
    if backend_file is not None:
        try:
            backend_source = Path(backend_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise SmokeUsageError(f"--backend-file {backend_file}: {exc}") from exc
    if target == "installed":  # the installed sglang, located without importing it
        pkg = installed_sglang()
        if pkg is None:
            raise SmokeUsageError("no installed sglang found")
        target = str(pkg)
    try:
        tree = open_target(target)
    except TargetError as exc:
        raise SmokeUsageError(str(exc)) from exc

    shape = default_shape(device, dtype)
    report.dtype = str(shape.dtype).replace("torch.", "")
    report.heads = f"{shape.num_q_heads}/{shape.num_kv_heads} x {shape.head_dim}"
    if prefix_lens is None and spec.max_request_len:  # requests kept inside the backend's design
        widest = max(w, c, SEED_BUDGET + 1)
        prefix_lens = [min(p, spec.max_request_len - widest - i) for i, p in enumerate(default_prefix_lens(device))]
    report.prefix_lens = prefix_lens = list(prefix_lens or default_prefix_lens(device))
    atol, rtol = tol = default_tolerance(shape.dtype)
    report.tolerance = {"atol": atol, "rtol": rtol}

    # (case, W, C): the DDTree width, the control at W == C, and the seed's budget 7 at C = 8.
    cases = [("ddtree", w, c)] if w != c else []
    cases.append(("control", c, c))
    if seed_case and (c, c) != (SEED_C, SEED_BUDGET + 1):
        cases.append(("seed", SEED_BUDGET + 1, SEED_C))

    paths = PATHS
    if device == "cpu" and spec.graph_needs_cuda:
        paths = ("eager",)
        report.limitations.append(f"the graph path does not run on a CPU: {spec.graph_needs_cuda}; "
                                  f"run with --device cuda for it")
    if capture_mode == "tree" and capture and capture.get("off"):
        paths = tuple(p for p in paths if p != "graph")
        report.limitations.append(f"the launch runs target verify without CUDA graphs ({capture['off']}): the "
                                  f"graph path is not the launch's, and is not run")
    if launch:
        report.limitations.append("the tree's ServerArgs holds the launch's values as the tree's start-up "
                                  "resolved them (`ddcheck config`): that start-up is not run a second time")
    trace = HarnessTrace()
    inputs = _tree_inputs(tree, report, launch, capture)
    # The tree's own verify-input classes are run from the tree, with the SpecInput base they need.
    found = [inputs(w_, c_) for _, w_, c_ in cases]
    modules = {f.module for f in found if f.cls} | {f.mask_from.module for f in found if f.mask_from}
    extra = modules | {SPEC_INFO_MODULE, SPEC_REGISTRY_MODULE} if modules else set()
    recorded = [PathResult.model_validate(p) for p in done or ()]
    order: list[PathResult] = []  # every path's result, in the order they ran

    def run_path(session, case, path, batch, capture, pad) -> PathResult:
        if recorded and (recorded[0].case, recorded[0].path) == (case, path):
            result = recorded.pop(0)  # ran in an earlier process
        else:
            result = session.run(case, path, batch, tol, capture, pad)
        order.append(result)
        return result

    try:
        _run_cases(report, tree, spec, shape, device, cases, paths, prefix_lens, capture_mode, inputs,
                   extra, backend_source, trace, run_path, launch)
    except DeviceFault as fault:  # this process can run nothing more on the device: the parent starts another
        report.paths = order + [fault.result]
        report.device_faults.append(f"{fault.result.case}/{fault.result.path}")
        report.restart = True
        return
    report.harness = trace
    report.loader = "tree"


def _run_cases(report, tree, spec, shape, device, cases, paths, prefix_lens, capture_mode, inputs,
               extra, backend_source, trace, run_path, launch=None) -> None:
    from ddcheck.smoke.harness import Session, build_batch, pinned_memory_ignored, triton_interpreter

    with triton_interpreter(device == "cpu"), pinned_memory_ignored(device == "cpu"):
        for cfg_c in dict.fromkeys(cc for _, _, cc in cases):
            ctx = LoadContext(device=device, num_draft_tokens=cfg_c, num_steps=max(1, cfg_c - 1),
                              attention_backend=spec.name, arch=spec.arch, resolved=launch,
                              # kernels that run here (Triton's, on a CPU) take this machine's paths
                              emulate=spec.kernels is None or device.startswith("cuda"))
            with SglangImporter(tree, ctx, backend_source, extra_real=extra | set(spec.real_modules),
                                backend_module=spec.module) as importer:
                session = Session(importer, shape, cfg_c, device, lambda width, c=cfg_c: inputs(width, c), spec)
                report.block_m = report.block_m or session.block_m()
                for case, cw_, _ in [x for x in cases if x[2] == cfg_c]:
                    found = inputs(cw_, cfg_c)
                    batch, pad = build_batch(cw_, prefix_lens, shape, device, report.seed, cfg_c,
                                             chain=found.chain)
                    capture = _capture_width(report, found, case, cw_, cfg_c, capture_mode)
                    ran = [run_path(session, case, path, batch, capture, pad) for path in paths
                           if path != "graph" or capture is not None]
                    report.paths += ran
                    eager, graph = ran[0], ran[-1]
                    if case == "ddtree" and len(ran) > 1 and capture != cw_ and eager.status == "ok" \
                            and graph.status == "wrong":
                        # Is it the backend or the capture width? Re-capture at W to tell them apart.
                        diag = run_path(session, "ddtree-capture-at-W", "graph", batch, cw_, pad)
                        report.paths.append(diag)
                    failing = [p for p in ran if p.status in ("wrong", "crash")]
                    if case == "ddtree" and cw_ in session.tree_masks and failing:
                        # The width or the mask the tree built? Re-run those paths with ddcheck's reference layout.
                        session.use_tree_mask = False
                        try:
                            for p in failing:
                                report.paths.append(run_path(session, "ddtree-reference-mask", p.path, batch,
                                                             capture, pad))
                        finally:
                            session.use_tree_mask = True
                importer.collect()
                _merge(trace, importer.trace)
                trace.started = list(dict.fromkeys(trace.started + importer.published))
                for what, why in session.input_failures.items():
                    note = f"the tree's module {what} stopped while imported here ({why})"
                    if note not in report.limitations:
                        report.limitations.append(note)
                for what, why in session.mask_failures.items():
                    note = f"the tree's mask builder {what} does not run here ({why}): ddcheck laid out the " \
                           f"batch's tree mask instead"
                    if note not in report.limitations:
                        report.limitations.append(note)
                for what, how in session.named_tuples.items():
                    if (note := f"{what} is {how}") not in report.limitations:
                        report.limitations.append(note)
                for label, entry in importer.trace.from_source.items():
                    if (note := from_source_note(label, entry)) not in report.limitations:
                        report.limitations.append(note)
                for line in importer.runtime.report.stood_in:
                    note = f"stand-in for {line}: what it would compute is not part of this verdict"
                    if note not in report.limitations:
                        report.limitations.append(note)
                report.verify_input_instances = sorted(set(report.verify_input_instances) | session.instances)
                for width, missed in session.unevaluated.items():
                    report.worker_call[f"W={width} C={cfg_c}"] = missed
                    note = (f"W={width} C={cfg_c}: keywords of the tree's verify-input call not evaluated here, "
                            f"given the batch's own value under the keyword's name, else the class's default "
                            f"(None where there is neither): "
                            + "; ".join(f"{k} ({why})" for k, why in sorted(missed.items())))
                    report.limitations.append(note)
                for width, builder in session.tree_masks.items():
                    report.tree_masks[f"W={width} C={cfg_c}"] = builder
                for width, where in session.masks_withheld.items():
                    note = (f"W={width} C={cfg_c}: the tree's worker passes custom_mask=None for this backend "
                            f"({where}): kept, the backend gets no mask")
                    if note not in report.limitations:
                        report.limitations.append(note)


def _capture_width(report: SmokeReport, found, case: str, width: int, c: int, mode: str) -> int | None:
    """The width a case's graph path captures at: the tree's graph runner's for the case's launch (``mode``
    "tree"; C where it gives none), or the override ("C", "W"); None where the runner replays no graph for a
    batch of this width (its gate: the batch runs eagerly). Recorded in the report, with where it comes from."""
    facts = found.capture if found is not None else {}
    runner, at, gate = facts.get("width"), facts.get("at") or "", facts.get("gate_at") or ""
    entry = {"width": None, "runner_width": runner, "at": at, "gate_at": gate,
             "source": facts.get("source", "runner") if mode == "tree" else "override"}
    report.graph_capture[f"W={width} C={c}"] = entry
    if mode in ("C", "W"):
        entry["width"] = width if mode == "W" else c
        return entry["width"]
    if facts.get("off"):  # the launch runs without CUDA graphs (said once, where the paths are chosen)
        entry["source"] = "off"
        return None
    if runner is None:
        entry["width"], entry["source"] = c, "none"
        if case == "ddtree":
            report.limitations.append(
                f"the tree's graph runner gives no target-verify capture width ddcheck reads for this launch: the "
                f"graph path captures at C = {c}, as SGLang's runner does (--graph-capture-width W runs it at W)")
        return c
    if gate and runner != width:
        if case == "ddtree":
            report.limitations.append(
                f"the tree's graph runner captures target-verify graphs at {runner} ({at}) and replays no batch of "
                f"another width ({gate}): a batch of W = {width} runs eagerly, so its graph path is not run")
        return None
    entry["width"] = runner
    return runner


def _tree_inputs(tree, report: SmokeReport, launch: dict | None = None, capture: dict | None = None):
    """``(width, C) -> inputs.TreeInput``: the verify input of that case, memoized, each recorded in the report.

    The tree's worker for the launch's algorithm (``launch``: resolved server_args values; else DDTREE,
    budget = width - 1) is read (``ddcheck.tree.worker``) and its reached site taken: the tree's class there,
    the call whose keywords each batch evaluates, the mask it passes. Where the tree has no worker for it and
    no launch was given, the width is ``--budget``'s probe: the backend is built for the server args' own
    algorithm and handed the tree's EAGLE verify input at that width. The graph runner's capture width and
    replay gate for the case are read with it (``capture``: the launch's, as ``ddcheck config`` read them)."""
    from ddcheck.smoke.inputs import TreeInput
    from ddcheck.tree.verify_call import find_call
    from ddcheck.tree.worker import graph_capture, verify_inputs

    memo: dict[tuple[int, int], TreeInput] = {}
    base = dict(launch or {SPECULATIVE_ALGORITHM: DDTREE, SPECULATIVE_EAGLE_TOPK: 1, SPECULATIVE_NUM_STEPS: 1})
    algorithm = str(base.get(SPECULATIVE_ALGORITHM) or DDTREE).upper()

    def runner_capture(algo: str, values: dict, fields: list[str], width: int, c: int) -> dict:
        """The tree's graph runner for this case: the width it captures verify graphs at, its replay gate."""
        if capture is not None and (width, c) == (report.width, report.num_draft_tokens):
            return {**capture, "source": "launch"}  # the launch's own, as `ddcheck config` read them
        facts = graph_capture(tree, algo, values, set(fields))
        return {"width": facts.width, "at": facts.at, "gate_at": facts.gate_at, "source": "runner"}

    def get(width: int, c: int) -> TreeInput:
        if (width, c) in memo:
            return memo[(width, c)]
        values = {**base, SPECULATIVE_NUM_DRAFT_TOKENS: c}
        if algorithm == DDTREE:
            values[SPECULATIVE_DDTREE_BUDGET] = width - 1
        facts = verify_inputs(tree, algorithm, values)
        # the site the launch's draft worker reaches (the step model says which; the worker's own first)
        reached = [ch for ch in facts.choices if getattr(ch, "reached", True) is not False] if facts.worker else []
        hit = reached[0] if reached else None
        key = f"W={width} C={c}"
        if hit is None:
            found = _probe_input(tree, algorithm, facts, launch, width)
            if found.cls:
                probe_values = {SPECULATIVE_NUM_DRAFT_TOKENS: c, SPECULATIVE_NUM_STEPS: max(1, c - 1),
                                SPECULATIVE_EAGLE_TOPK: 1, SPECULATIVE_ALGORITHM: EAGLE}
                found.capture = runner_capture(EAGLE, probe_values, found.fields, width, c)
                report.verify_inputs[key] = f"{found.cls} ({found.where}; a probe: no drafter of the tree builds it)"
                if (width, c) == (report.width, report.num_draft_tokens):
                    report.probe = (f"W = budget + 1 = {width} is --budget's probe, not a width this tree's drafter "
                                    f"builds ({facts.note or f'no {algorithm} worker builds a verify input here'}): "
                                    f"the backend is built for {EAGLE} and handed the tree's {found.cls} at W")
            memo[(width, c)] = found
            return found
        module = tree.module_name(hit.cls_path) if hit.cls_path else ""
        found = TreeInput(cls=hit.cls, module=module, fields=list(hit.attrs), where=f"{hit.path}:{hit.line}",
                          mask_from=hit.mask_from,
                          launch={k: v for k, v in values.items() if k.startswith(SPECULATIVE_PREFIX)},
                          # the worker sets no mask (or sets None): it verifies a chain
                          chain="custom_mask" in hit.attrs and "custom_mask" not in hit.kwargs
                          and hit.mask_from is None)
        try:  # the worker's own call, whose keywords each batch evaluates (tree.verify_call)
            found.site = find_call(tree, algorithm, values, hit.path, hit.line, hit.cls)
        except Exception as exc:  # noqa: BLE001 - the input is then built from the batch alone, said so
            report.limitations.append(f"the worker's verify-input call ({hit.path}:{hit.line}) could not be "
                                      f"read: {type(exc).__name__}: {exc}")
        if not module:
            found.cls, found.why = "", f"the class {hit.cls} the worker builds ({hit.path}:{hit.line}) is not in " \
                                       f"the tree"
        found.capture = runner_capture(algorithm, values, found.fields, width, c)
        report.verify_inputs[key] = f"{hit.cls} ({hit.path}:{hit.line})"
        memo[(width, c)] = found
        return found

    return get


def _probe_input(tree, algorithm: str, facts, launch: dict | None, width: int):
    """The verify input of a width no drafter of the tree builds: the tree's EAGLE verify input (what its
    backends get at target verify), for ``--budget``'s probe; none for a launch whose worker builds none."""
    from ddcheck.smoke.inputs import TreeInput
    from ddcheck.tree.modules import TreeModules
    from ddcheck.tree.worker import class_fields

    if launch:
        return TreeInput(why=f"the tree's worker for {algorithm} builds no verify input ddcheck can read for this "
                             f"launch ({facts.note or 'no site is reached'}), so there is no class of the tree to "
                             f"hand the backend at W = {width}")
    module, cls = EAGLE_VERIFY_INPUT.rsplit(".", 1)
    if tree.module_file(module) is None:  # the class lives elsewhere in this tree (eagle_utils, 0.4.10)
        module = tree.module_defining(cls) or module
    attrs, rel, line = class_fields(TreeModules.of(tree), cls, module)
    if not rel:
        return TreeInput(why=f"the tree has no drafter for {algorithm} ({facts.note}) and no {cls} either: there is "
                             f"no class of the tree to hand the backend as its verify input at W = {width}")
    return TreeInput(cls=cls, module=module, fields=attrs, where=f"{rel}:{line}", probe=True)


def _interpreted() -> bool:
    """Whether triton's own @jit helpers were created for the interpreter (decided at import)."""
    import triton.language.standard as std

    return type(std.cdiv).__name__ == "InterpretedFunction"


def _merge(into: HarnessTrace, t) -> None:
    into.real_modules = sorted(set(into.real_modules) | set(t.real_modules))
    into.files = sorted(set(into.files) | set(t.files))
    for k, v in t.provided_calls.items():
        into.provided_calls[k] = into.provided_calls.get(k, 0) + v
    into.stand_ins_called = sorted(set(into.stand_ins_called) | set(t.stand_ins_called))
    into.stand_in_modules = sorted(set(into.stand_in_modules) | set(getattr(t, "stand_in_modules", ())))
    into.stopped.update(getattr(t, "stopped", {}))
    into.from_source.update(getattr(t, "from_source", {}))
    into.startup_stand_ins = sorted(set(into.startup_stand_ins) | set(getattr(t, "startup_stand_ins", ())))
    for src, dst in ((t.reads, into.reads), (t.missing, into.missing)):
        for k, v in src.items():
            dst[k] = sorted(set(dst.get(k, [])) | set(v))


def _verdict(report: SmokeReport) -> None:
    paths = report.paths
    # ddtree paths that fail with the mask the tree's own builder made, and pass with the reference layout
    refs = {p.path: p for p in paths if p.case == "ddtree-reference-mask"}
    # ... and those that crash with the tree's mask and not with the reference layout (wrong there for
    # another reason, such as a graph captured at C): the crash is the mask's, not the harness's
    mask_fault = [p for p in paths if p.case == "ddtree" and p.status in ("wrong", "crash")
                  and refs.get(p.path) is not None and (refs[p.path].status == "ok" or p.status == "crash"
                                                        and refs[p.path].status == "wrong")]
    crashed = [p for p in paths if p.status in ("crash", "pending") and p not in mask_fault]
    controls = [p for p in paths if p.case in ("control", "seed")]
    ddtree = [p for p in paths if p.case == "ddtree"]
    refused = [p for p in ddtree if p.status == "refused"]
    unjudged = [p for p in paths if p.status == "not_judged"]
    if unjudged and not (refused and len(refused) == len(ddtree)):
        # no class of the tree for the input this backend gets: a stand-in's answer would be no verdict
        p = unjudged[0]
        _unjudged(report, f"not judged: {p.case}/{p.path}: {p.error}",
                  "a tree whose own class for this verify input builds here (the launch's worker's, or "
                  "`--launch` for a launch whose worker ddcheck reads)")
        return
    if refused and len(refused) == len(ddtree) and not crashed:
        # the tree's worker raises before building a verify input for this backend: nothing reaches it
        report.exit_code = 0
        report.verdict = (f"refused by the tree: {refused[0].error}; no verify batch of this launch (W = "
                          f"{report.width}) reaches the {report.attention_backend} backend, so there is no "
                          f"layout to judge")
        return
    tree_crash = [p for p in ddtree if p.status == "tree_crash"]
    # a control that fails the same way on the same path: the tree's path fails at W == C too
    controls_ok = all(p.status == "ok" or p.status == "tree_crash" and any(q.path == p.path for q in tree_crash)
                      for p in controls)
    if tree_crash and not crashed and controls_ok:
        p = tree_crash[0]
        others = [q for q in ddtree if q.status not in ("ok", "tree_crash") and q not in mask_fault]
        report.exit_code = 1
        how = f"{INIT_CUDA_GRAPH_STATE}, capture and replay" if p.path == "graph" else INIT_FORWARD_METADATA
        at_c = any(q.status == "tree_crash" for q in controls)
        report.verdict = (f"tree crash: {'at W == C as well as' if at_c else 'the W == C controls are right, but'} "
                          f"at W = {report.width} the tree's own "
                          f"{p.path} path fails: {p.error}: the backend reads state of its own that neither its "
                          f"constructor nor its entry points ({how}, called as the tree's runner calls them) set "
                          f"for this launch's verify input; the launch fails loudly there (not a width bug, and "
                          f"not the harness)")
        if others:
            report.verdict += "; also wrong: " + ", ".join(_fault(q, report.kernels is not None) for q in others)
        if mask_fault:
            builder = report.tree_masks.get(f"W={report.width} C={report.num_draft_tokens}", "mask builder")
            report.verdict += (f"; and with the mask the tree's own {builder} builds, "
                               + ", ".join(f"{q.path} fails ({q.error or 'wrong'})" for q in mask_fault)
                               + ", right with the mask laid out as the backend reads it (tree mask)")
        return
    w, c, bm = report.width, report.num_draft_tokens, report.block_m
    if bm:
        need, have = -(-w // bm), -(-c // bm)
        report.config_facts = {"verify_width": w, "num_draft_tokens": c, "row_block": bm,
                               "captured_row_blocks": have, "needed_row_blocks": need,
                               "cuda_graph_capture_at_C_covers_W": need <= have}
        if need > have and report.graph_capture.get(f"W={w} C={c}", {}).get("width") == w:
            report.limitations.append(
                f"the graph path was captured at W = {w} ({_capture_source(report, w, c)}); a graph runner that "
                f"captures at C = {c} gives a grid that covers {have} of the {need} row blocks W needs.")
        elif need > have:
            report.limitations.append(
                f"CUDA-graph capture happens at the configured width C = {c}: the captured extend grid has "
                f"{have} row block(s) of {bm}, W = {w} needs {need}. A backend-only fix cannot repair this; "
                f"DDTree with CUDA graphs needs the graph runner to capture at W (or CUDA graphs off for verify).")
    if crashed:
        p = crashed[0]
        stopped = _startup_stopped(report.harness)
        if stopped:  # the tree's own start-up did not run here: what the path then lacked may be that
            _unjudged(report, f"harness failure in {p.case}/{p.path}: {p.error}; the tree's start-up stopped "
                              f"before it: " + "; ".join(f"{k}: {v}" for k, v in stopped.items()),
                      "an environment where the tree's start-up runs (its dependencies at the versions the "
                      "tree pins)")
        else:
            _unjudged(report, f"harness failure in {p.case}/{p.path}: {p.error}")
    elif any(p.status != "ok" for p in controls):
        bad = ", ".join(f"{p.case}/{p.path} (W = C = {p.width})" for p in controls if p.status != "ok")
        _unjudged(report, f"control wrong: {bad}; the harness or this release is broken at W == C, no verdict",
                  "a tree whose verify path is right at W == C (the controls), so W != C can be judged against it")
    elif any(p.status != "ok" for p in ddtree):
        bad = [p for p in ddtree if p.status != "ok"]
        diag = next((p for p in paths if p.case == "ddtree-capture-at-W"), None)
        capture_only = diag is not None and diag.status == "ok" and all(p.path == "graph" for p in bad)
        builder = report.tree_masks.get(f"W={w} C={c}", "mask builder")
        if bad and all(p in mask_fault for p in bad):
            report.exit_code = 1
            report.verdict = (f"tree mask: with the mask the tree's own {builder} builds for this batch (unequal "
                              f"prefix lengths), verify is wrong on "
                              + ", ".join(f"{p.path} ({p.error})" if p.status == "crash" else
                                          f"{p.path} ({p.wrong_tokens} wrong of {p.tokens} tokens)" for p in bad)
                              + "; with the mask laid out as the backend reads it (W x (prefix + W) per request, "
                                "packed) the same paths "
                              + ("are right" if all(refs[p.path].status == "ok" for p in bad) else
                                 "run, " + ", ".join(f"{p.path} {refs[p.path].status}" for p in bad)
                                 + " (" + ", ".join(_fault(refs[p.path], report.kernels is not None) for p in bad
                                                    if refs[p.path].status != "ok") + ")")
                              + ": the builder's layout is not the backend's")
            return
        report.exit_code = 1
        faults = ", ".join(_fault(p, report.kernels is not None) for p in bad)
        if capture_only:
            report.verdict = _capture_verdict(bad, w, c, faults, _capture_source(report, w, c),
                                              "budget + 1" if report.width_of == "budget" else "")
            report.config_facts["capture_width_is_the_cause"] = True
        else:
            report.verdict = f"bug: W == C is right but W = {w} != C = {c} is wrong on {faults}"
        if any(p.out_of_bounds for p in bad) and not capture_only:
            n = len(report.prefix_lens)
            report.verdict += (f"; at W < C a layout of C rows per request runs past the verify batch of "
                               f"{n} x {w} = {n * w} tokens")
    else:
        report.exit_code = 0
        report.verdict = f"every path correct at W = {w}, C = {c} and at the W == C controls"
        if any(p.path == "graph" for p in ddtree):
            cw = next(p.capture_width for p in ddtree if p.path == "graph")
            report.verdict += f"; the graph path captured at {cw} ({_capture_source(report, w, c)})"
    for call in report.harness.stand_ins_called:  # what cannot run here, reached while the backend ran
        report.limitations.append(f"stand-in {call}: it cannot run on this machine; what it returned is "
                                  f"ddcheck's stand-in, so this verdict does not cover what it computes")


def _startup_stopped(trace: HarnessTrace) -> dict[str, str]:
    """The calls of the tree's start-up (its server-args setters and single-process parallel set-up) that
    failed here, each with why (first line)."""
    setup = {fn for _, fn in SINGLE_PROCESS_STARTUP}
    return {k: v.splitlines()[0] for k, v in trace.stopped.items()
            if k.rsplit(".", 1)[-1] in setup or re.fullmatch(SERVER_ARGS_SETTER, k.rsplit(".", 1)[-1])}


def _unjudged(report: SmokeReport, why: str, to_judge: str = "") -> None:
    """Exit 3, could not judge: the verdict says why, ``not_judged`` also what would make it judgeable."""
    report.exit_code, report.verdict = EXIT_NOT_JUDGED, why
    what = f"{report.attention_backend} verify path at W = {report.width}, C = {report.num_draft_tokens}"
    report.not_judged = [not_judged(what, why, to_judge or "a run of the tree's verify path that does not fail "
                                    "(the error above says where it stopped; DDCHECK_DEBUG=1 prints its stack)")]


def _capture_source(report: SmokeReport, w: int, c: int) -> str:
    """Where the capture width of the launch's case comes from, in words: the tree's graph runner (file:line,
    and its replay gate), the launch as `ddcheck config` read it, an override, or none found."""
    e = report.graph_capture.get(f"W={w} C={c}", {})
    runner = (f"the tree's graph runner captures at {e.get('runner_width')}, {e.get('at')}"
              + (f"; it replays no other width, {e['gate_at']}" if e.get("gate_at") else "")) \
        if e.get("runner_width") is not None else "the tree's graph runner gives no capture width ddcheck reads"
    if e.get("source") == "override":
        return f"overridden by --graph-capture-width {report.graph_capture_width}; {runner}"
    if e.get("source") == "none":
        return f"{runner}: C, as SGLang's runner captures"
    return runner + (" (the launch, as `ddcheck config` read it)" if e.get("source") == "launch" else "")


def _capture_verdict(bad: list, w: int, c: int, faults: str, source: str = "", of: str = "budget + 1") -> str:
    """The verdict when only the graph path captured at another width is wrong and the same path captured at
    W is right: the capture width is the cause (``source``: where it comes from), and what the graph runner
    must do (``of``: what W is, in words; empty: a launch's own)."""
    kept = sorted({v["field"].removeprefix("forward_metadata.") for p in bad for v in p.violations})
    if any(p.unwritten_tokens for p in bad):
        kept.append("the kernel's launch grid")
    cw = next((p.capture_width for p in bad if p.capture_width), c)
    at = f"C = {c}" if cw == c else str(cw)
    return (f"capture width: the backend is right at W = {w} (eager, and the graph path captured at W), but a graph "
            f"captured at {at}{f' ({source})' if source else ''} is wrong at W on {faults}: what a graph keeps from "
            f"its capture ({', '.join(kept) or 'its metadata'}) was made for {cw} tokens per request. This is not a "
            f"bug of the backend: the CUDA-graph runner must capture the target-verify graphs at the verify width "
            f"W = {f'{of} = ' if of else ''}{w} (a graph per width the launch verifies), or run target-verify without CUDA "
            f"graphs; --graph-capture-width W runs the graph path as such a runner would")


def _past(o: dict) -> str:
    """One write past the batch, in words (``PathResult.out_of_bounds``)."""
    return f"wrote {o['rows']} row(s) past the {o['batch_rows']} of {o['buffer']}"


def _violation(v: dict) -> str:
    return f"{v['field']}: expected {v['expected']}, got {v['got']}"


def _fault(p, numbers: bool) -> str:
    """How one path is wrong: what it wrote past the batch, its numbers where the kernels ran, else its
    first contract violation."""
    if p.out_of_bounds:
        oob = "; ".join(_past(o) for o in p.out_of_bounds)
        rest = f", {p.wrong_tokens} wrong, {p.unwritten_tokens} unwritten of {p.tokens} tokens" if numbers else \
            (f", {_violation(p.violations[0])}" if p.violations else "")
        return f"{p.path} ({oob}{rest})"
    if numbers and p.status == "wrong" and (p.wrong_tokens or p.unwritten_tokens):
        return f"{p.path} ({p.wrong_tokens} wrong, {p.unwritten_tokens} unwritten of {p.tokens} tokens)"
    if p.violations and numbers:  # the kernel happened to be right here (a row block wide enough): by luck
        more = f"; {len(p.violations) - 1} more field(s)" if len(p.violations) > 1 else ""
        return (f"{p.path} ({_violation(p.violations[0])}{more}; its attention numbers are right on this "
                f"device, by luck, not by design)")
    if p.violations:
        more = f"; {len(p.violations) - 1} more field(s)" if len(p.violations) > 1 else ""
        return f"{p.path} ({_violation(p.violations[0])}{more})"
    return f"{p.path} ({p.wrong_tokens} wrong, {p.unwritten_tokens} unwritten of {p.tokens} tokens)"


def smoke_main(target: str, backend_file: str | None = None, fmt: str = "text", console=None, **kwargs) -> int:
    """CLI body: run, print text (rich, on ``console`` if given), JSON, or the smoke rules' findings as
    SARIF or GitHub annotations (:func:`smoke_findings`, the one road's formats); return the exit code."""
    report = run_smoke(target, backend_file=backend_file, **kwargs)
    if fmt == "json":
        sys.stdout.write(report.to_json() + "\n")
    elif report.exit_code == EXIT_USAGE:  # a bad argument or target: one line, as every command says it
        sys.stderr.write(f"ddcheck: {report.verdict.removeprefix('usage: ')}\n")
    elif fmt in ("sarif", "github"):
        from ddcheck.base.findings import ScanResult
        from ddcheck.diagnostics import formats
        from ddcheck.smoke.report import text_console

        unjudged = [f"{n['what']}: {n['why']}; to judge it: {n['to_judge']}" for n in report.not_judged]
        if report.exit_code == EXIT_NOT_JUDGED and not unjudged:
            unjudged = [report.verdict]
        formats.render(ScanResult(files_scanned=0, findings=smoke_findings(report)), fmt, sys.stdout,
                       text_console, exit_code=report.exit_code, not_judged=unjudged)
        if report.exit_code not in (0, 1):  # no finding says why it was not judged: stderr does too
            sys.stderr.write(f"ddcheck: exit {report.exit_code}: {report.verdict}\n")
    else:
        render_text(report, console)
    return report.exit_code


def smoke_findings(report: SmokeReport) -> list:
    """The findings of the smoke rules (``face = "smoke"``, :class:`ddcheck.rules.SmokeRule`) on a run."""
    from ddcheck.rules import smoke_rules

    return [f for rule in smoke_rules() for f in rule.check(report)]
