"""Resolve a launch's speculative settings by running the target tree's own start-up code.

Forks add flags and change what the old ones mean (``--speculative-dflash-enable-ddtree`` skips a
check, a budget flag sets C...), so per-release tables cannot know them. Here the tree's own
speculative handler — ``handle_speculative_decoding(server_args)`` of ``arg_groups/`` (0.5.16 and
the DDTree forks) or ``ServerArgs._handle_speculative_decoding`` (older releases) — runs on a
stand-in ``server_args`` carrying the parsed flags, with:

* the handler's module, and the tree modules it imports, executed from the tree (one level of
  imports deep; anything deeper, and torch/transformers/huggingface_hub, are stand-ins that fail
  loudly, naming themselves, when called);
* ``get_config`` answered from ``--draft-config``/``--model-config`` files when given; without them
  every attribute the tree reads from a model config is recorded as *assumed absent*;
* every attribute the tree writes on ``server_args`` recorded with the file:line that wrote it, every
  warning it logs captured with its file:line, and an exception it raises reported as the tree's
  rejection, at the line that raised it.

Nothing here is imported from sglang: the tree's files are read and compiled under their own names.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddcheck.isolation import SwappedImports
from ddcheck.launch.evaluate import tree_class
from ddcheck.sources import SourceTree
from ddcheck.target.names import HANDLER_METHOD_NAMES as METHOD_NAMES, HANDLER_NAMES, PACKAGE, SERVER_ARGS_FILE

# Third-party packages that are heavy or need a GPU: never imported, always stand-ins.
FOREIGN = ("torch", "triton", "transformers", "huggingface_hub", "sgl_kernel", "flashinfer", "vllm", "numpy",
           "aiter", "deep_gemm", "safetensors", "msgspec", "zmq", "psutil", "requests", "orjson", "uvloop")
NAMESPACES = (PACKAGE,) + FOREIGN
MAX_DEPTH = 2
# sglang.srt.utils platform probes -> the --gpu value for which they answer True.
PLATFORM_PROBES = {"is_cuda": "nvidia", "is_cuda_alike": "nvidia", "is_hip": "amd", "is_npu": "npu",
                   "is_cpu": "cpu", "is_xpu": "xpu", "is_musa": "musa", "is_mps": "mps",
                   "cpu_has_amx_support": "cpu-amx"}
GPUS = ("nvidia", "amd", "npu", "xpu", "musa", "cpu")
# ServerArgs.__post_init__ fills these before the speculative handler runs (``_handle_missing_default_values``:
# device = get_device(); ``_handle_page_size``: 1 unless the backend asks for more); the handler reads them.
DEVICE_OF = {"nvidia": "cuda", "amd": "cuda", "npu": "npu", "xpu": "xpu", "musa": "musa", "cpu": "cpu"}
FILLED_BEFORE = {"page_size": 1}


class NeedsInput(AttributeError):
    """The tree's code asked for something ddcheck does not have (a model config, the GPU).
    An AttributeError, so ``getattr(cfg, "x", default)`` in the tree takes its default."""


class StandInUsed(Exception):
    """A stand-in was called: the tree's code needs something that does not run here."""


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
    failed: str | None = None  # the run could not complete (a stand-in called, harness error): why

    @property
    def ok(self) -> bool:
        return self.failed is None


# --------------------------------------------------------------------------- stand-ins


