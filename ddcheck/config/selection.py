"""The attention backends a launch gets when it leaves the choice to SGLang, picked by the tree's own code.

SGLang picks the attention backend at start-up, from the GPU (``is_sm90_supported()``, ``is_sm100_supported()``
...), the model (MHA or MLA, sinks...), the speculative settings (top-k) and the page size, in the
start-up code that runs *before* the speculative handler: ``ServerArgs.__post_init__`` up to
``_handle_speculative_decoding()`` / ``handle_speculative_decoding(self)`` (0.4.10 .. the DDTree forks),
``run_resolution_pipeline`` up to ``run_hook(handle_speculative_decoding, ...)`` (0.5.23).

That function (the *orchestrator*: the tree function whose own body calls the speculative handler) is
found in the tree by its call of the handler, compiled again from the tree's file with each top-level
statement before that call in its own ``try`` (a statement that fails on what cannot run here -- the
GPU's memory probe -- is a limitation; the next one runs), and run on the tree's own ``ServerArgs``
with torch's probes answering for the GPU (:mod:`ddcheck.config.gpu`). The backend fields are then
read from the record as the tree left it; the tree line that wrote each, and the ``return`` of the
tree function that produced the value (``return "fa3"`` in ``_get_default_attn_backend``), are
recorded. No table of which release picks what: the tree's code decides.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from ddcheck.config.gpu import Gpu
from ddcheck.config.treerun import TreeRun, Where, run_handler
from ddcheck.tree.sources import SourceTree
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.names import (ARG_GROUPS_DIR, ATTENTION_BACKEND_FIELDS, HANDLER_METHOD_NAMES, HANDLER_NAMES,
                                  RESOLVED_OVERRIDES, SERVER_ARGS_CLASS, SERVER_ARGS_FILE)
from ddcheck.tree.runtime import Platform
from ddcheck.tree.names import ATTENTION_BACKEND, DECODE_ATTENTION_BACKEND, PREFILL_ATTENTION_BACKEND, SPECULATIVE_ATTENTION_MODE

STARTUP_DIRS = (ARG_GROUPS_DIR,)  # besides server_args.py, where the start-up code lives


@dataclass
class Picked:
    """One backend field the tree's start-up code filled in."""

    field: str  # attention_backend, prefill_attention_backend, decode_attention_backend, speculative_draft_...
    value: Any
    set_at: str | None  # file:line of the write (or the declaration) of the field
    picked_at: str | None  # file:line of the tree's ``return`` that produced the value, where one did


@dataclass
class Selection:
    entry: str | None = None  # the orchestrator that ran (file:line)
    picked: dict[str, Picked] = field(default_factory=dict)  # field -> what the tree picked
    left: list[str] = field(default_factory=list)  # fields the launch left to SGLang
    limitations: list[str] = field(default_factory=list)
    failed: str | None = None  # the run could not complete: why
    values: dict[str, Any] = field(default_factory=dict)  # server_args where the run stopped
    supply: list[str] = field(default_factory=list)  # options that supply what the code read and ddcheck lacked


def left_to_sglang(values: dict[str, Any]) -> list[str]:
    """The backend fields of this tree's flags that the launch leaves unset."""
    return [f for f in ATTENTION_BACKEND_FIELDS if f in values and values[f] is None]


def platform_of(gpu: Gpu) -> Platform:
    if gpu.vendor in ("nvidia", "amd") and gpu.arch:
        return Platform(gpu.vendor, gpu.arch)
    return Platform("cpu")


# --------------------------------------------------------------------------- the orchestrator


def find_orchestrator(tree: SourceTree) -> tuple[str, str | None, str, int | None] | None:
    """(relpath, class or None, function, line of the statement that calls the speculative handler):
    the start-up function that runs the speculative handler. A tree without a handler (0.4.10, 0.5.1):
    ``ServerArgs.__post_init__`` whole (line None)."""
    files = [f for f in tree.files if f.relpath.endswith(".py")
             and (f.relpath.endswith(SERVER_ARGS_FILE) or any(d in f.relpath for d in STARTUP_DIRS))]
    names = (*HANDLER_NAMES, *HANDLER_METHOD_NAMES)
    mods = TreeModules.of(tree)
    fallback = None
    for f in sorted(files, key=lambda f: not f.relpath.endswith(SERVER_ARGS_FILE)):
        if not f.relpath.endswith(SERVER_ARGS_FILE):
            data = f.read_bytes()  # once: a wheel's member is inflated on each read
            if not any(n.encode() in data for n in names):
                continue
        for owner, fn, stmt in mods.callers(f.relpath, names):
            if owner in (None, SERVER_ARGS_CLASS):
                return f.relpath, owner, fn.name, stmt.lineno
        if fallback is None and mods.defined(f.relpath, f"{SERVER_ARGS_CLASS}.__post_init__") is not None:
            fallback = (f.relpath, SERVER_ARGS_CLASS, "__post_init__", None)
    return fallback


