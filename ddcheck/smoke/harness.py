"""Run a target's own attention backend in TARGET_VERIFY mode on a DDTree batch and judge it.

Every path's metadata is judged by the verify contract (:mod:`ddcheck.contract`, through the
backend's table in :mod:`ddcheck.contract.backends`); where the backend's kernels can run (Triton), the
attention output is also compared with a float64 reference.

Paths, each at W != C and as a control at W == C:

* ``eager``: ``init_forward_metadata`` then ``forward_extend``;
* ``graph``: ``init_cuda_graph_state``, the capture entry point with the batch a graph runner
  captures (width C, dummy KV), then the replay entry point with the real batch, then
  ``forward_extend`` with the metadata *as captured* (a shallow copy taken at capture: a real graph
  keeps the scalars -- ``max_extend_len``, the grid -- and tensor addresses it was captured with;
  replay may only refill those tensors in place). The entry points were renamed around 0.5.14:
  ``init_forward_metadata_{capture,replay}_cuda_graph`` before, ``init_forward_metadata_out_graph``
  (``in_capture=True``/``False``) plus ``init_forward_metadata_in_graph`` after.

The output is poisoned (NaN) before the kernel runs, so rows the kernel never writes are counted
as unwritten rather than read back from a previous run's memory.
"""

from __future__ import annotations

import copy
import functools
import inspect
import os
import time
import traceback
from contextlib import contextmanager
from typing import Any, Iterator

import torch

from ddcheck.smoke import handed, inputs
from ddcheck.smoke.inputs import InputUnavailable
from ddcheck.smoke.treemask import batch_values
from ddcheck.smoke.planned import planned_views
from ddcheck.smoke.batch import Shape, VerifyBatch, make_batch, reference
from ddcheck.smoke.loader import HarnessError, SglangImporter
from ddcheck.smoke.report import PathResult
from ddcheck.tree import names
from ddcheck.tree.standins import is_stand_in
from ddcheck.tree.names import (CAPTURE_CUDA_GRAPH as OLD_CAPTURE, EXTEND_ATTENTION_MODULES,
                                  SPECULATIVE_ALGORITHM, SPECULATIVE_NUM_DRAFT_TOKENS,
                                  INIT_FORWARD_METADATA, IN_GRAPH, OUT_GRAPH,
                                  REPLAY_CUDA_GRAPH as OLD_REPLAY)


@contextmanager
def poisoned_allocations(pad_rows: int = 0, made: list | None = None) -> Iterator[None]:
    """Make ``torch.empty_like``/``Tensor.new_empty`` return NaN-filled floats while the backend
    runs, backed by ``pad_rows`` spare rows (NaN too) so a launch laid out wider than the batch stays in
    memory the harness owns. Correct code never reads what it did not write, so this only exposes bugs.
    ``made`` collects ``(store, rows, where)`` of each padded allocation, for :func:`written_past`."""
    empty_like, new_empty = torch.empty_like, torch.Tensor.new_empty

    def poison(out: torch.Tensor) -> torch.Tensor:
        if not out.is_floating_point():
            return out
        if pad_rows and out.dim():
            big = torch.full((out.shape[0] + pad_rows, *out.shape[1:]), float("nan"), dtype=out.dtype,
                             device=out.device)
            if made is not None:
                made.append((big, out.shape[0], _caller()))
            return big[: out.shape[0]]
        return out.fill_(float("nan"))

    torch.empty_like = lambda *a, **k: poison(empty_like(*a, **k))
    torch.Tensor.new_empty = lambda self, *a, **k: poison(new_empty(self, *a, **k))
    try:
        yield
    finally:
        torch.empty_like, torch.Tensor.new_empty = empty_like, new_empty


def _caller() -> str:
    """The innermost frame of the target's code on the stack (where an allocation was made)."""
    marks = ("ddcheck-tree-",)  # the tree's files as the runtime wrote them
    frames = [(f, m) for f in traceback.extract_stack() for m in marks if m in f.filename]
    if not frames:
        return "?"
    f, mark = frames[-1]
    return f"{f.filename.split(mark, 1)[-1].split('/', 1)[-1]}:{f.lineno} in {f.name}"