class _StandInBase:
    """What a tree class deriving from a stand-in (``class L(msgspec.Struct, frozen=True)``) derives
    from instead: class keywords accepted, so the rest of the module still loads."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__()


class _StandIn:
    """Anything reached through a stand-in module: attribute access gives more stand-ins, use in
    annotations/isinstance/subclassing works, calling it raises :class:`StandInUsed`."""

    def __init__(self, name: str, run: "_Runner"):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_run", run)

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _StandIn(f"{self._name}.{attr}", self._run)

    def __call__(self, *args, **kwargs):
        self._run.stand_in_called(self._name)
        raise StandInUsed(f"{self._name}() does not run in ddcheck config")

    def __getitem__(self, item):
        return self

    def __or__(self, other):
        return self

    __ror__ = __or__

    def __mro_entries__(self, bases):
        return (_StandInBase,)

    def __repr__(self) -> str:
        return f"<ddcheck stand-in {self._name}>"


class _Module(types.ModuleType):
    def __init__(self, name: str, run: "_Runner"):
        super().__init__(name)
        self.__path__ = []
        self.__dict__["_ddcheck_run"] = run

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        run: _Runner = self.__dict__["_ddcheck_run"]
        sub = f"{self.__name__}.{attr}"
        if run.module_file(sub) is not None:
            return importlib.import_module(sub)
        value = run.provided.get(sub) or _StandIn(sub, run)
        setattr(self, attr, value)
        return value


class _Config:
    """A model config read from a JSON file (``--draft-config``), or an absent one."""

    def __init__(self, run: "_Runner", label: str, data: dict | None, supply: str):
        object.__setattr__(self, "_run", run)
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "_supply", supply)

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        data = self._data
        if data is not None:
            if attr in data:
                value = data[attr]
                return _Config(self._run, f"{self._label}.{attr}", value, self._supply) if isinstance(value, dict) else value
            raise AttributeError(attr)
        self._run.need(f"{self._label}: `{attr}`", self._supply)
        raise NeedsInput(f"{self._label} is not known to ddcheck (pass {self._supply})")

    def to_dict(self) -> dict:
        if self._data is None:
            self._run.need(f"{self._label} (whole)", self._supply)
            raise NeedsInput(f"{self._label} is not known to ddcheck (pass {self._supply})")
        return dict(self._data)

    def get(self, key, default=None):
        try:
            return getattr(self, key)
        except AttributeError:
            return default

    def __contains__(self, key) -> bool:
        return self.get(key, None) is not None


class _ServerArgs:
    """``server_args`` for the handler: the parsed flags; writes are recorded with their line."""

    def __init__(self, run: "_Runner", values: dict[str, Any], methods: set[str]):
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
        had, old = name in values, values.get(name)
        values[name] = value
        if not had or old != value:
            run.result.writes.append(Write(name, old, value, run.caller()))


# --------------------------------------------------------------------------- the runner


class _Runner(SwappedImports, importlib.abc.MetaPathFinder, importlib.abc.Loader):
    namespaces = NAMESPACES

    def __init__(self, tree: SourceTree, draft_config: dict | None, model_config: dict | None, gpu: str = "nvidia"):
        self.tree, self.gpu = tree, gpu
        self.result = TreeRun()
        root = tree.package_root("sglang")
        self.prefix = f"{root}/" if root else ""
        self.paths = {f.relpath: f for f in tree.files}
        self.depth: dict[str, int] = {}
        self.loading: list[str] = []
        self.files: dict[str, str] = {}  # compiled filename -> tree relpath
        self.draft_config, self.model_config = draft_config, model_config
        self.server_args: _ServerArgs | None = None
        self.provided = {
            "sglang.srt.utils.hf_transformers_utils.get_config": self._get_config,
            "sglang.srt.utils.hf_transformers.get_config": self._get_config,
        }
        self.provided_modules = {k.rsplit(".", 1)[0] for k in self.provided}
        # Platform probes many tree modules call at import: answered for the machine that will serve.
        for name in PLATFORM_PROBES:
            self.provided[f"sglang.srt.utils.{name}"] = self._probe(name)
            self.provided[f"sglang.srt.utils.common.{name}"] = self._probe(name)

    # -- tree lookups
    def module_file(self, fullname: str) -> tuple[str, bool] | None:
        return self.tree.module_file(fullname)

    def caller(self) -> Where | None:
        frame = sys._getframe(2)
        while frame is not None:
            rel = self.files.get(frame.f_code.co_filename)
            if rel is not None:
                return Where(rel, frame.f_lineno)
            frame = frame.f_back
        return None

    def need(self, what: str, supply: str) -> None:
        if not any(n.what == what for n in self.result.needs):
            self.result.needs.append(Need(what, supply, self.caller()))

    def stand_in_called(self, name: str) -> None:
        self.need(f"`{name}()`, which ddcheck does not run", "")

    def _probe(self, name: str):
        def probe(*args, **kwargs):
            return PLATFORM_PROBES[name] == self.gpu
        probe.__name__ = name
        return probe

    def _get_config(self, path=None, *args, **kwargs):
        sa = self.server_args
        draft = sa is not None and path is not None and path == getattr(sa, "speculative_draft_model_path", None)
        if draft:
            return _Config(self, "the draft model's config", self.draft_config, "--draft-config PATH")
        return _Config(self, "the model's config", self.model_config, "--model-config PATH")

    # -- finder protocol
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] not in NAMESPACES:
            return None
        hit = self.module_file(fullname) if fullname.startswith("sglang") else None
        if hit is not None and not hit[1] and fullname not in self.provided_modules:
            parent = self.loading[-1] if self.loading else None
            depth = self.depth.get(parent, 0) + 1 if parent else 1
            self.depth.setdefault(fullname, depth)
            if self.depth[fullname] <= MAX_DEPTH:
                spec = importlib.util.spec_from_loader(fullname, self, is_package=False)
                spec.loader_state = "real"
                return spec
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        if spec.loader_state == "real":
            return None  # default module object; exec_module fills it from the tree
        return _Module(spec.name, self)

    def exec_module(self, module):
        name = module.__name__
        if isinstance(module, _Module):
            return
        relpath = self.module_file(name)[0]
        filename = f"{self.tree.label}!{relpath}"
        self.files[filename] = relpath
        code = compile(self.paths[relpath].read_bytes(), filename, "exec", dont_inherit=True)
        module.__file__ = filename
        self.loading.append(name)
        try:
            exec(code, module.__dict__)
        except Exception as exc:  # a module that does not import here becomes a stand-in
            self.need(f"module {name} (its import needs: {type(exc).__name__}: {exc})", "")
            sys.modules[name] = _Module(name, self)
        finally:
            self.loading.pop()



class _Capture(logging.Handler):
    def __init__(self, run: _Runner):
        super().__init__(logging.DEBUG)
        self.run = run

    def emit(self, record: logging.LogRecord) -> None:
        rel = self.run.files.get(record.pathname)
        if rel is None or record.levelno < logging.INFO:
            return
        try:
            message = record.getMessage()
        except Exception:  # a tree message whose %-args are stand-ins
            message = str(record.msg)
        self.run.result.logged.append(Logged(record.levelname.lower(), message, Where(rel, record.lineno)))


def find_handler(tree: SourceTree) -> tuple[str, str, str] | None:
    """(relpath, kind, name): the tree's speculative handler, a module function or a ServerArgs method."""
    candidates = [f for f in tree.files if f.relpath.endswith(".py") and "/srt/" in f.relpath
                  and ("/arg_groups/" in f.relpath or f.relpath.endswith("srt/server_args.py"))]
    for f in candidates:
        data = f.read_bytes()
        if not any(n.encode() in data for n in HANDLER_NAMES + METHOD_NAMES):
            continue
        mod = ast.parse(data)
        for node in mod.body:
            if isinstance(node, ast.FunctionDef) and node.name in HANDLER_NAMES:
                return f.relpath, "function", node.name
            if isinstance(node, ast.ClassDef) and node.name == "ServerArgs":
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name in METHOD_NAMES:
                        return f.relpath, "method", item.name
    return None


