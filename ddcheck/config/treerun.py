"""Resolve a launch's speculative settings by running the target tree's own start-up code.

Forks add flags and change what the old ones mean (``--speculative-dflash-enable-ddtree`` skips a
check, a budget flag sets C...), so per-release tables cannot know them. Here the tree's own code
decides, run by :class:`ddcheck.tree.runtime.TreeRuntime` (every module of the tree's package
runs from the tree's files; what cannot run on this machine -- a third-party package that is not
installed, a compiled extension -- is a stand-in, found automatically; torch's platform probes answer
for the serving machine, ``--gpu``):

* ``server_args`` is the tree's own ``ServerArgs``, built by its own ``from_cli_args`` from the parsed
  flags (its dataclass defaults, its renames), as a subclass that records every field written, with
  the tree line that wrote it; its ``__post_init__`` is left for the handler below;
* the tree's speculative handler runs on it: ``handle_speculative_decoding(server_args)``
  (``arg_groups/``, 0.5.14+ and the DDTree forks), ``ServerArgs._handle_speculative_decoding``
  (0.5.2-0.5.13), or, where the release has no handler (0.4.10, 0.5.1), the tree's ``__post_init__``
  itself, one top-level statement at a time: a statement that fails on something that cannot run
  here (the GPU's memory, a stand-in) is recorded and the next one runs; one that fails on the
  speculative settings ends the run;
* a field decision handed to a tree function as keywords along with the record
  (``declare_resolution(server_args, source, field=value)``, 0.5.21+) is recorded as a write;
* the model's config: the tree reads it with its own code (``get_model_config()``, ``get_config``,
  ``ModelConfig``). Where that code calls something that cannot run here to read a model's config
  (``transformers`` not installed: ``AutoConfig.from_pretrained``, or a reader the tree's own module
  could not define here), handed a local model folder, the call is answered from that folder's
  ``config.json`` (or from ``--model-config``/``--draft-config``); for a hub id it is *absent*, and
  every attribute the tree reads from it is recorded as assumed absent;
* every warning the tree logs is captured with its file:line, and an exception it raises at one of
  its own ``raise``/``assert`` lines is the tree's rejection of the launch. Any other exception
  ends the run (the tables take over, with the reason printed).

Nothing here is imported from sglang itself: the tree's files run under their own names for the
block only (modules kept per tree for the next launch in this process).
"""

from __future__ import annotations

import argparse
import ast
import atexit
import copy
import dataclasses
import json
import logging
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddcheck.config.offline import GUARD, WHY, about_a_refusal
from ddcheck.tree.sources import SourceTree
from ddcheck.tree.modules import TreeModules, tree_class
from ddcheck.tree.names import (ARG_GROUPS_DIR, HANDLER_METHOD_NAMES as METHOD_NAMES, HANDLER_NAMES, SERVER_ARGS_CLASS,
                                  SERVER_ARGS_FILE)
from ddcheck.tree.frames import function_of, put_back, replace_everywhere
from ddcheck.tree.models import ABSENT, ModelConfig, ModelFolders, NeedsInput, as_read_by, local_config, \
    path_arguments
from ddcheck.tree.runtime import Platform, TreeRuntime, UnprofiledImports
from ddcheck.tree.standins import is_stand_in
from ddcheck.tree.names import MODEL_PATH, PAGE_SIZE, SPECULATIVE_DRAFT_MODEL_PATH

ENTRY_METHOD = "__post_init__"  # the start-up code of a release without a handler
GPUS = ("nvidia", "amd", "npu", "xpu", "musa", "cpu")
# The machine torch's probes answer for. npu/xpu/musa cannot be emulated through torch.cuda: their
# probes answer as for a machine without a CUDA GPU (recorded as a limitation of the run).
PLATFORMS = {"nvidia": Platform("nvidia", "sm90"), "amd": Platform("amd", "gfx942")}
# ServerArgs.__post_init__ fills these before the speculative handler runs (``_handle_missing_default_values``:
# device = get_device(); ``_handle_page_size``: 1 unless the backend asks for more); the handler reads them.
DEVICE_OF = {"nvidia": "cuda", "amd": "cuda", "npu": "npu", "xpu": "xpu", "musa": "musa", "cpu": "cpu"}
FILLED_BEFORE = {PAGE_SIZE: 1}
# A kept session holds its tree's imported start-up modules: 110-140 MB on 0.5.10-0.5.23 (torch itself is the
# process's, once); six cover the trees a script or a test run moves between without starting one again.
SESSIONS_KEPT = 6


@dataclass
class Where:
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class Write:
    name: str
    old: Any
    new: Any
    where: Where | None


@dataclass
class Logged:
    level: str
    message: str
    where: Where | None