def written_past(batch: VerifyBatch, made: list) -> list[dict]:
    """What the path wrote past the verify batch: rows of the spare regions after the batch's own
    tensors (q/k/v, out_cache_loc, the mask) and after the backend's padded allocations (its output)
    that no longer hold their sentinel. Each: buffer, rows written past its end, its rows, where made."""
    from ddcheck.smoke.batch import changed_rows

    out = [{"buffer": f"the batch's {name}", "rows": rows, "batch_rows": batch.pads[name][1], "where": "batch"}
           for name, rows in batch.pad_writes().items()]
    for store, n, where in made:
        rows = changed_rows(store[n:], torch.full_like(store[n:], float("nan")))
        if rows:
            out.append({"buffer": f"the tensor allocated at {where}", "rows": rows, "batch_rows": n,
                        "where": where})
    return out


@contextmanager
def triton_interpreter(on: bool) -> Iterator[None]:
    """``TRITON_INTERPRET=1`` while the tree's kernels are defined and launched (CPU runs)."""
    old = os.environ.get("TRITON_INTERPRET")
    if on:
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if on:
            if old is None:
                os.environ.pop("TRITON_INTERPRET", None)
            else:
                os.environ["TRITON_INTERPRET"] = old


# torch factories that take ``pin_memory``: a page-locked host buffer is a transfer-speed hint for a GPU;
# without one torch refuses it, while the values the tree puts there are the same.
PINNED_FACTORIES = ("empty", "zeros", "ones", "full", "tensor", "arange", "empty_strided")


@contextmanager
def pinned_memory_ignored(on: bool) -> Iterator[None]:
    """On a machine without CUDA, ``pin_memory=True`` is dropped while the tree runs (0.5.23's MLA
    base pins its plan buffers when built: flashinfer_mla_backend.py:328), and ``Tensor.pin_memory()``
    returns the tensor itself."""
    if not on or torch.cuda.is_available():
        yield
        return
    saved = {name: getattr(torch, name) for name in PINNED_FACTORIES}
    saved_method = torch.Tensor.pin_memory

    def unpinned(factory):
        @functools.wraps(factory)
        def call(*args, pin_memory=False, **kwargs):
            return factory(*args, **kwargs)
        return call

    try:
        for name, factory in saved.items():
            setattr(torch, name, unpinned(factory))
        torch.Tensor.pin_memory = lambda self, *a, **k: self
        yield
    finally:
        for name, factory in saved.items():
            setattr(torch, name, factory)
        torch.Tensor.pin_memory = saved_method


def _call(fn, **kwargs) -> Any:
    """Call an entry point by parameter name, so argument order changes across releases are moot
    while a renamed or new required parameter still fails loudly."""
    params = inspect.signature(fn).parameters
    accepted = {k: v for k, v in kwargs.items() if k in params}
    return fn(**accepted)


def _where(exc: BaseException) -> str:
    """Innermost frame in the target's code (or the harness, if it never got there)."""
    frames = traceback.extract_tb(exc.__traceback__)
    marks = ("ddcheck-tree-",)  # the tree's files as the runtime wrote them
    tree = [f for f in frames if any(m in f.filename for m in marks)]
    f = (tree or frames or [None])[-1]
    if f is None:
        return "?"
    if tree:
        mark = next(m for m in marks if m in f.filename)
        name = f.filename.split(mark, 1)[-1].split("/", 1)[-1]
    else:
        name = os.path.basename(f.filename)
    inner = frames[-1]
    beyond = f" -> {os.path.basename(inner.filename)}:{inner.lineno} in {inner.name}" if tree and inner is not f else ""
    return f"{name}:{f.lineno} in {f.name}{beyond}"


def _tolist(value: Any) -> Any:
    return value.tolist() if isinstance(value, torch.Tensor) else value