def _compiled(run, relpath: str, owner: str | None, name: str, stop: int | None, module):
    """The tree's function compiled again: each top-level statement before line ``stop`` in its own try."""
    from ddcheck.config.treerun import _Unreadable, guarded  # the model config read again by the tree's reader

    fdef = TreeModules.of(run.tree).defined(relpath, name if owner is None else f"{owner}.{name}")
    code = guarded(fdef, module.__file__, lambda stmt: ("__ddcheck_select_step__", (stmt.lineno,)), stop)

    def step(exc: BaseException, line: int) -> None:
        if isinstance(exc, _Unreadable):
            raise exc
        where = run.raised_at(exc)
        run.limitation(f"start-up statement at {relpath}:{line} could not run here: {type(exc).__name__}: "
                       f"{str(exc)[:200]}" + (f" (at {where})" if where else ""))

    module.__dict__["__ddcheck_select_step__"] = step
    ns: dict[str, Any] = {}
    exec(code, module.__dict__, ns)
    return ns[name], Where(relpath, fdef.lineno)


class _Returns:
    """A profile hook (chained to the one in place) that keeps the tree functions' string returns, in
    order, each with the number of writes recorded before it."""

    def __init__(self, run):
        self.run = run
        self.seen: list[tuple[int, str, Where, int]] = []  # (writes so far, value, where, depth)
        # Decisions appended to the record's stash (``server_args._resolved_overrides.append((source,
        # {field: value}))``, 0.5.16 .. 0.5.22: applied to the fields only when resolution ends):
        # (writes so far, {field: value}, where)
        self.stashed: list[tuple[int, dict, Where | None]] = []

    def _stash_append(self, frame, arg) -> None:
        stash = getattr(self.run.server_args, RESOLVED_OVERRIDES, None)
        if getattr(arg, "__self__", None) is not stash or not isinstance(stash, list) or not stash:
            return
        entry = stash[-1]
        if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], dict):
            self.stashed.append((len(self.run.result.writes), dict(entry[1]),
                                 self.run.where_of(frame.f_code.co_filename, frame.f_lineno)))

    def __call__(self, fn):
        def wrapped(sa):
            previous = sys.getprofile()

            def profile(frame, event, arg):
                if previous is not None:
                    previous(frame, event, arg)
                if event == "c_return" and getattr(arg, "__name__", "") == "append":
                    self._stash_append(frame, arg)
                elif event == "return" and isinstance(arg, str) and len(arg) < 64 \
                        and not frame.f_code.co_name.startswith("__"):  # not an attribute read (a view's __getattr__)
                    where = self.run.where_of(frame.f_code.co_filename, frame.f_lineno)
                    if where is not None:
                        depth, f = 0, frame
                        while f is not None:
                            depth, f = depth + 1, f.f_back
                        self.seen.append((len(self.run.result.writes), arg, where, depth))

            sys.setprofile(profile)
            try:
                return fn(sa)
            finally:
                sys.setprofile(previous)

        return wrapped

    def picked_at(self, index: int, value: Any) -> Where | None:
        """The innermost tree ``return`` of ``value`` that led to write number ``index``."""
        hits = [(d, w) for n, v, w, d in self.seen if n == index and v == value]
        if not hits:
            return None
        depth, where = hits[-1]
        for d, w in reversed(hits[:-1]):  # the chain of returns handing the value up: its innermost
            if d <= depth:
                break
            depth, where = d, w
        return where