@dataclass
class Need:
    what: str  # "the draft model's config: block_size", "stand-in sglang.srt.utils.is_hip()"
    supply: str  # the flag or option that supplies it, or "" when nothing can
    where: Where | None


@dataclass
class TreeRun:
    """What the tree's speculative handler did with the launch."""

    handler: Where | None = None  # the handler that ran
    values: dict[str, Any] = field(default_factory=dict)  # server_args after the handler
    writes: list[Write] = field(default_factory=list)
    logged: list[Logged] = field(default_factory=list)
    needs: list[Need] = field(default_factory=list)
    rejected: str | None = None  # the exception the tree raised (its message)
    rejected_at: Where | None = None
    failed: str | None = None  # the run could not complete (a stand-in used as a value, harness error): why
    # What of the run was not the tree's own code running for real: stand-ins called, start-up
    # statements that could not run here, model configs answered from a file.
    limitations: list[str] = field(default_factory=list)
    stand_in_modules: list[str] = field(default_factory=list)  # modules that could not be imported here
    refusal_talk: int = 0  # messages the tree logged about a download refused (:mod:`ddcheck.config.offline`)

    @property
    def ok(self) -> bool:
        return self.failed is None


# --------------------------------------------------------------------------- the tree's runtime, kept per tree


class _Session(TreeRuntime):
    """A TreeRuntime whose tree modules outlive the block: the next launch on the same tree in this
    process runs the same modules again instead of importing the tree (and torch) anew."""

    def __init__(self, tree: SourceTree, platform: Platform):
        super().__init__(tree, platform)
        self._kept: dict[str, Any] = {}
        self._kept_dir = None
        self.answered: dict[str, str] = {}  # model path -> how its config was answered (first time)
        # model path -> the config the launches gave for it: the tree may keep a config by path
        # (``@lru_cache`` on its ``get_config``), so another config for a path needs fresh modules
        self.models: dict[str, str] = {}

    def __enter__(self):
        super().__enter__()
        if self._kept_dir is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = self._kept_dir
            sys.modules.update(self._kept)
        return self

    def __exit__(self, *exc) -> None:
        self._kept = {n: m for n, m in sys.modules.items() if n.split(".")[0] == self.package}
        kept_dir, self._tmp = self._tmp, None
        try:
            super().__exit__(*exc)
        finally:
            self._tmp = self._kept_dir = kept_dir

    def close(self) -> None:
        self._kept.clear()
        if self._kept_dir is not None:
            shutil.rmtree(self._kept_dir, ignore_errors=True)
            self._kept_dir = None


_SESSIONS: dict[tuple[int, Platform], tuple[SourceTree, _Session]] = {}


def _session(tree: SourceTree, platform: Platform, models: dict[str, str] | None = None) -> _Session:
    """The kept session of ``tree`` on ``platform``, unless it ran a launch that gave another config for
    one of ``models`` (path -> the config's digest): then a fresh one."""
    key = (id(tree), platform)
    hit = _SESSIONS.get(key)
    models = models or {}
    if hit is not None and hit[0] is tree:
        if all(hit[1].models.get(p, d) == d for p, d in models.items()):
            hit[1].models.update(models)
            _SESSIONS[key] = _SESSIONS.pop(key)  # the least recently used goes first
            return hit[1]
        _SESSIONS.pop(key)[1].close()
    while len(_SESSIONS) >= SESSIONS_KEPT:
        _SESSIONS.pop(next(iter(_SESSIONS)))[1].close()
    session = _Session(tree, platform)
    session.models.update(models)
    _SESSIONS[key] = (tree, session)
    return session


def _model_digests(values: dict[str, Any], draft_config: dict | None, model_config: dict | None) -> dict[str, str]:
    """The launch's model paths, each with a digest of the config it gets (given, or its folder's)."""
    out = {}
    for key, given in ((MODEL_PATH, model_config), (SPECULATIVE_DRAFT_MODEL_PATH, draft_config)):
        path = values.get(key)
        if isinstance(path, str):
            data = given if given is not None else local_config(path)
            out[path] = json.dumps(data, sort_keys=True, default=str)
    return out


@atexit.register
def _close_sessions() -> None:
    while _SESSIONS:
        _SESSIONS.popitem()[1][1].close()


# --------------------------------------------------------------------------- one run