def _metadata(owner: Any, fields, bs: int) -> dict[str, Any]:
    """The contract fields' values (the first bs + 1 entries of a vector, a page table's shape)."""
    from ddcheck.contract import read_field

    out = {}
    for path in fields:
        t, key = read_field(owner, path), path.removeprefix("forward_metadata.")
        if isinstance(t, torch.Tensor) and t.dim() == 2:
            out[key] = f"tensor{list(t.shape)}"
        else:
            out[key] = _tolist(t[: bs + 1]) if isinstance(t, torch.Tensor) and t.dim() else _tolist(t)
    return out


MAX_STOOD_IN = 4  # tree functions a path may stand in for before its failure is the verdict


class Session:
    """One loaded release at one configured C: builds backends and runs paths on batches."""

    def __init__(self, importer: SglangImporter, shape: Shape, num_draft_tokens: int, device: str,
                 input_fields=None, backend=None):
        from ddcheck.contract import backends

        self.importer, self.shape, self.c, self.device = importer, shape, num_draft_tokens, device
        self.spec = backend or backends.get("triton")
        # width -> the verify input of that width (inputs.TreeInput): the tree's class, at the worker's site
        self.input_fields = input_fields or (lambda width: None)
        self.input_failures = importer.preload()  # before the backend binds SpecInputType
        self.mask_failures: dict[str, str] = {}  # the tree's mask builder: why it did not run here
        self.named_tuples: dict[str, str] = {}  # a backend's metadata tuple -> how its source names its positions
        self.masks_withheld: dict[int, str] = {}  # width -> the worker's call that passes custom_mask=None
        self.instances: set[str] = set()  # tree verify-input classes built as real instances
        self.use_tree_mask = True  # build the tree mask with the tree's own builder, where it has one
        self.tree_masks: dict[int, str] = {}  # width -> the tree function that built the mask
        # width -> {keyword of the worker's verify-input call: why it was not evaluated here}
        self.unevaluated: dict[int, dict[str, str]] = {}
        self.runner = None  # the model runner of the backend last built
        self.algorithm = None  # the tree's algorithm member of that backend's launch
        self.module = importer.load_backend()
        self.backend_cls = importer.backend_class(self.module, self.spec.cls)
        self.mode = importer.forward_mode().TARGET_VERIFY
        self.trace = importer.trace

    def block_m(self) -> int | None:
        """The extend kernel's row block for our head size (the unit of the grid's third axis), or
        None if this release no longer exposes ``_get_block_sizes_for_extend_attention``."""
        import importlib

        if self.spec.kernels != "triton":
            return None
        for name in EXTEND_ATTENTION_MODULES:
            if self.importer.tree_has_module(name):
                try:
                    fn = importlib.import_module(name)._get_block_sizes_for_extend_attention
                    return int(fn(self.shape.head_dim, self.shape.head_dim)[3])
                except Exception:
                    return None
        return None

    def _backend(self, batch: VerifyBatch):
        server_args = self.importer.server_args()
        algorithm = self.algorithm = self._launch_for(batch.width, server_args)
        if algorithm is None:  # the runner's is the launch's, as its __init__ makes it from the server args
            algorithm = _algorithm(getattr(server_args, SPECULATIVE_ALGORITHM, None))
        runner = handed.model_runner(batch, self.shape, self.device, self.trace, server_args, self.importer.tree,
                                     algorithm, dict(self.spec.model))
        self.importer.start_up(getattr(runner, names.MODEL_CONFIG_ATTR))
        self.runner = runner
        return self.backend_cls(runner), getattr(runner, names.TOKEN_TO_KV_POOL)

    def _req_pool(self):
        """The request-to-token pool of the runner last built (the forward batch holds the same)."""
        return getattr(self.runner, names.REQ_TO_TOKEN_POOL)

    def run(self, case: str, path: str, batch: VerifyBatch, tol: tuple[float, float], capture_width: int,
            pad_rows: int) -> PathResult:
        result = PathResult(case=case, path=path, width=batch.width, num_draft_tokens=self.c,
                            capture_width=capture_width if path == "graph" else None, tokens=batch.num_tokens)
        start = time.perf_counter()
        made: list = []  # the backend's padded allocations on this path
        backend = None
        fault = None
        try:
            out, backend, entry = self._run_standing_in(path, batch, capture_width, pad_rows, made)
            result.entry_points = entry
            planned_views(backend, self.spec.fields)
            view = self._named(backend)
            result.metadata = _metadata(view, self.spec.fields, batch.bs)
            self._contract(result, view, batch)
            if out is not None:
                self._judge(result, out, batch, tol)
            # a path that breaks the verify contract is never ok, even where its numbers came out right
            # (max_extend_len 8 < W = 17 within one row block of the kernel)
            result.status = "wrong" if result.violations or result.status == "wrong" else "ok"
        except WorkerRefused as exc:  # the tree's worker does not build a verify input for this backend
            result.status, result.error = "refused", str(exc)
        except InputUnavailable as exc:  # no class of the tree for the backend's input: nothing to judge
            result.status, result.error = "not_judged", str(exc)
        except Exception as exc:  # any failure of the harness or the backend: never a verdict of 1
            result.status = "tree_crash" if _own_state_missing(exc, self.importer.backend_module) else "crash"
            fault = device_fault(exc)
            result.error = f"{type(exc).__name__}: {fault or exc} (at {_where(exc)})"
            if os.environ.get("DDCHECK_DEBUG"):  # the whole stack, for whoever debugs a harness failure
                traceback.print_exc()
            if fault:  # the device's context is lost: nothing more runs in this process
                result.seconds = round(time.perf_counter() - start, 3)
                raise DeviceFault(result) from exc
        finally:
            # rows written past the batch (the spare rows are put back for the next path); not after a
            # device fault, when no memory of the device can be read
            if not fault:
                result.out_of_bounds = written_past(batch, made)
        if result.out_of_bounds and result.status == "ok":
            result.status = "wrong"  # right numbers in the batch, but the launch wrote past it
        result.seconds = round(time.perf_counter() - start, 3)
        return result

    def _run_standing_in(self, path: str, batch: VerifyBatch, capture_width: int, pad_rows: int, made: list):
        """``_run``; where it fails on a stand-in inside a tree function that cannot run here (it needs a
        module that stopped while imported: a JIT kernel's loader), that function is stood in for and
        the path runs again (:meth:`TreeRuntime.stand_in_for`), a few times at most."""
        runtime = self.importer.runtime
        for attempt in range(MAX_STOOD_IN + 1):
            try:
                return self._run(path, batch, capture_width, pad_rows, made)
            except Exception as exc:
                caused = "StandIn" in f"{type(exc).__name__}: {exc}" or "stand-in" in str(exc)
                if attempt == MAX_STOOD_IN or not caused \
                        or runtime.stand_in_for(exc, protect={self.importer.backend_module}) is None:
                    raise
                del made[:]

    def _run(self, path: str, batch: VerifyBatch, capture_width: int, pad_rows: int, made: list | None = None):
        backend, pool = self._backend(batch)
        layer = handed.layer(self.shape, self.trace)
        spec = self._spec(batch.width, batch.custom_mask, names.SPEC_INFO_FIELD, batch, backend)
        fb = handed.forward_batch(batch, self.mode, spec, pool, self._req_pool(), self.trace,
                                  spec_algorithm=self.algorithm, tree=self.importer.tree)
        if path == "eager":
            backend.init_forward_metadata(fb)
            entry = [INIT_FORWARD_METADATA, "forward_extend"]
            md = backend.forward_metadata
        else:
            md, entry = self._capture_replay(backend, batch, fb, pool, capture_width)
        backend.forward_metadata = md  # on the graph path: as captured, its tensors refilled by replay
        if self.spec.kernels is None:
            return None, backend, entry[:-1]
        with poisoned_allocations(pad_rows, made):
            out = backend.forward_extend(batch.q, batch.k, batch.v, layer, fb)
        return out, backend, entry

    def _named(self, backend):
        """The backend as the contract reads it (:func:`ddcheck.contract.by_name`), each tuple so read noted
        with the tree's line that names its positions."""
        from ddcheck.contract import by_name

        view, how = by_name(backend, self.spec.fields)
        tree = self.importer.runtime.tree
        for top, (names, at) in how.items():
            module, line = at.rsplit(":", 1)
            where = f"{tree.module_file(module)[0]}:{line}" if tree.module_file(module) else at
            self.named_tuples[f"{type(backend).__name__}.{top}"] = \
                f"a tuple, read by the names its source gives its positions ({where}: {', '.join(names)})"
        return view

    def _contract(self, result: PathResult, backend, batch: VerifyBatch) -> None:
        from ddcheck.contract import VerifyLayout, check

        from dataclasses import replace

        from ddcheck.contract import read_field

        layout = VerifyLayout(batch.width, tuple(batch.prefix_lens), tuple(batch.req_pool_indices.tolist()),
                              batch.req_to_token.cpu(), visible=batch.tree_mask.tolist())
        table = self.spec.contract_fields(graph=result.path != "eager")
        cascade = self.spec.cascade and read_field(backend, self.spec.cascade)
        if cascade is not None and cascade is not False:
            # the cascade's first part attends the prefix, its second the tree (one query per row)
            verdict = check(backend, table, replace(layout, kv="prefix"))
            top = next(iter(table)).split(".", 1)[0]
            # (not the fields its kernels are never handed: left at their defaults in the second part)
            expand = {f"{self.spec.cascade}.{f.split('.', 1)[1]}": t for f, t in table.items()
                      if f.startswith(top) and f not in self.spec.graph_host_only}
            second = check(backend, expand, replace(layout, kv="tree"))
            verdict.violations += second.violations
            verdict.checked += second.checked
        else:
            verdict = check(backend, table, layout)
        if not verdict.checked:
            raise HarnessError(f"none of {self.spec.name}'s contract fields is set after this path "
                               f"({', '.join(self.spec.fields)})")
        result.violations = [v.to_dict() for v in verdict.violations]
        result.contract_fields = verdict.checked

    def _spec(self, width: int, mask, label: str, batch: VerifyBatch, backend):
        """The verify input of this batch: the tree's own class (:class:`inputs.TreeInput`), built from the
        keywords its worker passes at the site, evaluated for this batch and backend, and the batch's own
        tensors; raises :class:`InputUnavailable` where the tree has no class for it or it does not build."""
        import importlib

        found = self.input_fields(width)
        if found is None or not found.cls:
            raise InputUnavailable(found.why if found is not None else
                                   f"no verify input of the tree is known for W = {width}")
        if found.mask_from is not None and self.use_tree_mask:
            mask = self._tree_mask(found.mask_from, batch, mask)
        why = self.input_failures.get(found.module)
        real = getattr(importlib.import_module(found.module), found.cls, None) if why is None else None
        if not isinstance(real, type) or is_stand_in(real):
            raise InputUnavailable(f"the tree's {found.cls} ({found.where}) does not load here"
                                   + (f": {found.module} stopped while imported, {why}" if why else ""))
        given, unevaluated = {}, frozenset()
        if found.site is not None:
            given = self._worker_keywords(found.site, batch, backend, mask)
            unevaluated = frozenset(self.unevaluated.get(batch.width, ()))
        try:
            obj = inputs.tree_verify_input(real, width, mask, self.trace, f"{label} ({found.cls})", given,
                                           batch_values(batch, self.device), unevaluated)
        except Exception as exc:  # noqa: BLE001 - its constructor needs what ddcheck cannot give it here
            raise InputUnavailable(f"the tree's {found.cls} ({found.where}) does not build for this batch: "
                                   f"{type(exc).__name__}: {exc}") from exc
        self.instances.add(found.cls)
        return obj

    def _launch_for(self, width: int, server_args) -> Any:
        """The launch whose worker builds the verify input at ``width`` (its algorithm, budget and other
        speculative values, as ``target.worker`` evaluated them) set on the tree's server args, so the
        backend is built, and its graph state set up, for that launch; returns the tree's algorithm
        member for the model runner (None where the tree builds no verify input of its own)."""
        found = self.input_fields(width)
        values = dict(found.launch) if found is not None else {}
        values.pop(SPECULATIVE_NUM_DRAFT_TOKENS, None)  # C is the session's
        if not values:
            return None
        for key, value in values.items():
            if hasattr(server_args, key):
                try:
                    object.__setattr__(server_args, key, value)
                except Exception:  # noqa: BLE001 - a frozen record keeps the start-up's value
                    pass
        return _algorithm(values.get(SPECULATIVE_ALGORITHM))

    def _worker_keywords(self, site, batch: VerifyBatch, backend, mask) -> dict:
        """The keywords the tree's worker passes to its verify input, evaluated for this batch and backend
        (:mod:`ddcheck.tree.verify_call`); raises :class:`WorkerRefused` where a ``raise`` on the worker's
        way to the call holds for them. The width fields stay the batch's; a mask the worker passes is the
        one this session decided (the tree's builder's, or the reference layout), and one it passes as None
        stays None."""
        from ddcheck.tree.modules import TreeModules
        from ddcheck.tree.names import WIDTH_FIELDS
        from ddcheck.tree.verify_call import RunnerView, WorkerSelf, evaluate

        given = batch_values(batch, self.device)
        given["custom_mask"] = lambda: mask
        me = WorkerSelf(site.self_values, self.importer.server_args(), RunnerView(self.runner, backend))
        built = evaluate(site, given, me, TreeModules.of(self.importer.tree), skip=frozenset(WIDTH_FIELDS))
        if built.refused:
            raise WorkerRefused(f"the tree's worker refuses this launch before it builds its verify input: "
                                f"{built.refused}")
        if built.unevaluated:
            self.unevaluated[batch.width] = dict(built.unevaluated)
        kwargs = dict(built.kwargs)
        if "custom_mask" in kwargs and kwargs["custom_mask"] is None:  # kept: the worker's backend takes none
            self.masks_withheld[batch.width] = f"{site.path}:{site.call.lineno}"
        elif "custom_mask" in kwargs:
            kwargs["custom_mask"] = mask
        return kwargs

    def _tree_mask(self, source, batch: VerifyBatch, fallback):
        """The mask the tree's own builder makes for this batch (``source``: a target.worker.MaskSource)."""
        from ddcheck.smoke.treemask import TreeMaskUnavailable, build_tree_mask

        try:
            mask = build_tree_mask(source.module, source.function, source.index, source.constants, batch,
                                   self.device)
        except TreeMaskUnavailable as exc:
            self.mask_failures[f"{source.function}() ({source.path}:{source.line})"] = str(exc)
            return fallback
        self.tree_masks[batch.width] = f"{source.function} ({source.path}:{source.line})"
        return _padded_like(mask, batch.pads.get("custom_mask"))

    def _capture_replay(self, backend, batch: VerifyBatch, fb, pool, cw: int):
        bs, max_tokens = batch.bs, self.shape.max_bs * cw  # the runner sizes its state for its capture width
        _call(backend.init_cuda_graph_state, max_bs=self.shape.max_bs, max_num_tokens=max_tokens)
        # What a graph runner captures with: fill-value seq_lens, request slot 0, an all-ones mask.
        fill = int(backend.get_cuda_graph_seq_len_fill_value())
        cap_seq = torch.full((bs,), fill, dtype=torch.int64, device=self.device)
        cap_req = torch.zeros(bs, dtype=torch.int64, device=self.device)
        # the worker's verify input at the capture width, for a batch of that width (the graph runner
        # captures with an input of its own class; its keywords are the worker's, evaluated for that batch)
        cap_tree = batch if cw == batch.width else make_batch(cw, batch.prefix_lens, self.shape, self.device, 0,
                                                              chain=batch.chain)
        cap_spec = self._spec(cw, torch.ones(bs * cw * (fill + cw), dtype=torch.bool, device=self.device),
                              "capture spec_info", cap_tree, backend)
        if hasattr(backend, OLD_CAPTURE) and not hasattr(backend, OUT_GRAPH):
            # the entry points' parameters are named as the forward batch's fields
            _call(getattr(backend, OLD_CAPTURE), bs=bs, num_tokens=bs * cw,
                  **{names.REQ_POOL_INDICES: cap_req, names.SEQ_LENS: cap_seq, names.ENCODER_LENS: None,
                     names.FORWARD_MODE_FIELD: self.mode, names.SPEC_INFO_FIELD: cap_spec})
            captured = copy.copy(backend.forward_metadata)
            _call(getattr(backend, OLD_REPLAY), bs=bs,
                  **{names.REQ_POOL_INDICES: batch.req_pool_indices, names.SEQ_LENS: batch.seq_lens,
                     names.SEQ_LENS_SUM: int(batch.seq_lens.sum()), names.ENCODER_LENS: None,
                     names.FORWARD_MODE_FIELD: self.mode, names.SPEC_INFO_FIELD: getattr(fb, names.SPEC_INFO_FIELD),
                     names.SEQ_LENS_CPU: batch.seq_lens.cpu()})
            return captured, [OLD_CAPTURE, OLD_REPLAY, "forward_extend"]
        if hasattr(backend, OUT_GRAPH):
            cap_batch = _CaptureBatch(batch, cap_seq, cap_req, cw)
            cap_fb = handed.forward_batch(cap_batch, self.mode, cap_spec, pool, self._req_pool(), self.trace,
                                          "capture forward_batch", self.algorithm, self.importer.tree)
            getattr(backend, OUT_GRAPH)(cap_fb, in_capture=True)
            getattr(backend, IN_GRAPH)(cap_fb)
            captured = copy.copy(backend.forward_metadata)
            getattr(backend, OUT_GRAPH)(fb, in_capture=False)
            getattr(backend, IN_GRAPH)(fb)  # recorded ops re-run at replay (a no-op for this backend)
            return captured, [f"{OUT_GRAPH}(in_capture=True)", IN_GRAPH, f"{OUT_GRAPH}(in_capture=False)",
                              IN_GRAPH, "forward_extend"]
        raise HarnessError("backend has no CUDA-graph metadata entry points (neither "
                           f"{OLD_CAPTURE} nor {OUT_GRAPH})")

    @staticmethod
    def _judge(result: PathResult, out: torch.Tensor, batch: VerifyBatch, tol: tuple[float, float]) -> None:
        shape = (batch.num_tokens, -1)
        got = out.detach().double().cpu().reshape(shape)
        ref = batch.ref.reshape(shape)
        atol, rtol = tol
        nan_rows = torch.isnan(got).any(dim=1)
        err = (got - ref).abs()
        bad = (err > atol + rtol * ref.abs()) | torch.isnan(got)
        wrong_rows = bad.any(dim=1) & ~nan_rows
        finite = err[~torch.isnan(err)]
        result.unwritten_tokens = int(nan_rows.sum())
        result.wrong_tokens = int(wrong_rows.sum())
        result.max_abs_err = float(finite.max()) if finite.numel() else None
        result.status = "ok" if not bad.any() else "wrong"


