"""The audit's work: for each target, its static columns (:mod:`ddcheck.audit.prep`, one worker process),
then per backend and width its smoke runs (:func:`ddcheck.smoke.matrix.run_entry`, each its own worker
process) and per launch its ``ddcheck config`` check; ``jobs`` of them at a time. Every unit is looked up
in the cache first (:mod:`ddcheck.audit.store`) and kept once judged, as soon as it finishes, so Ctrl-C
loses only the units that were running.

``Hooks`` let a caller watch the work: ``started(kind, unit)`` before a unit is computed (never for one
answered from the cache), ``kept(kind, unit)`` once its result is kept.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from ddcheck.audit import store, verdicts
from ddcheck.audit.cells import COLUMNS, AuditRecord, Cell, Width
from ddcheck.audit.targets import Target
from ddcheck.base.children import Kept
from ddcheck.base.errors import EXIT_CLEAN, EXIT_FINDINGS

BUDGETS = (16, 4)  # W = 17 > C = 8 and W = 5 < C = 8
PREP_TIMEOUT = 1800.0
ALL = Width(label="all widths")  # the scan's and the fix's cells: the backend's file, whatever the width


@dataclass
class Options:
    backends: list[str]
    budgets: list[int] = field(default_factory=lambda: list(BUDGETS))
    num_draft_tokens: int = 8
    launches: list[list[str]] = field(default_factory=list)
    device: str = "cpu"
    jobs: int = 1
    cache: bool = True


@dataclass
class Hooks:
    started: Callable[[str, dict], None] | None = None
    kept: Callable[[str, dict], None] | None = None


class Stopped(Exception):
    """The run was interrupted: no unit starts after it."""


@dataclass
class Result:
    """A unit's facts, where its whole report is kept, and whether the cache answered."""

    facts: dict
    report: str | None
    cached: bool