def server_args_methods(tree: SourceTree) -> set[str]:
    cls = tree_class(tree, SERVER_ARGS_FILE, "ServerArgs")
    return {n.name for n in cls.body if isinstance(n, ast.FunctionDef)} if cls else set()


def server_args_values(tree: SourceTree, ns: dict[str, Any], field_defaults: dict[str, Any]) -> dict[str, Any]:
    """What ``ServerArgs.from_cli_args`` builds: the fields' defaults, the parsed flags, and the
    renames it applies (``args.pp_size = args.pipeline_parallel_size``), read from the tree."""
    values = {**field_defaults, **ns}
    f = tree.find(SERVER_ARGS_FILE)
    mod = ast.parse(f.read_bytes()) if f is not None else ast.Module(body=[], type_ignores=[])
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


def run_handler(tree: SourceTree, values: dict[str, Any], draft_config: dict | None = None,
                model_config: dict | None = None, gpu: str = "nvidia") -> TreeRun:
    """Run the tree's speculative handler on ``values`` (the parsed flags, defaults included), on a
    machine of kind ``gpu`` (what the tree's platform probes answer)."""
    runner = _Runner(tree, draft_config, model_config, gpu)
    found = find_handler(tree)
    if found is None:
        runner.result.failed = "no speculative handler (handle_speculative_decoding) in this tree"
        return runner.result
    relpath, kind, name = found
    values = dict(values)
    if "device" in values and values["device"] is None and gpu in DEVICE_OF:
        values["device"] = DEVICE_OF[gpu]
    for key, default in FILLED_BEFORE.items():
        if key in values and values[key] is None:
            values[key] = default
    sa = runner.server_args = _ServerArgs(runner, values, server_args_methods(tree))
    handler_lock = logging.getLogger()
    capture = _Capture(runner)
    old_level = handler_lock.level
    handler_lock.addHandler(capture)
    handler_lock.setLevel(logging.INFO)
    silenced = [(h, h.level) for h in handler_lock.handlers if h is not capture]
    for h, _ in silenced:
        h.setLevel(logging.CRITICAL + 1)
    try:
        with runner:
            fn = _load_handler(runner, relpath, kind, name)
            runner.result.handler = Where(relpath, fn.__code__.co_firstlineno)
            try:
                fn(sa)
            except (StandInUsed, NeedsInput, ImportError) as exc:
                runner.result.failed = f"{type(exc).__name__}: {exc} (at {runner_where(runner, exc)})"
            except RecursionError as exc:
                runner.result.failed = f"the handler recursed too deep: {exc}"
            except Exception as exc:
                where = runner_where(runner, exc)
                if where is not None and _raises_there(runner, where):  # the tree's own rejection
                    runner.result.rejected = f"{type(exc).__name__}: {exc}"
                    runner.result.rejected_at = where
                else:  # an operation on something ddcheck stood in for: not the tree's verdict
                    runner.result.failed = f"{type(exc).__name__}: {exc} (at {where})"
    except SyntaxError as exc:
        runner.result.failed = f"the tree's handler does not compile: {exc}"
    except Exception as exc:  # loading the handler's module failed: the tables take over
        runner.result.failed = f"loading the handler failed: {type(exc).__name__}: {exc}"
    finally:
        handler_lock.removeHandler(capture)
        handler_lock.setLevel(old_level)
        for h, level in silenced:
            h.setLevel(level)
    runner.result.values = dict(object.__getattribute__(sa, "_values"))
    return runner.result