def _algorithm(name: str | None) -> Any:
    """The tree's SpeculativeAlgorithm member named ``name`` (None where the tree has none)."""
    import importlib

    from ddcheck.tree.names import SPECULATIVE_ALGORITHM_CLASS, SPEC_INFO_MODULE

    try:
        cls = getattr(importlib.import_module(SPEC_INFO_MODULE), SPECULATIVE_ALGORITHM_CLASS)
        member = cls.from_string(name) if hasattr(cls, "from_string") else cls[name]
    except Exception:  # noqa: BLE001 - the runner's class answers
        return None
    return None if is_stand_in(cls) or is_stand_in(member) else member


# what CUDA says when a kernel faults: the context is unusable afterwards, in this process
DEVICE_FAULTS = ("device-side assert triggered", "an illegal memory access was encountered",
                 "unspecified launch failure", "misaligned address")


class DeviceFault(Exception):
    """A path faulted on the device: its result is recorded; the paths after it need a new process."""

    def __init__(self, result: PathResult):
        super().__init__(result.error)
        self.result = result


def device_fault(exc: BaseException) -> str | None:
    """CUDA's first line for a kernel fault (which kills the process's context), else None."""
    text = str(exc)
    if not any(f in text for f in DEVICE_FAULTS):
        return None
    return text.strip().splitlines()[0]