def read_launches(path: Path) -> list[list[str]]:
    """A launch file: one launch command per line (shell words); blank lines and ``#`` lines skipped."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(shlex.split(line))
    return out


def runnable() -> list[str]:
    from ddcheck.contract import backends

    return [b.name for b in backends.BACKENDS.values() if b.runs]


class Audit:
    def __init__(self, targets: list[Target], opts: Options, hooks: Hooks | None = None) -> None:
        self.targets, self.opts, self.hooks = targets, opts, hooks or Hooks()
        self.cells: list[Cell] = []
        self.absent: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.computed = 0  # units computed in this run
        self.kept = 0  # of those, kept in the cache
        # a target's smoke runs share its child process (one import of torch and of the tree's unchanged
        # modules for all its backends and widths), at most ``jobs`` kept at once
        self.children = Kept(keep=max(1, opts.jobs))
        self.tree_keys: dict[Target, str] = {}
        self.shown: set[tuple[Target, str]] = set()  # (target, backend) whose scan and fix cells are in
        self.widths = [Width(label=f"budget {b}", budget=b, verify_width=b + 1, num_draft_tokens=opts.num_draft_tokens)
                       for b in opts.budgets]
        self.widths += [Width(label=f"launch {i}", launch=argv) for i, argv in enumerate(opts.launches, 1)]

    # ------------------------------------------------------------------------------------------ units

    def unit(self, t: Target, kind: str, unit: dict, compute: Callable[[], tuple[dict, dict | None, bool]],
             valid: Callable[[dict], bool] = lambda facts: True) -> Result:
        """``compute() -> (facts, whole report, judged)``, unless the cache holds this unit of this tree."""
        unit = {"kind": kind, **unit}
        k = store.key(self.tree_keys[t], unit)
        report = store.report_path(k)
        if self.opts.cache:
            hit = store.load(k)
            if hit is not None and valid(hit.facts):
                return Result(hit.facts, str(report) if report.is_file() else None, True)
        if self.stop.is_set():
            raise Stopped
        if self.hooks.started:
            self.hooks.started(kind, unit)
        t0 = time.perf_counter()
        facts, whole, judged = compute()
        with self.lock:
            self.computed += 1
        if self.opts.cache and judged and store.store(k, store.Kept(facts=facts, seconds=time.perf_counter() - t0),
                                                      whole):
            with self.lock:
                self.kept += 1
            if self.hooks.kept:
                self.hooks.kept(kind, unit)
        elif whole is not None:  # not kept: the report is still there to read, beside the entry
            from ddcheck.tree.files import write_json

            write_json(report, whole)
        return Result(facts, str(report) if whole is not None else None, False)

    def prep(self, t: Target) -> Result:
        names = sorted(set(runnable()) | set(self.opts.backends))
        fixed = store.folder() / "fixed"

        def compute():
            facts = _child("ddcheck.audit.prep", {"target": t.spec, "backends": names, "fixed_dir": str(fixed)})
            return facts, None, "failed" not in facts

        def valid(facts: dict) -> bool:  # the fixed files it names are still there
            return all(Path(p).exists() for b in facts.values() if isinstance(b, dict)
                       for p in (b.get("fix", {}).get("fixed_file"), b.get("fix", {}).get("fixed_tree")) if p)

        return self.unit(t, "prep", {"backends": names}, compute, valid)

    def smoke(self, t: Target, kwargs: dict) -> Result:
        from ddcheck.smoke.matrix import run_entry

        def compute():
            row = run_entry({"label": f"{t.label} {kwargs.get('backend')}", "kwargs": kwargs}, kept=self.children)
            whole = row["report"]
            keep = ("exit_code", "verdict", "width", "num_draft_tokens", "graph_capture", "verify_inputs",
                    "tree_masks", "limitations", "not_judged", "seconds")
            facts = {k: whole.get(k) for k in keep}
            facts["paths"] = [{"case": p["case"], "path": p["path"], "status": p["status"]} for p in whole["paths"]]
            return facts, whole, whole["exit_code"] in (EXIT_CLEAN, EXIT_FINDINGS)

        return self.unit(t, "smoke", {"kwargs": kwargs}, compute)

    # ----------------------------------------------------------------------------------------- rows

    def add(self, cells: list[Cell]) -> None:
        with self.lock:
            self.cells += cells

    def static(self, t: Target, backend: str, prep: Result) -> None:
        """The backend's scan and fix cells (the same at every width: one each)."""
        with self.lock:
            if (t, backend) in self.shown:
                return
            self.shown.add((t, backend))
        failed = prep.facts.get("failed")
        if failed is not None:
            self.add([verdicts.unjudged(t, backend, ALL, col, f"the target's scan and fix did not run: {failed}")
                      for col in ("scan", "fix")])
            return
        facts = prep.facts[backend]
        self.add([_mark(verdicts.scan_cell(t, backend, ALL, facts), prep),
                  _mark(verdicts.fix_cell(t, backend, ALL, facts), prep)])

    def row(self, t: Target, backend: str, width: Width, prep: Result, extra: dict | None = None) -> None:
        """One target x backend x width: scan, smoke, fix, fixed, capture (``extra``: a launch's values)."""
        failed = prep.facts.get("failed")
        facts = prep.facts.get(backend) or {}
        if failed is not None:
            self.add([verdicts.unjudged(t, backend, width, "fixed", f"the target's fix did not run: {failed}")])
        kw = {"target": t.spec, "backend": backend, "budget": width.budget, "num_draft_tokens": width.num_draft_tokens,
              "device": self.opts.device, "graph_capture_width": "W"}
        if extra is not None:  # a launch: its values, and graphs captured as its runner captures them
            kw.update(extra, graph_capture_width="tree")
        shipped = self.smoke(t, kw)
        first = verdicts.smoke_cell(t, backend, width, "smoke", shipped.facts, facts, shipped.report)
        self.add([_mark(first, shipped)])
        fix = facts.get("fix", {})
        fkw = ({**kw, "backend_file": fix["fixed_file"]} if fix.get("fixed_file") else
               {**kw, "target": fix["fixed_tree"]} if fix.get("fixed_tree") else None)
        if fkw is None:
            base, base_kw = shipped, kw
            if failed is None:
                self.add([verdicts.same_as(first, "fixed")])
        else:
            base, base_kw = self.smoke(t, fkw), fkw
            self.add([_mark(verdicts.smoke_cell(t, backend, width, "fixed", base.facts, facts, base.report), base)])
        case = base.facts.get("graph_capture", {}).get(f"W={base.facts.get('width')} C={base.facts.get('num_draft_tokens')}", {})
        if extra is None and verdicts.graph_ran(base.facts) and case.get("runner_width") != width.verify_width:
            base = self.smoke(t, {**base_kw, "graph_capture_width": "tree"})  # the tree's runner's width
        self.add([_mark(verdicts.capture_cell(t, backend, width, base.facts, base.report), base)])

    def launch(self, t: Target, width: Width, prep: Result) -> None:
        """A launch of --launch-file: ``ddcheck config``'s verdict, then its row at its own C and W on its
        verify backend."""
        from ddcheck.config.smoke import launch_capture
        from ddcheck.config.api import _jsonable, check_launch
        from ddcheck.tree.sources import open_target

        def compute():
            report = check_launch(list(width.launch or []), tree=open_target(t.spec))
            whole = report.model_dump(mode="json")
            s = report.settings
            facts = {"report": {k: whole.get(k) for k in ("exit_code", "findings", "not_judged")},
                     "settings": {k: whole["settings"].get(k) for k in (
                         "verify_width", "num_draft_tokens", "verify_backend", "verify_input_at", "capture_at",
                         "replay_gate_at")} if s else {}}
            if s is not None:
                facts["values"] = {k: v for k, v in s.values.items() if _jsonable(v)}
                facts["capture"] = launch_capture(s)
            return facts, whole, report.exit_code in (EXIT_CLEAN, EXIT_FINDINGS)

        got = self.unit(t, "config", {"argv": width.launch}, compute)
        s = got.facts.get("settings") or {}
        backend = s.get("verify_backend") or "-"
        w, c = s.get("verify_width"), s.get("num_draft_tokens")
        mine = width.model_copy(update={"verify_width": w, "num_draft_tokens": c,
                                        "budget": None if w is None else w - 1})
        cell = verdicts.config_cell(t, mine, backend, {**got.facts["report"], "settings": s}, got.report)
        self.add([_mark(cell, got)])
        if w is None or c is None or backend not in runnable():
            return
        if not (prep.facts.get(backend) or {}).get("absent"):
            self.static(t, backend, prep)
        self.row(t, backend, mine, prep, {"launch": got.facts.get("values") or None, "capture": got.facts.get("capture")})

    # ------------------------------------------------------------------------------------------ run

    def run(self, progress: Callable[[str], None] | None = None) -> None:
        """Every unit, ``jobs`` at a time; Ctrl-C (KeyboardInterrupt) stops the run after the running units
        and is raised again, what finished kept."""
        from ddcheck.config.kept import content_key
        from ddcheck.tree.sources import open_target

        for t in self.targets:
            key = content_key(open_target(t.spec))
            self.tree_keys[t] = key or f"uncached:{time.time_ns()}:{t.spec}"  # a tree without a content key: never hit
        pool = ThreadPoolExecutor(max_workers=max(1, self.opts.jobs))
        running: dict[Future, str] = {}
        if progress:
            progress("", len(self.targets))
        try:
            for t in self.targets:
                running[pool.submit(self._prep_and_rows, t)] = f"{t.label}: scan and fix"
            while running:
                done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for f in done:
                    what = running.pop(f)
                    try:
                        more = f.result() or []
                    except Stopped:
                        continue
                    for fn, label, *args in more:  # a target's rows, once its scan and fix are known
                        running[pool.submit(fn, *args)] = label
                    if progress:
                        progress(what, len(more))
        except BaseException:
            self.stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        finally:
            pool.shutdown(wait=True)
            self.children.close()

    def _prep_and_rows(self, t: Target) -> list[tuple]:
        """The target's scan and fix, then its rows to run: ``(fn, label, *args)`` each."""
        prep = self.prep(t)
        rows = []
        for name in self.opts.backends:
            if (prep.facts.get(name) or {}).get("absent"):
                with self.lock:
                    self.absent.append(f"{t.label} {name}")
                continue
            self.static(t, name, prep)
            rows += [(self.row, f"{t.label} {name} {w.label}", t, name, w, prep) for w in self.widths
                     if w.launch is None]
        rows += [(self.launch, f"{t.label} {w.label}", t, w, prep) for w in self.widths if w.launch is not None]
        return rows

    def record(self, seconds: float, command: list[str]) -> AuditRecord:
        from importlib.metadata import PackageNotFoundError, version

        from ddcheck.smoke.matrix import environment

        try:
            mine = version("ddcheck")
        except PackageNotFoundError:
            mine = ""
        order = {t.label: i for i, t in enumerate(self.targets)}
        names = list(dict.fromkeys(self.opts.backends + [c.backend for c in self.cells]))
        widths = {w.label: i for i, w in enumerate([ALL, *self.widths])}
        cells = sorted(self.cells, key=lambda c: (order.get(c.label, 0), names.index(c.backend),
                                                  widths.get(c.width, 0), COLUMNS.index(c.column)))
        return AuditRecord(ddcheck=mine, command=command, environment={k: str(v) for k, v in environment().items()},
                           device=self.opts.device, jobs=self.opts.jobs, seconds=round(seconds, 1),
                           targets=[t.label for t in self.targets], backends=names, widths=self.widths,
                           absent=self.absent, cells=cells, computed=self.computed).judge()


def _mark(cell: Cell, got: Result) -> Cell:
    cell.cached = got.cached
    return cell


def _child(module: str, request: dict, timeout: float = PREP_TIMEOUT) -> dict:
    """``module``'s answer to ``request`` in a child process of its own (:mod:`ddcheck.base.children`);
    ``{"failed": why}`` where it gave none."""
    from ddcheck.base.children import Child

    with Child(["-m", module], dict(os.environ), prefix="ddcheck-audit-") as child:
        answer = child.ask(request, timeout)
    return {"failed": f"{module} {answer['died']}"} if "died" in answer else answer