class _Run:
    """One launch through the tree's start-up code: what it wrote, logged, needed, and stood in for."""

    def __init__(self, tree: SourceTree, rt: TreeRuntime, draft_config: dict | None, model_config: dict | None):
        self.tree, self.rt = tree, rt
        self.result = TreeRun()
        self.paths = {f.relpath: f for f in tree.files}
        self.draft_config, self.model_config = draft_config, model_config
        self.server_args: Any = None
        self.fields: set[str] = set()
        self.recording = False
        self.declared: dict[str, Any] = {}  # field decisions handed to tree functions (0.5.21+)
        self.entry_code = None  # the code object of the start-up function that runs
        self.stopped_by_refusal = False  # the run ended on a download the worker refused

    # -- where things happen
    def where_of(self, filename: str, line: int) -> Where | None:
        return Where(self.rt.relpath_of(filename), line) if self.rt.in_tree(filename) else None

    def caller(self) -> Where | None:
        frame = sys._getframe(2)
        while frame is not None:
            hit = self.where_of(frame.f_code.co_filename, frame.f_lineno)
            if hit is not None:
                return hit
            frame = frame.f_back
        return None

    def raised_at(self, exc: BaseException) -> Where | None:
        """The innermost traceback frame in a tree file: the line that raised."""
        tb, hit = exc.__traceback__, None
        while tb is not None:
            hit = self.where_of(tb.tb_frame.f_code.co_filename, tb.tb_lineno) or hit
            tb = tb.tb_next
        return hit

    def need(self, what: str, supply: str) -> None:
        if not any(n.what == what for n in self.result.needs):
            self.result.needs.append(Need(what, supply, self.caller()))

    def limitation(self, text: str) -> None:
        if text not in self.result.limitations:
            self.result.limitations.append(text)

    # -- writes
    def wrote(self, name: str, old: Any, new: Any) -> None:
        if self.fields and name not in self.fields:
            return  # bookkeeping (a memoised model config), not a setting
        if self.recording and (old is ABSENT or old != new):
            self.result.writes.append(Write(name, None if old is ABSENT else old, new, self.caller()))

    def absent_config(self, path: str) -> ModelConfig:
        """What the tree's reader of a model's config answers for a model ddcheck has no config of."""
        sa = self.server_args
        draft = path == (getattr(sa, SPECULATIVE_DRAFT_MODEL_PATH, None) if sa is not None else None)
        if draft:
            return ModelConfig("the draft model's config", None, "--draft-config PATH", self.need)
        return ModelConfig("the model's config", None, "--model-config PATH", self.need)


class _LaunchModels(ModelFolders):
    """The stand-ins' answerer for one launch: the launch's models (``--model-path``, the draft's) are
    answered from ``--model-config``/``--draft-config`` or their folders' ``config.json``; a hub id
    that the tree reads through a stand-in ends the run with :class:`_Unreadable`."""

    def __init__(self, run: "_Run"):
        self.run = run

    def __call__(self, name: str, args: tuple, kwargs: dict) -> Any:
        answer = super().__call__(name, args, kwargs)
        run = self.run
        if answer is ABSENT and run.recording and _calling_code() != "<module>":  # the start-up's own call
            run.limitation(f"`{name}()` cannot run here (a stand-in answered) at {run.caller() or '?'}")
        return answer

    def config(self, path: str, reader: str) -> Any:
        run, sa = self.run, self.run.server_args
        known = {getattr(sa, MODEL_PATH, None), getattr(sa, SPECULATIVE_DRAFT_MODEL_PATH, None)} - {None}
        if path not in known and local_config(path) is None:
            return ABSENT
        draft_path = getattr(sa, SPECULATIVE_DRAFT_MODEL_PATH, None) if sa is not None else None
        if draft_path is not None and path == draft_path:
            label, given, supply = "the draft model's config", run.draft_config, "--draft-config PATH"
        else:
            label, given, supply = "the model's config", run.model_config, "--model-config PATH"
        data, source = given, supply.split()[0]
        if data is None:
            data, source = local_config(path), os.path.join(path, "config.json")
        if data is None:  # a hub id, nothing given: the tree's own reader is answered instead (see _Unreadable)
            raise _Unreadable(f"{label} is not known to ddcheck (pass {supply})", path)
        text = f"{label} read from {source} by ddcheck: `{reader}()` cannot run here (at {run.caller() or '?'})"
        run.limitation(text)
        run.rt.answered.setdefault(path, text)  # the tree may keep it (lru_cache) for later launches
        return as_read_by(reader, ModelConfig(label, dict(data), supply, run.need))


class _Unreadable(NeedsInput):
    """A model's config that the tree's code reads through something that cannot run here, for a
    model ddcheck has no config of (a hub id). The run is made again with the tree's outermost
    function that was handed that model and reads a config (its name says so) answering an absent
    config, as it would for a model without one: what the tree then reads of it is recorded."""

    def __init__(self, message: str, path: str):
        super().__init__(message)
        self.path = path

    def reader(self, run: "_Run", stop) -> Any | None:
        """(owner, name, function) of that reader, from the traceback: the outermost tree frame below
        the start-up code whose function's name mentions a config and whose arguments hold the path."""
        tb = self.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            code = frame.f_code
            if run.rt.in_tree(code.co_filename) and code is not stop and "config" in code.co_name.lower():
                args = [frame.f_locals.get(n) for n in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]]
                if any(isinstance(a, (str, os.PathLike)) and os.fspath(a) == self.path for a in args):
                    hit = function_of(frame)
                    if hit is not None:
                        return hit
            tb = tb.tb_next
        return None