class WorkerRefused(Exception):
    """The tree's worker raises before it builds a verify input for this launch (the message says where)."""


def _own_state_missing(exc: BaseException, backend_module: str) -> bool:
    """The backend's own code, in its own module or a base class's it inherits, read an attribute of itself
    that is not set: state its constructor and the entry points (called as the tree's runner calls them)
    never made. A crash of the tree; any other failure may be the harness's."""
    if not isinstance(exc, AttributeError) or getattr(exc, "obj", None) is None:
        return False
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames or "ddcheck-tree-" not in frames[-1].filename:
        return False
    obj = exc.obj
    if type(obj).__module__ != backend_module:
        return False
    # read in the backend's module or in a base class's (an entry point the backend inherits): the files
    # of the modules its class and the tree bases it derives from are defined in
    own = {c.__module__.rsplit(".", 1)[-1] + ".py" for c in type(obj).__mro__
           if c.__module__.split(".")[0] == backend_module.split(".")[0]}
    return any(frames[-1].filename.endswith("/" + name) for name in own)


def _padded_like(mask: torch.Tensor, pad: tuple[torch.Tensor, int] | None) -> torch.Tensor:
    """``mask`` backed by as many spare (False) entries as the batch's own mask has (a launch laid out
    wider than the batch then reads memory the harness owns)."""
    spare = pad[0].numel() - pad[1] if pad is not None else 0
    if spare <= 0 or mask.dim() != 1:
        return mask
    store = torch.cat([mask, torch.zeros(spare, dtype=mask.dtype, device=mask.device)])
    return store[: mask.numel()]


