"""Load an attention backend of an sglang tree, with the tree's own code, without importing sglang.

:class:`SglangImporter` runs the tree through :class:`ddcheck.tree.runtime.TreeRuntime`: every
module of the tree runs for real from its own file (the backend, its base, the kernels, utils, env
readers, ``ForwardMode``, the verify-input classes...), and only what cannot run on this machine is a
stand-in, found automatically from the import that fails (compiled extensions such as
``sgl_kernel``, flashinfer's JIT kernels, packages that are not installed). The platform probes answer
for the emulated GPU (an sm90 NVIDIA device unless told otherwise).

The server args a backend reads are an instance of the tree's own ``ServerArgs``, holding its own
defaults and this run's launch values (C, top-k, the backend, page size 1); they are published to the
tree's process-wide slots by the tree's own setters. What the run used of stand-ins is in the report:
a limitation of its verdict, never a silent fake.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddcheck.tree.sources import SourceTree
from ddcheck.tree import names
from ddcheck.tree.classes import UNDECLARED, WrittenClass, class_member, class_name, init_value, initializers, \
    written_class
from ddcheck.tree.models import ABSENT, ModelFolders
from ddcheck.tree.startup import env_assignments, propagate_env
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.runtime import Platform, TreeRuntime, active
from ddcheck.tree.standins import is_stand_in, stand_in
from ddcheck.tree.names import PACKAGE, TRITON_BACKEND_FILE

BACKEND_MODULE = f"{names.ATTENTION_PACKAGE}.triton_backend"  # the default backend
BACKEND_RELPATH = TRITON_BACKEND_FILE
# The model the tree's start-up reads (config.json of a small Llama; the batch's attention shape is
# the harness's own, handed to the backend through the model runner).
SMOKE_MODEL_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
                      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128, "num_hidden_layers": 1,
                      "intermediate_size": 1024, "vocab_size": 32000, "max_position_embeddings": 16384,
                      "rms_norm_eps": 1e-5, "torch_dtype": "bfloat16"}


def smoke_model_config(shape: Any = None) -> dict:
    """The smoke model's ``config.json``: a small Llama, with the batch's attention heads."""
    config = dict(SMOKE_MODEL_CONFIG)
    if shape is not None:
        config.update(num_attention_heads=shape.num_q_heads, num_key_value_heads=shape.num_kv_heads,
                      head_dim=shape.head_dim, hidden_size=shape.num_q_heads * shape.head_dim,
                      max_position_embeddings=shape.max_context_len)
    return config


class HarnessError(Exception):
    """The harness could not run the target's verify path (torch missing, a crash, no CUDA device):
    could not judge, exit code 3. ``to_judge``: what would make it judgeable."""

    def __init__(self, message: str, to_judge: str = ""):
        super().__init__(message)
        self.to_judge = to_judge


class SmokeUsageError(HarnessError):
    """A bad argument, or a target the user named that cannot be obtained (missing, not an sglang
    tree, an unknown version): exit code 2."""


@dataclass
class Trace:
    """What the run touched: stand-ins used, fake attributes read, tree modules run."""

    provided_calls: dict[str, int] = field(default_factory=dict)  # the launch values set on ServerArgs
    stand_ins_called: list[str] = field(default_factory=list)  # "name at relpath:line", while the backend ran
    reads: dict[str, set[str]] = field(default_factory=dict)
    missing: dict[str, set[str]] = field(default_factory=dict)
    real_modules: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # tree relpaths run
    stopped: dict[str, str] = field(default_factory=dict)  # tree modules that stopped while imported
    stand_in_modules: list[str] = field(default_factory=list)
    startup_stand_ins: list[str] = field(default_factory=list)  # called by the tree's start-up code
    # handed objects like a tree class whose module stopped while imported: label -> the class, where its
    # source writes it, the module, why it stopped, what would make it run, bases that could not be read
    from_source: dict[str, dict[str, Any]] = field(default_factory=dict)

    def call(self, name: str) -> None:
        self.provided_calls[name] = self.provided_calls.get(name, 0) + 1


class Recording:
    """A bag of attributes that records which ones the backend reads. ``_like``: the tree's class it stands
    for (a class, or one read from its source: :mod:`ddcheck.tree.classes`); it answers only what it holds
    and what that class declares, and a name the class does not declare is absent (``hasattr`` and
    ``getattr(x, name, default)`` see what they would on the tree's object). A declared name whose value
    cannot be had here, or any name it lacks where there is no class, is recorded as *missing* and answered
    by a falsy stand-in (a feature that is off)."""

    def __init__(self, label: str, trace: Trace, _like: Any = None, **attrs: Any):
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_trace", trace)
        object.__setattr__(self, "_attrs", dict(attrs))
        object.__setattr__(self, "_like", _like)
        if isinstance(_like, WrittenClass):
            trace.from_source[label] = {"class": _like.name, "defined_at": f"{_like.relpath}:{_like.line}",
                                        "module": _like.module, "stopped": _like.stopped, "to_run": _like.to_run,
                                        "unread_bases": list(_like.unread)}

    def _initialized(self, name: str) -> Any:
        """``name`` as the tree's own initializer of it builds it from this object's values (the
        values handed in are kept as they were); ``ABSENT`` when none exists or none succeeds (then a
        stand-in answers, reported), or while it runs (an initializer that reads what it initializes)."""
        running = self.__dict__.setdefault("_initializing", set())
        if name in running:
            return ABSENT
        running.add(name)
        try:
            return self._run_initializers(name)
        finally:
            running.discard(name)

    def _run_initializers(self, name: str) -> Any:
        for method in initializers(self._like, name):
            given = dict(self._attrs)
            try:
                getattr(self._like, method)(self)
            except Exception as exc:  # noqa: BLE001 - reported; ddcheck's model or a stand-in answers
                self._trace.stopped[f"{self._like.__name__}.{method}"] = f"{type(exc).__name__}: {exc}"
                value = ABSENT
            else:
                value = self._attrs.get(name, ABSENT)
            self._attrs.clear()
            self._attrs.update(given)
            if value is not ABSENT:
                self._attrs[name] = value
                return value
        return ABSENT

    def __getattr__(self, name: str):
        attrs, trace, label = self._attrs, self._trace, self._label
        if name in attrs:
            trace.reads.setdefault(label, set()).add(name)
            return attrs[name]
        if name.startswith("__"):
            raise AttributeError(name)
        if self._like is not None:  # the tree's own class: its field default, its method or property
            value = class_member(self._like, name, self)
            if value is UNDECLARED:  # an instance of the tree's class has no such attribute either
                raise AttributeError(f"{class_name(self._like)} has no attribute {name!r}")
            if value is ABSENT:
                value = init_value(self._like, name, self, held=self._attrs.__contains__)
            if value is ABSENT:
                value = self._initialized(name)
            if value is not ABSENT:
                trace.reads.setdefault(label, set()).add(f"{name} (the tree's {class_name(self._like)})")
                return value
        trace.missing.setdefault(label, set()).add(name)
        usage = _USAGE.get(id(trace))
        if usage is None:  # built outside a tree runtime: absent
            raise AttributeError(f"{label} (ddcheck fake) has no attribute {name!r}")
        value = stand_in(f"{label}.{name}", usage)
        attrs[name] = value
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        self._attrs[name] = value


def tree_class(module: str | None, name: str, tree: SourceTree | None = None) -> Any:
    """The tree's class ``module.name`` where its module ran; where the module stopped while imported
    before its ``class`` statement ran, the class as the tree's source writes it (a
    :class:`~ddcheck.tree.classes.WrittenClass`); else None. ``module`` None: the module of ``tree`` that
    defines it."""
    if module is None:
        module = tree.module_defining(name) if tree is not None else None
        if module is None:
            return None
    try:
        value = importlib.import_module(module).__dict__.get(name)
    except Exception:  # noqa: BLE001 - a module that cannot run here has no class to lend
        return None
    if isinstance(value, type) and not is_stand_in(value):
        return value
    runtime = active()
    if runtime is None or module not in runtime.report.partial:
        return None
    return written_class(TreeModules.of(runtime.tree), name, module, runtime.report.partial[module],
                         runtime.report.to_run.get(module, ""))


def from_source_note(label: str, entry: dict[str, Any]) -> str:
    """The limitation line of a handed object like a tree class read from its source (``Trace.from_source``)."""
    unread = entry.get("unread_bases") or []
    return (f"{label} is like the tree's {entry['class']} as its source writes it ({entry['defined_at']}): its "
            f"module {entry['module']} stopped while imported ({entry['stopped']}), so the class was never built "
            f"here; what it declares is answered from its source, a name it does not declare is absent"
            + (f" (but for its bases {', '.join(unread)}, which could not be read)" if unread else "")
            + f", and its methods and a value that needs what did not run are recorded stand-ins; to run it: "
              f"{entry['to_run'] or 'an environment where the module imports'}")


_USAGE: dict[int, Any] = {}  # id(trace) -> the runtime's Usage, while a session runs


@dataclass
class LoadContext:
    """Start-up configuration of the run: the launch values ServerArgs gets."""

    device: str
    num_draft_tokens: int
    num_steps: int
    topk: int = 1
    attention_backend: str = "triton"
    arch: str = "sm90"
    flashinfer: bool = False  # kept for callers; flashinfer is a stand-in found like any other
    emulate: bool = True  # the probes answer for the emulated GPU (False: kernels run on this machine)
    # a launch's server_args values as the tree's own start-up resolved them (``ddcheck config``): the server
    # args hold them, this run's own values over them, and the start-up (``__post_init__``) is not run again
    resolved: dict[str, Any] | None = None


class SglangImporter:
    """The tree's runtime for one smoke session; install with ``with importer:``."""

    def __init__(self, tree: SourceTree, context: LoadContext, backend_source: str | None = None,
                 extra_real: set[str] | None = None, backend_module: str = BACKEND_MODULE):
        if tree.package_root("sglang") is None:
            raise SmokeUsageError(f"{tree.label}: no sglang package in this target")
        self.tree, self.context, self.trace = tree, context, Trace()
        self.backend_module = backend_module
        self.extra_real: set[str] = set(extra_real or ())  # imported before the backend (its verify input)
        overrides = {backend_module: backend_source} if backend_source is not None else {}
        platform = Platform(arch=context.arch, device=context.device, emulate=context.emulate)
        self.runtime = TreeRuntime(tree, platform, overrides=overrides)
        self._server_args: Any = None
        self._started = False
        self.published: list[str] = []  # the tree's setters that took our server args

    def __enter__(self):
        self.runtime.__enter__()
        usage = self.runtime.report.usage
        usage.answer = ModelFolders()  # the smoke model's folder, read as the tree reads it
        _USAGE[id(self.trace)] = usage
        return self

    def __exit__(self, *exc) -> None:
        self.collect()
        _USAGE.pop(id(self.trace), None)
        self.runtime.__exit__(*exc)

    def collect(self) -> None:
        """Copy what the runtime saw into the trace."""
        rep, t = self.runtime.report, self.trace
        t.real_modules = list(dict.fromkeys(rep.modules_run))
        t.files = list(dict.fromkeys(rep.files))
        t.stopped = {**rep.partial, **t.stopped}
        t.stand_in_modules = rep.stand_in_modules
        t.stand_ins_called = [f"{n} at {w}" for n, w in dict.fromkeys(rep.usage.run_calls())]
        t.startup_stand_ins = [f"{n} at {w}" for n, w in dict.fromkeys(rep.usage.startup_calls)]

    # -- tree lookups
    def tree_has_module(self, fullname: str) -> bool:
        return self.tree.module_file(fullname) is not None

    def preload(self) -> dict[str, str]:
        """Import the session's extra modules (the verify input's) before the backend, so both bind
        the same classes; returns {module: why} for one that stopped while imported."""
        failed: dict[str, str] = {}
        self.server_args()  # the start-up runs first: it sets what modules read at import
        for name in sorted(self.extra_real, key=lambda n: n.count(".")):
            if not self.tree_has_module(name):
                continue
            importlib.import_module(name)
            if name in self.runtime.report.partial:
                failed[name] = self.runtime.report.partial[name]
        return failed

    def load_backend(self) -> types.ModuleType:
        """Import the backend module (inside ``with self:``) and publish the server args."""
        name = self.backend_module
        if not self.tree_has_module(name):
            raise HarnessError(f"{self.tree.label}: no {name.replace('.', '/')}.py in this target")
        server_args = self.server_args()  # the start-up runs first: it sets what modules read at import
        module = importlib.import_module(name)
        with self.runtime.start_up():
            self.publish(server_args)
        self.apply_launch_values()
        return module

    def backend_class(self, module: types.ModuleType, cls: str) -> type:
        value = module.__dict__.get(cls)
        if not isinstance(value, type) or is_stand_in(value):
            why = self.runtime.report.partial.get(module.__name__)
            raise HarnessError(f"the backend module defines no {cls}"
                               + (f": it stopped while imported, {why}" if why else ""))
        return value

    def forward_mode(self):
        module = importlib.import_module(names.FORWARD_BATCH_MODULE)
        mode = module.__dict__.get(names.FORWARD_MODE)
        if not isinstance(mode, type) or is_stand_in(mode):
            raise HarnessError(f"{self.tree.label}: {names.FORWARD_MODE} not found in "
                               f"{names.FORWARD_BATCH_MODULE.replace('.', '/')}.py")
        return mode

    # -- server args: the tree's class, its defaults, this launch's values
    def server_args(self) -> Any:
        if self._server_args is None:
            with self.runtime.start_up():
                self._server_args = self._build_server_args()
        return self._server_args

    def launch_values(self) -> dict[str, Any]:
        ctx = self.context
        return {names.SPECULATIVE_NUM_DRAFT_TOKENS: ctx.num_draft_tokens, names.SPECULATIVE_NUM_STEPS: ctx.num_steps,
                names.SPECULATIVE_EAGLE_TOPK: ctx.topk, names.SPECULATIVE_ALGORITHM: names.EAGLE,
                names.ATTENTION_BACKEND: ctx.attention_backend, names.PREFILL_ATTENTION_BACKEND: ctx.attention_backend,
                names.DECODE_ATTENTION_BACKEND: ctx.attention_backend, names.PAGE_SIZE: 1, names.KV_CACHE_DTYPE: "auto",
                "device": "cuda", names.DISABLE_CUDA_GRAPH: False, names.TP_SIZE: 1, names.DP_SIZE: 1,
                names.TRITON_ATTENTION_NUM_KV_SPLITS: 8}

    def _build_server_args(self) -> Any:
        """An instance of the tree's ``ServerArgs`` holding its own field defaults and the launch's values,
        made by its own ``__post_init__`` (the tree's start-up) for a model shaped as the smoke batch. Where
        that fails here, or where the launch's values are its result already (``LoadContext.resolved``), the
        instance is made through a subclass whose ``__post_init__`` does nothing, so any kind of class the
        tree declares (a dataclass, a msgspec struct) fills its defaults its own way."""
        module = importlib.import_module(names.SERVER_ARGS_MODULE)
        cls = module.__dict__.get(names.SERVER_ARGS_CLASS)
        values = self.launch_values()
        if not isinstance(cls, type) or is_stand_in(cls):
            return Recording(names.SERVER_ARGS_ATTR, self.trace, **values)
        fields = _field_names(cls)
        given = {k: v for k, v in values.items() if k in fields}
        model = {names.MODEL_PATH: self._model_dir()} if names.MODEL_PATH in fields else {}
        resolved = {k: v for k, v in (self.context.resolved or {}).items()
                    if k in fields and k not in given and k not in model}
        obj = None
        if not resolved:  # the tree's own start-up, for a model shaped as the smoke batch
            try:
                obj = cls(**given, **model)
            except Exception as exc:  # noqa: BLE001 - reported; its field defaults are used instead
                self.trace.stopped[f"{names.SERVER_ARGS_CLASS}.__post_init__"] = (
                    f"{type(exc).__name__}: {exc} (at {self.runtime.where_in_tree(exc)}); the tree's field "
                    f"defaults and the launch's values are used, and the environment it propagates is evaluated "
                    f"from its source")
        if obj is None:  # its defaults and the values (the launch's resolved ones first), no start-up run
            try:
                quiet = type(cls.__name__, (cls,), {"__post_init__": lambda self: None,
                                                    "__module__": cls.__module__, "__qualname__": cls.__qualname__})
                obj = quiet(**resolved, **given, **model)
            except Exception as exc2:  # noqa: BLE001 - reported; a recording of the launch values stands in
                self.trace.stopped[f"{names.SERVER_ARGS_CLASS}(...)"] = f"{type(exc2).__name__}: {exc2}"
                return Recording(names.SERVER_ARGS_ATTR, self.trace, **values)
            set_env = propagate_env(env_assignments(self.tree, names.SERVER_ARGS_MODULE), vars(module), obj)
            self.published += [f"os.environ[{k!r}] = {v!r}" for k, v in set_env.items()]
        else:
            self.published.append(f"{names.SERVER_ARGS_CLASS}.__post_init__")
        self._given = given
        for key in given:
            self.trace.call(f"ServerArgs.{key}")
        return obj

    def apply_launch_values(self) -> None:
        """The run's own C, widths and page size on the server args, whatever the tree's start-up
        chose (once its setters have taken them: their consistency checks see the start-up's result)."""
        obj = self._server_args
        for key, value in getattr(self, "_given", {}).items():
            if getattr(obj, key, value) != value:
                self.trace.stopped[f"{names.SERVER_ARGS_CLASS}.{key}"] = (
                    f"the tree's start-up set it to {getattr(obj, key)!r}; this run uses {value!r}")
                try:
                    object.__setattr__(obj, key, value)
                except Exception:  # noqa: BLE001 - a frozen record keeps the tree's value
                    pass

    def _model_dir(self) -> str:
        """A model folder whose ``config.json`` describes a small Llama-style model (the smoke batch's
        heads), for the tree's start-up to read."""
        import json
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="ddcheck-model-", dir=self.runtime.scratch))
        (folder / "config.json").write_text(json.dumps(SMOKE_MODEL_CONFIG), encoding="utf-8")
        return str(folder)

    def start_up(self, model_config: Any) -> None:
        """The parallel state a model runner's start-up sets, by the tree's own functions
        (``names.SINGLE_PROCESS_STARTUP``), for one process on gloo: each is called by parameter
        name from this launch's values and ``server_args``; one that fails is reported, not fatal."""
        if self._started:
            return
        self._started = True
        import socket

        import torch.distributed as dist

        values: dict[str, Any] = {"world_size": 1, "rank": 0, "local_rank": 0, "backend": "gloo",
                                  "tp_rank": 0, names.TP_SIZE: 1, names.DP_SIZE: 1, names.PP_SIZE: 1,
                                  names.ENABLE_DP_ATTENTION: False, names.MOE_DENSE_TP_SIZE: None,
                                  names.SERVER_ARGS_ATTR: self.server_args(), names.MODEL_CONFIG_ATTR: model_config}
        if not dist.is_initialized():
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                values["distributed_init_method"] = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
        with self.runtime.this_machine(), self.runtime.start_up():
            self._start_up(values)

    def _start_up(self, values: dict[str, Any]) -> None:
        for module_name, fn_name in names.SINGLE_PROCESS_STARTUP:
            if not self.tree_has_module(module_name):
                continue
            fn = importlib.import_module(module_name).__dict__.get(fn_name)
            if not inspect.isfunction(fn):
                continue
            kwargs, lacking = {}, []
            for p in inspect.signature(fn).parameters.values():
                if p.name in values:
                    kwargs[p.name] = values[p.name]
                elif p.name.endswith("_size") and p.default is not p.empty:
                    kwargs[p.name] = 1  # a parallel width: one process
                elif p.default is p.empty:
                    if hasattr(values[names.SERVER_ARGS_ATTR], p.name):
                        kwargs[p.name] = getattr(values[names.SERVER_ARGS_ATTR], p.name)
                    else:
                        lacking.append(p.name)
            label = f"{module_name}.{fn_name}"
            if lacking:
                self.trace.stopped[label] = f"not called: no value for {', '.join(lacking)}"
                continue
            try:
                fn(**kwargs)
            except Exception as exc:  # noqa: BLE001 - reported with the verdict
                self.trace.stopped[label] = f"{type(exc).__name__}: {exc}"
            else:
                self.published.append(label)

    def publish(self, server_args: Any) -> None:
        """Hand the server args to the tree's own process-wide setter: the first module-level function
        named like ``set_global_server_args...`` (``names.SERVER_ARGS_SETTER``) that takes them, else a
        context object's ``set_server_args``, in the tree modules loaded so far; and fill the tree's
        server-args dicts (``global_server_args_dict``, 0.4.x) from them."""
        import sys

        pattern = re.compile(names.SERVER_ARGS_SETTER)
        prefix = self.runtime.package + "."
        functions, methods = [], []
        for mod_name, module in sorted(sys.modules.items()):
            if not mod_name.startswith(prefix) or not isinstance(module, types.ModuleType):
                continue
            for attr, value in list(vars(module).items()):
                if is_stand_in(value) or isinstance(value, (type, types.ModuleType)):
                    continue
                if inspect.isfunction(value) and pattern.fullmatch(attr) and value.__module__ == mod_name:
                    functions.append((f"{mod_name}.{attr}", value))
                elif isinstance(value, dict) and pattern.fullmatch(f"set_{attr}"):
                    for key in list(value):
                        if isinstance(key, str) and hasattr(server_args, key):
                            value[key] = getattr(server_args, key)
                    self.published.append(f"{mod_name}.{attr}")
                elif not inspect.isroutine(value) and type(value).__module__ == mod_name:
                    for meth in dir(type(value)):
                        if pattern.fullmatch(meth) and callable(getattr(value, meth, None)):
                            methods.append((f"{mod_name}.{attr}.{meth}", getattr(value, meth)))
        for group in (functions, methods):
            for label, fn in group:
                try:
                    params = [p for p in inspect.signature(fn).parameters.values()
                              if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
                except (TypeError, ValueError):
                    continue
                if len(params) != 1:
                    continue
                try:
                    fn(server_args)
                except Exception as exc:  # noqa: BLE001 - reported: the tree's setter wants more than we have
                    self.trace.stopped[label] = f"{type(exc).__name__}: {exc}"
                else:
                    self.published.append(label)
                    return


def _field_names(cls: type) -> set[str]:
    """The fields of a dataclass or a msgspec struct (``__struct_fields__``), else its annotations."""
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls)}
    return set(getattr(cls, "__struct_fields__", ()) or getattr(cls, "__annotations__", {}))


def verify_path_files(tree: SourceTree, backend_modules: tuple[str, ...] = (BACKEND_MODULE,)) -> list:
    """The tree files a smoke run may read: since the tree's own code runs, every module of its
    ``sglang`` package (enough to run the harness on a machine with no sglang: copy them into a
    directory and pass that as the target)."""
    root = tree.package_root(PACKAGE)
    prefix = f"{root}/" if root else ""
    return [f for f in tree.files if f.relpath.startswith(f"{prefix}{PACKAGE}/") and f.relpath.endswith(".py")]