def select_backends(tree: SourceTree, values: dict[str, Any], gpu: Gpu, draft_config: dict | None = None,
                    model_config: dict | None = None) -> Selection:
    """Run the tree's start-up code up to its speculative handler on ``values`` (the parsed flags) for
    ``gpu``, and read the attention backends it picked for the fields the launch left unset."""
    sel = Selection(left=left_to_sglang(values))
    if not sel.left:
        return sel
    found = find_orchestrator(tree)
    if found is None:
        sel.failed = "no start-up function that runs the speculative handler in this tree"
        return sel
    relpath, owner, name, stop = found
    returns: list[_Returns] = []

    def entry(run, module, cls):
        returns.append(_Returns(run))
        if owner is None:
            module = run.rt.import_module(tree.module_name(relpath))
        elif cls is None or module is None:
            raise LookupError(f"the tree's {SERVER_ARGS_CLASS} cannot be built here")
        fn, where = _compiled(run, relpath, owner, name, stop, module)
        return returns[-1](fn), where

    run: TreeRun = run_handler(tree, values, draft_config, model_config, gpu=gpu.vendor,
                               platform=platform_of(gpu), entry=entry)
    run_stash = {"stash": getattr(returns[-1].run.server_args, RESOLVED_OVERRIDES, None) if returns else None}
    sel.entry = str(run.handler) if run.handler else f"{relpath}:?"
    sel.limitations = list(run.limitations)
    sel.values = dict(run.values)
    sel.supply = list(dict.fromkeys(n.supply for n in run.needs if n.supply))
    if not run.ok:
        sel.failed = run.failed
    elif run.rejected:
        sel.failed = f"the start-up code rejected the launch: {run.rejected} (at {run.rejected_at})"
    hook = returns[-1] if returns else None
    for f in sel.left:
        value = run.values.get(f)
        if value is not None:
            index = max((i for i, w in enumerate(run.writes) if w.name == f), default=None)
            set_at = run.writes[index].where if index is not None else None
        else:  # declared in the stash, not applied yet: the tree's resolved value
            hit = next((x for x in reversed(hook.stashed) if f in x[1]), None) if hook is not None else None
            if hit is None:  # a stash the code assigned whole (model overrides collected at once)
                hit = _in_final_stash(run_stash.get("stash"), f, tree)
            if hit is None or hit[1][f] is None:
                continue
            index, value, set_at = hit[0], hit[1][f], hit[2]
            sel.values[f] = value
        picked = hook.picked_at(index, value) if hook is not None and index is not None else None
        sel.picked[f] = Picked(f, value, str(set_at) if set_at else None, str(picked) if picked else None)
    return sel


def _in_final_stash(stash, f: str, tree: SourceTree):
    """(None, {f: value}, where the declaring function is defined) from the stash as the run left it:
    the last ``(source, {field: value})`` entry that declares ``f``; ``source`` is the tree function's name."""
    if not isinstance(stash, list):
        return None
    entry = next((e for e in reversed(stash) if isinstance(e, tuple) and len(e) == 2 and isinstance(e[1], dict)
                  and f in e[1]), None)
    if entry is None:
        return None
    source = str(entry[0]).split(".")[-1]
    where = None
    pattern = f"def {source}(".encode()
    for file in tree.files:
        if file.relpath.endswith(".py") and (ARG_GROUPS_DIR in file.relpath or file.relpath.endswith(SERVER_ARGS_FILE)):
            data = file.read_bytes()
            at = data.find(pattern)
            if at >= 0:
                where = Where(file.relpath, data[:at].count(b"\n") + 1)
                break
    return None, dict(entry[1]), where


# --------------------------------------------------------------------------- into the launch's settings


def apply(sel: Selection, values: dict[str, Any], s) -> None:
    """The picked backends as if the launch had passed them: into the flags the speculative handler
    runs on and into the settings the checks judge (``s``: SpecSettings; the verify backend is the
    one the verify path uses, ``--speculative-attention-mode`` deciding prefill or decode)."""
    for f, p in sel.picked.items():
        if isinstance(p.value, str):
            values[f] = p.value
    settle(s, values)


def settle(s, values: dict[str, Any]) -> None:
    """The settings' backends from ``values`` (after the picked ones, or the tree's handler, changed them)."""
    from ddcheck.tree.names import (ATTENTION_BACKEND, DECODE_ATTENTION_BACKEND, DRAFT_ATTENTION_BACKEND,
                                      PREFILL_ATTENTION_BACKEND)

    for attr, f in ((ATTENTION_BACKEND, ATTENTION_BACKEND), (PREFILL_ATTENTION_BACKEND, PREFILL_ATTENTION_BACKEND),
                    (DECODE_ATTENTION_BACKEND, DECODE_ATTENTION_BACKEND),
                    ("draft_attention_backend", DRAFT_ATTENTION_BACKEND)):
        if isinstance(values.get(f), str):
            setattr(s, attr, values[f])
    mode = values.get(SPECULATIVE_ATTENTION_MODE) or s.speculative_attention_mode
    s.verify_backend = (s.prefill_attention_backend if mode == "prefill" else s.decode_attention_backend) \
        or s.attention_backend