class _CaptureBatch:
    """The graph runner's capture-time view of a batch: same bs, dummy lengths, width ``cw``."""

    def __init__(self, batch: VerifyBatch, seq_lens: torch.Tensor, req: torch.Tensor, cw: int):
        self.bs, self.seq_lens, self.req_pool_indices = batch.bs, seq_lens, req
        self.req_to_token = batch.req_to_token
        self.out_cache_loc = torch.zeros(batch.bs * cw, dtype=torch.int64, device=seq_lens.device)


def build_batch(width: int, prefix_lens: list[int], shape: Shape, device: str, seed: int, c: int,
                chain: bool = False) -> tuple[VerifyBatch, int]:
    """The batch plus the spare rows behind its tensors and the backend's output, at every width: as
    many as a layout with C per request needs past a W < C batch, and at least one row per request
    ``chain``: a chain per request (make_batch)."""
    bs, top = len(prefix_lens), max(prefix_lens, default=0)
    pad_rows = bs * max(c - width, 1)
    pad_mask = sum(max(0, c * (p + c) - width * (p + width)) for p in prefix_lens) + top + max(c, width)
    batch = make_batch(width, prefix_lens, shape, device, seed, pad_rows=pad_rows, pad_mask=pad_mask, chain=chain)
    batch.ref = reference(batch, shape, 1.0 / shape.head_dim ** 0.5)  # before any path touches the pool
    return batch, pad_rows