def runner_where(runner: _Runner, exc: BaseException) -> Where | None:
    """The innermost traceback frame in a tree file: the line that raised."""
    tb, hit = exc.__traceback__, None
    while tb is not None:
        rel = runner.files.get(tb.tb_frame.f_code.co_filename)
        if rel is not None:
            hit = Where(rel, tb.tb_lineno)
        tb = tb.tb_next
    return hit


def _raises_there(runner: _Runner, where: Where) -> bool:
    """The line is a ``raise`` or ``assert`` statement of the tree: a deliberate rejection."""
    try:
        mod = ast.parse(runner.paths[where.path].read_bytes())
    except (KeyError, SyntaxError, ValueError, OSError):
        return False
    return any(isinstance(n, (ast.Raise, ast.Assert)) and n.lineno <= where.line <= (n.end_lineno or n.lineno)
               for n in ast.walk(mod))


def _load_handler(runner: _Runner, relpath: str, kind: str, name: str):
    module_name = relpath[len(runner.prefix):-3].replace("/", ".")
    if kind == "function":
        runner.depth[module_name] = 0
        module = importlib.import_module(module_name)
        if isinstance(module, _Module):
            raise RuntimeError(f"{relpath} did not import")
        return getattr(module, name)
    # A ServerArgs method: its module is too heavy to run, so the method is compiled alone, in a
    # namespace holding the module's imports (stand-ins or tree modules) and its logger.
    data = runner.paths[relpath].read_bytes()
    mod = ast.parse(data)
    cls = next(n for n in mod.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    method = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)
    prelude = [n for n in mod.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    filename = f"{runner.tree.label}!{relpath}"
    runner.files[filename] = relpath
    ns: dict[str, Any] = {"__name__": module_name, "logger": logging.getLogger(module_name)}
    for stmt in prelude:
        try:
            exec(compile(ast.Module(body=[stmt], type_ignores=[]), filename, "exec"), ns)
        except Exception:
            continue
    exec(compile(ast.Module(body=[method], type_ignores=[]), filename, "exec"), ns)
    return ns[name]