class _AnsweredReaders:
    """For the block, each reader found by :meth:`_Unreadable.reader` answers an absent config for
    its model, everywhere the tree's modules hold it; anything else it is handed runs as written."""

    def __init__(self, run: "_Run", readers: dict):
        self.run, self.readers = run, readers  # id(function) -> (owner, name, function, path)
        self.saved: list[tuple[Any, str, Any]] = []

    def __enter__(self):
        run = self.run
        for owner, name, member, path in self.readers.values():
            fn = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member

            def answer(*args, _fn=fn, _path=path, **kwargs):
                if _path in path_arguments(args, kwargs):
                    return run.absent_config(_path)
                return _fn(*args, **kwargs)

            wrapped = type(member)(answer) if isinstance(member, (staticmethod, classmethod)) else answer
            self.saved += replace_everywhere(run.rt.package, owner, member, wrapped)
        return self

    def __exit__(self, *exc) -> None:
        put_back(self.saved)
        self.saved.clear()


def _calling_code() -> str:
    """The name of the innermost frame outside ddcheck and the stand-ins: ``<module>`` for import-time code."""
    frame = sys._getframe(2)
    while frame is not None and (frame.f_code.co_filename == __file__ or "ddcheck/tree/" in frame.f_code.co_filename):
        frame = frame.f_back
    return frame.f_code.co_name if frame is not None else ""


class _Answering:
    """For the block, the runtime's stand-ins ask ``answer`` first (``Usage.answer``)."""

    def __init__(self, rt: TreeRuntime, answer):
        self.usage, self.answer = rt.report.usage, answer

    def __enter__(self):
        self.saved, self.usage.answer = self.usage.answer, self.answer
        return self

    def __exit__(self, *exc) -> None:
        self.usage.answer = self.saved


class _Declarations:
    """A tree function handed the record and keywords that are all its fields records a decision on
    them (``declare_resolution(server_args, source, field=value)``): seen through a profile hook."""

    def __init__(self, run: _Run):
        self.run = run

    def __enter__(self):
        self.previous = sys.getprofile()
        sys.setprofile(self.profile)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(self.previous)

    def profile(self, frame, event, arg) -> None:
        if event != "call":
            return
        code, run = frame.f_code, self.run
        if not code.co_flags & 0x08 or not run.rt.in_tree(code.co_filename):  # CO_VARKEYWORDS
            return
        at = code.co_argcount + code.co_kwonlyargcount + (1 if code.co_flags & 0x04 else 0)  # CO_VARARGS
        f_locals = frame.f_locals
        kwargs = f_locals.get(code.co_varnames[at])
        if not kwargs or not isinstance(kwargs, dict) or not set(kwargs) <= run.fields:
            return
        if not any(f_locals.get(n) is run.server_args for n in code.co_varnames[:code.co_argcount]):
            return
        caller = frame.f_back
        where = None
        while caller is not None and where is None:
            where = run.where_of(caller.f_code.co_filename, caller.f_lineno)
            caller = caller.f_back
        for name, value in kwargs.items():
            old = run.declared.get(name, getattr(run.server_args, name, None))
            run.declared[name] = value
            if old != value:
                run.result.writes.append(Write(name, old, value, where))


# --------------------------------------------------------------------------- server_args


class _ServerArgs:
    """``server_args`` for a tree whose own ``ServerArgs`` cannot be built here: the parsed flags;
    writes are recorded with their line."""

    def __init__(self, run: _Run, values: dict[str, Any], methods: set[str]):
        object.__setattr__(self, "_run", run)
        object.__setattr__(self, "_values", dict(values))
        object.__setattr__(self, "_methods", methods)

    def __getattr__(self, name: str):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        run = object.__getattribute__(self, "_run")
        if name in object.__getattribute__(self, "_methods") or name.startswith("get_"):
            def method(*args, **kwargs):
                run.need(f"ServerArgs.{name}() (the model's config or the machine)", "--model-config PATH")
                raise NeedsInput(f"ServerArgs.{name}() needs the model; ddcheck config does not load it")
            return method
        raise AttributeError(f"server_args has no attribute {name!r} in this tree's flags")

    def __setattr__(self, name: str, value: Any) -> None:
        values = object.__getattribute__(self, "_values")
        run = object.__getattribute__(self, "_run")
        old = values.get(name, ABSENT)
        values[name] = value
        run.wrote(name, old, value)


def _record_fields(cls) -> list[str]:
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    names = getattr(cls, "__struct_fields__", None)  # a msgspec Struct (0.5.21+)
    return list(names) if isinstance(names, tuple) else []


def _recording_class(run: _Run, cls: type) -> type:
    """A subclass of the tree's ServerArgs whose field writes are recorded, and whose ``__post_init__``
    waits (the handler, or the stepwise run of it, is what runs)."""
    base_setattr = cls.__setattr__

    def __setattr__(self, name, value):
        old = getattr(self, name, ABSENT) if run.recording else ABSENT
        base_setattr(self, name, value)
        run.wrote(name, old, value)

    def __post_init__(self):
        pass

    ns = {"__setattr__": __setattr__, "__post_init__": __post_init__, "__module__": cls.__module__,
          "__qualname__": cls.__qualname__}
    return type(cls)(cls.__name__, (cls,), ns)


def _build_server_args(run: _Run, cls: type, values: dict[str, Any]):
    """The tree's ServerArgs from the parsed flags, by its own ``from_cli_args`` where it has one."""
    rec = _recording_class(run, cls)
    run.fields = set(_record_fields(cls))
    kwargs = {k: v for k, v in values.items() if k in run.fields}
    build = getattr(rec, "from_cli_args", None)
    if callable(build) and not is_stand_in(build):
        return build(argparse.Namespace(**values))
    return rec(**kwargs)


def _values_of(run: _Run, sa: Any, values: dict[str, Any]) -> dict[str, Any]:
    """server_args after the run: the parsed flags (argparse-only names too), its fields as the tree
    left them, and the decisions declared on them."""
    if isinstance(sa, _ServerArgs):
        return dict(object.__getattribute__(sa, "_values"))
    out = dict(values)
    out.update((name, getattr(sa, name, None)) for name in run.fields)
    out.update(run.declared)
    return out


# --------------------------------------------------------------------------- __post_init__, statement by statement


def _sets_speculative(stmt: ast.stmt) -> bool:
    """The statement assigns a speculative setting (``self.speculative_num_draft_tokens = ...``)."""
    for node in ast.walk(stmt):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if isinstance(el, ast.Attribute) and el.attr.startswith("speculative_"):
                    return True
    return False


EXC_NAME = "_ddcheck_exc"


def guarded(fdef: ast.FunctionDef, filename: str, handler_call, stop: int | None = None):
    """``fdef`` compiled again (its decorators dropped) with each top-level statement before line
    ``stop`` (its docstring left out) in its own ``try``, whose handler calls the function named by
    ``handler_call(stmt)`` -> (name, constants) with the exception and the statement's facts."""
    body = []
    fdef = copy.copy(fdef)  # the tree model's node is shared: only this copy's body is rewritten
    for stmt in fdef.body:
        if stop is not None and stmt.lineno >= stop:
            break
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        func, args = handler_call(stmt)
        call = ast.Call(func=ast.Name(func, ast.Load()),
                        args=[ast.Name(EXC_NAME, ast.Load()), *(ast.Constant(a) for a in args)], keywords=[])
        handler = ast.ExceptHandler(type=ast.Name("Exception", ast.Load()), name=EXC_NAME, body=[ast.Expr(call)])
        body.append(ast.copy_location(ast.Try(body=[stmt], handlers=[handler], orelse=[], finalbody=[]), stmt))
    fdef.body = body or [ast.Pass()]
    fdef.decorator_list = []
    ast.fix_missing_locations(fdef)
    return compile(ast.Module(body=[fdef], type_ignores=[]), filename, "exec", dont_inherit=True)


class _StepStop(Exception):
    """A start-up statement that touches the speculative settings could not run here."""


def _stepwise(run: _Run, module, cls: type, name: str):
    """The tree's ``cls.name`` compiled again with each top-level statement in its own try: a
    statement that fails on what cannot run here is recorded and the next one runs; the tree's own
    raise/assert propagates (its rejection), and so does a failure in a statement about the
    speculative settings (the run cannot say what they are). A raise in a helper the statement
    called (``nvidia-smi not found`` while probing the GPU's memory) is not a rejection of the launch
    unless the statement is about the speculative settings."""
    relpath = module.__file__ and run.rt.relpath_of(module.__file__)
    fdef = TreeModules.of(run.tree).defined(relpath, f"{cls.__name__}.{name}")
    code = guarded(fdef, module.__file__, lambda stmt: ("__ddcheck_step__", (stmt.lineno, _sets_speculative(stmt))))

    def step(exc: BaseException, line: int, speculative: bool) -> None:
        if isinstance(exc, _Unreadable):
            raise exc  # run again with the tree's reader answering (see run_handler)
        where = run.raised_at(exc)
        if where is not None and (where.path == relpath or speculative) and _raises_there(run, where, exc):
            raise exc  # the start-up code's own rejection (not a helper's probe of this machine)
        if speculative:
            raise _StepStop(f"{type(exc).__name__}: {exc} (at {where or f'{relpath}:{line}'})") from exc
        run.limitation(f"start-up statement at {relpath}:{line} could not run here: "
                       f"{type(exc).__name__}: {exc}" + (f" (at {where})" if where else ""))

    ns: dict[str, Any] = {}
    module.__dict__["__ddcheck_step__"] = step
    exec(code, module.__dict__, ns)
    return ns[name], Where(relpath, fdef.lineno)


def find_handler(tree: SourceTree) -> tuple[str, str, str] | None:
    """(relpath, kind, name): the tree's speculative handler, a module function or a ServerArgs method."""
    candidates = [f for f in tree.files if f.relpath.endswith(".py")
                  and (ARG_GROUPS_DIR in f.relpath or f.relpath.endswith(SERVER_ARGS_FILE))]
    for f in candidates:
        data = f.read_bytes()
        mod = TreeModules.of(tree).parsed(f.relpath) if any(n.encode() in data for n in HANDLER_NAMES + METHOD_NAMES) \
            else None
        for node in mod.body if mod is not None else ():
            if isinstance(node, ast.FunctionDef) and node.name in HANDLER_NAMES:
                return f.relpath, "function", node.name
            if isinstance(node, ast.ClassDef) and node.name == SERVER_ARGS_CLASS:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name in METHOD_NAMES:
                        return f.relpath, "method", item.name
    return None


def server_args_methods(tree: SourceTree) -> set[str]:
    cls = tree_class(tree, SERVER_ARGS_FILE, SERVER_ARGS_CLASS)
    return {n.name for n in cls.body if isinstance(n, ast.FunctionDef)} if cls else set()


def server_args_values(tree: SourceTree, ns: dict[str, Any], field_defaults: dict[str, Any]) -> dict[str, Any]:
    """What ``ServerArgs.from_cli_args`` builds: the fields' defaults, the parsed flags, and the
    renames it applies (``args.pp_size = args.pipeline_parallel_size``), read from the tree."""
    values = {**field_defaults, **ns}
    f = tree.find(SERVER_ARGS_FILE)
    mod = (TreeModules.of(tree).parsed(f.relpath) if f is not None else None) or ast.Module(body=[], type_ignores=[])
    for node in ast.walk(mod):
        if isinstance(node, ast.FunctionDef) and node.name == "from_cli_args":
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                        and isinstance(stmt.targets[0], ast.Attribute) and isinstance(stmt.value, ast.Attribute) \
                        and stmt.value.attr in values:
                    values[stmt.targets[0].attr] = values[stmt.value.attr]
            break
    return values


def load_config(path: str | None) -> dict | None:
    """A model config as JSON: a ``config.json`` file or a directory holding one."""
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable JSON model config ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a model config is a JSON object")
    return data


class _Capture(logging.Handler):
    def __init__(self, run: _Run):
        super().__init__(logging.DEBUG)
        self.run = run

    def emit(self, record: logging.LogRecord) -> None:
        where = self.run.where_of(record.pathname, record.lineno)
        if where is None or record.levelno < logging.INFO:
            return
        if about_a_refusal(sys.exc_info()[1]):  # the tree's talk about a download refused (its retries)
            self.run.result.refusal_talk += 1
            return
        try:
            message = record.getMessage()
        except Exception:  # a tree message whose %-args are stand-ins
            message = str(record.msg)
        self.run.result.logged.append(Logged(record.levelname.lower(), message, where))


def run_handler(tree: SourceTree, values: dict[str, Any], draft_config: dict | None = None,
                model_config: dict | None = None, gpu: str = "nvidia", platform: Platform | None = None,
                entry=None) -> TreeRun:
    """Run the tree's speculative start-up code on ``values`` (the parsed flags, defaults included),
    on a machine of kind ``gpu`` (what the tree's platform probes answer; ``platform``: its
    architecture too). ``entry(run, server_args_module, ServerArgs) -> (function, Where)``: run that
    start-up code instead of the handler, on the flags as parsed (:mod:`ddcheck.config.selection`)."""
    found = find_handler(tree)
    values = dict(values)
    if entry is None and "device" in values and values["device"] is None and gpu in DEVICE_OF:
        values["device"] = DEVICE_OF[gpu]
    for key, default in FILLED_BEFORE.items():
        if entry is None and key in values and values[key] is None:
            values[key] = default
    rt = _session(tree, platform or PLATFORMS.get(gpu, Platform("cpu")), _model_digests(values, draft_config,
                                                                                         model_config))
    readers: dict = {}
    while True:
        run = _Run(tree, rt, draft_config, model_config)
        if gpu not in PLATFORMS and gpu != "cpu":
            run.limitation(f"a {gpu} machine cannot be emulated here: the tree's platform probes answered as "
                           "for a machine without a GPU")
        unreadable = _run_once(run, tree, found, values, readers, entry)
        if unreadable is None or len(readers) >= 4:
            return run.result
        hit = unreadable.reader(run, run.entry_code)
        if hit is None or id(hit[2]) in readers:
            return run.result
        readers[id(hit[2])] = (*hit, unreadable.path)


def _run_once(run: "_Run", tree: SourceTree, found, values: dict[str, Any], readers: dict,
              entry=None) -> "_Unreadable | None":
    """One run of the start-up code; the model config it could not read, when that ended it."""
    rt = run.rt
    root = logging.getLogger()
    capture = _Capture(run)
    old_level = root.level
    root.addHandler(capture)
    root.setLevel(logging.INFO)
    silenced = [(h, h.level) for h in root.handlers if h is not capture]
    for h, _ in silenced:
        h.setLevel(logging.CRITICAL + 1)
    sa, unreadable = None, None
    refused_before = len(GUARD.attempts)
    try:
        with rt, _Answering(rt, _LaunchModels(run)):
            fn, sa = _prepare(run, tree, found, values, entry)
            run.entry_code = getattr(fn, "__code__", None)
            run.recording = True
            try:
                with _AnsweredReaders(run, readers), _Declarations(run), UnprofiledImports():
                    fn(sa)
            except _Unreadable as exc:
                unreadable = exc
                run.result.failed = f"{type(exc).__name__}: {exc} (at {run.raised_at(exc)})"
            except NeedsInput as exc:
                run.result.failed = f"{type(exc).__name__}: {exc} (at {run.raised_at(exc)})"
            except _StepStop as exc:
                run.result.failed = f"the start-up code could not run here: {exc}"
            except RecursionError as exc:
                run.result.failed = f"the handler recursed too deep: {exc}"
            except Exception as exc:
                where = run.raised_at(exc)
                if about_a_refusal(exc):  # what it would have downloaded: named (_refusals), not the tree's verdict
                    run.result.failed = f"{type(exc).__name__}: {exc} (at {where})"
                    run.stopped_by_refusal = True
                elif where is not None and _raises_there(run, where, exc):  # the tree's own rejection
                    run.result.rejected = f"{type(exc).__name__}: {exc}"
                    run.result.rejected_at = where
                else:  # an operation on something ddcheck stood in for: not the tree's verdict
                    run.result.failed = f"{type(exc).__name__}: {exc} (at {where})"
            finally:
                run.recording = False
    except _NoStartup as exc:
        run.result.failed = str(exc)
    except SyntaxError as exc:
        run.result.failed = f"the tree's start-up code does not compile: {exc}"
    except Exception as exc:  # loading the handler's module failed: the tables take over
        run.result.failed = f"loading the start-up code failed: {type(exc).__name__}: {exc}"
    finally:
        root.removeHandler(capture)
        root.setLevel(old_level)
        for h, level in silenced:
            h.setLevel(level)
    _refusals(run, GUARD.attempts[refused_before:])
    run.result.values = _values_of(run, sa, values) if sa is not None else values
    run.result.stand_in_modules = rt.report.stand_in_modules
    for key in (MODEL_PATH, SPECULATIVE_DRAFT_MODEL_PATH):  # read by an earlier launch, kept by the tree
        text = getattr(rt, "answered", {}).get(values.get(key))
        if text is not None and not any(x.startswith(text.split(" by ddcheck")[0]) for x in run.result.limitations):
            run.limitation(text)
    return unreadable


def _refusals(run: "_Run", attempts: list) -> None:
    """Each address the tree's code tried to reach (refused: the worker runs it offline), with the tree
    line that asked: a limitation of the run where it went on, what it needed where that ended it."""
    seen: dict[tuple[str, str], int] = {}
    for a in attempts:
        where = next((w for w in (run.where_of(f, n) for f, n in a.stack) if w is not None), None)
        seen[(a.address, str(where or "?"))] = seen.get((a.address, str(where or "?")), 0) + 1
    if run.stopped_by_refusal:
        asked = ", ".join(f"{address} (asked at {where})" for address, where in seen) or "the network"
        run.result.failed = (f"it needs what it would download from {asked}: {WHY}, or give ddcheck that "
                             f"value (a model's config: --model-config/--draft-config, or a local folder or the "
                             f"Hugging Face cache) [{run.result.failed}]")
        return
    talk = f"; what it logged about it ({run.result.refusal_talk} message(s)) is its own output, not a finding" \
        if run.result.refusal_talk else ""
    for (address, where), n in seen.items():
        run.limitation(f"the tree's code at {where} tried to reach {address} ({n} time(s)), refused at once: "
                       f"{WHY}; it went on as it does when that fails{talk}")


class _NoStartup(Exception):
    """The tree has no start-up code ddcheck can run."""


def _tree_server_args(run: _Run, tree: SourceTree):
    """(module, ServerArgs class) of the tree, or (None, None) where it cannot be had here."""
    rel = tree.find(SERVER_ARGS_FILE)
    if rel is None:
        return None, None
    name = run.rt.tree.module_name(rel.relpath)
    try:
        module = run.rt.import_module(name)
    except Exception as exc:  # noqa: BLE001 - reported; the stand-in record takes over
        run.limitation(f"{name} did not import here: {type(exc).__name__}: {exc}")
        return None, None
    cls = module.__dict__.get(SERVER_ARGS_CLASS)
    if not isinstance(cls, type) or is_stand_in(cls):
        why = run.rt.report.partial.get(name, "no ServerArgs class")
        run.limitation(f"{name}.ServerArgs is not defined here ({why})")
        return module, None
    return module, cls


def _prepare(run: _Run, tree: SourceTree, found, values: dict[str, Any], entry=None):
    """(the start-up function to call on server_args, server_args)."""
    module, cls = _tree_server_args(run, tree)
    sa = None
    if cls is not None:
        try:
            sa = _build_server_args(run, cls, values)
        except Exception as exc:  # noqa: BLE001 - reported; the stand-in record takes over
            run.limitation(f"the tree's ServerArgs could not be built from the flags here: {type(exc).__name__}: "
                           f"{exc} (at {run.raised_at(exc)})")
    if sa is None:
        sa = _ServerArgs(run, values, server_args_methods(tree))
    run.server_args = sa
    if entry is not None:
        if isinstance(sa, _ServerArgs):
            raise _NoStartup("the tree's ServerArgs cannot be built here, so its start-up code cannot run")
        fn, run.result.handler = entry(run, module, cls)
        return fn, sa
    if found is None:
        if cls is None or not callable(cls.__dict__.get(ENTRY_METHOD)) or isinstance(sa, _ServerArgs):
            raise _NoStartup("no speculative handler (handle_speculative_decoding) in this tree, and its "
                             "ServerArgs.__post_init__ cannot run here")
        fn, run.result.handler = _stepwise(run, module, cls, ENTRY_METHOD)
        return fn, sa
    relpath, kind, name = found
    module_name = tree.module_name(relpath)
    if kind == "function":
        fn = getattr(run.rt.import_module(module_name), name)
        if is_stand_in(fn) or not callable(fn):
            raise _NoStartup(f"{relpath} did not define {name} here: "
                             f"{run.rt.report.partial.get(module_name, 'a stand-in')}")
        run.result.handler = Where(relpath, fn.__code__.co_firstlineno)
        return fn, sa
    if isinstance(sa, _ServerArgs):
        raise _NoStartup(f"the tree's ServerArgs cannot be built here, so its {name} cannot run")
    fn = getattr(cls, name)
    run.result.handler = Where(relpath, fn.__code__.co_firstlineno)
    return fn, sa


def _raises_there(run: _Run, where: Where, exc: BaseException) -> bool:
    """``exc`` is what a ``raise`` or ``assert`` statement of the tree at that line deliberately raises: a
    rejection. Not an error in evaluating it (``assert self.chunked_prefill_size % self.page_size == 0``
    raising TypeError on a None that a statement before it could not set here, 0.4.6 server_args.py:278)."""
    mod = TreeModules.of(run.tree).parsed(where.path)
    return mod is not None and any(
        isinstance(n, (ast.Raise, ast.Assert)) and n.lineno <= where.line <= (n.end_lineno or n.lineno)
        and _deliberate(n, exc) for n in ast.walk(mod))


def _deliberate(node: ast.Raise | ast.Assert, exc: BaseException) -> bool:
    """Whether ``exc`` is the exception the statement raises: an assert's AssertionError; for ``raise
    Name(...)``, an exception of that class (by name, along its bases); any other raise's as it is."""
    if isinstance(node, ast.Assert):
        return isinstance(exc, AssertionError)
    if not isinstance(node.exc, ast.Call):
        return True  # ``raise``, ``raise err``: whatever it holds
    func = node.exc.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return name is None or name in {klass.__name__ for klass in type(exc).__mro__}
