"""The target tree's own code, run from its files, with stand-ins only for what cannot run here.

``with TreeRuntime(tree, platform):`` installs two meta-path finders for the block:

* first, the tree's: every module of the tree's package (``sglang.*``, packages' ``__init__`` and
  relative imports included) is executed from the tree's own file (written to a private directory,
  so ``inspect`` and Triton read ordinary files). A module whose own code raises while it is
  imported is kept as far as it ran; the rest of its names are stand-ins, and the failure is
  recorded with the tree line that raised. A module the tree does not have (a partial tree, a
  fixture) is a stand-in module, recorded too.
* last, after every regular finder: a module that no finder can import here, imported by the
  tree's code (a compiled extension, a third-party package that is not installed), is a stand-in
  module, found from the import that failed -- never from a list of names.

The platform probes of torch (``torch.cuda.is_available``, ``get_device_capability``...) answer
for the emulated machine (:class:`Platform`, an sm90 NVIDIA GPU by default) when this machine has
no such device; tensors still live on ``platform.device``. torch's compiler decorators wrap a tree
function when it is first called, not at import (:meth:`TreeRuntime._defer_compile`).
"""

from __future__ import annotations

import builtins
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import shutil
import sys
import tempfile
import traceback
import types
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddcheck.tree.isolation import SwappedImports
from ddcheck.tree.lacking import LACKING_FILE, TREE_IMPORT, guarded_lines, tree_import
from ddcheck.tree.parse import SourceError, parse_kept
from ddcheck.tree.sources import SourceTree
from ddcheck.tree.standins import StandInModule, Usage, is_stand_in, stand_in

# Products by architecture: the name the probes give for an emulated GPU.
GPU_NAMES = {"sm80": "NVIDIA A100-SXM4-80GB", "sm86": "NVIDIA RTX A6000", "sm89": "NVIDIA L40S",
             "sm90": "NVIDIA H100 80GB HBM3", "sm100": "NVIDIA B200", "sm120": "NVIDIA GeForce RTX 5090"}


TREE_DIR_PREFIX = "ddcheck-tree-"  # the private folder the tree's files run from


def runs_from_tree(filename: str) -> bool:
    """Whether a code object's file is one of a tree's files, as a TreeRuntime runs them."""
    return os.sep + TREE_DIR_PREFIX in filename


@dataclass(frozen=True)
class Platform:
    """The machine the tree's probes answer for, and where its tensors really live."""

    vendor: str = "nvidia"  # nvidia, amd, cpu
    arch: str = "sm90"
    device: str = "cpu"  # torch device the run allocates on
    # Whether the probes answer for the emulated GPU at all. A run whose kernels execute on this machine
    # (Triton's, through its interpreter) takes the paths of this machine, where its tensors live.
    emulate: bool = True

    @property
    def capability(self) -> tuple[int, int]:
        digits = self.arch.removeprefix("sm")
        return (int(digits[:-1] or 0), int(digits[-1])) if digits.isdigit() else (9, 0)


@dataclass
class RuntimeReport:
    """What ran, what stood in, and what of it the tree used."""

    modules_run: list[str] = field(default_factory=list)
    partial: dict[str, str] = field(default_factory=dict)  # module -> "Error: msg (at relpath:line)"
    to_run: dict[str, str] = field(default_factory=dict)  # module in ``partial`` -> what would make it run
    absent: list[str] = field(default_factory=list)  # tree modules the tree does not have
    usage: Usage = field(default_factory=Usage)
    files: list[str] = field(default_factory=list)  # tree relpaths run
    probes: list[str] = field(default_factory=list)  # torch probes answered for the emulated platform
    cuda_on_cpu: int = 0  # tensors the tree asked for on "cuda", made on this CPU
    needs_stopped: dict[str, str] = field(default_factory=dict)  # module -> a stopped module it took names from
    stood_in: list[str] = field(default_factory=list)  # tree functions replaced by stand-ins, and why
    lacked: list[str] = field(default_factory=list)  # names an installed package lacks, stood in (tree.lacking)

    @property
    def stand_in_modules(self) -> list[str]:
        return sorted(set(self.usage.modules))

    def limitations(self) -> list[str]:
        """The report's lines: what of this run was not the tree's own code running for real."""
        out = [f"stand-in {line}" for line in self.usage.summary()]
        out += [f"{module} stopped while imported: {why}" for module, why in self.partial.items()]
        out += [f"stand-in for {line}" for line in self.stood_in]
        out += [f"stand-in for {line}" for line in self.lacked]
        return out


# source text -> its code, the last modules run, least recently used first: a process that runs the same
# tree's modules again (a smoke run's several C's, the suite's smoke server) compiles each source once.
# In memory only: nothing compiled is ever read back from disk.
_COMPILED: dict[str, types.CodeType] = {}
_COMPILED_KEPT = 4096


def _compiled(text: str, filename: str) -> types.CodeType:
    """``compile(text, filename, "exec")``, the code of an earlier compile of the same text renamed."""
    code = _COMPILED.pop(text, None)
    if code is None:
        code = compile(text, filename, "exec", dont_inherit=True)
    _COMPILED[text] = code
    while len(_COMPILED) > _COMPILED_KEPT:
        del _COMPILED[next(iter(_COMPILED))]
    return _renamed(code, filename) if code.co_filename != filename else code


def _renamed(code: types.CodeType, filename: str) -> types.CodeType:
    """``code`` and the code objects nested in it, with ``filename`` as their file (tracebacks and the
    report's "at path:line" read it)."""
    consts = tuple(_renamed(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


class _TreeLoader(importlib.abc.Loader):
    """Runs one tree module's source; a failure leaves the module as far as it ran."""

    def __init__(self, runtime: "TreeRuntime", relpath: str, disk: Path):
        self.runtime, self.relpath, self.disk = runtime, relpath, disk

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        rt = self.runtime
        rt.report.modules_run.append(module.__name__)
        rt.report.files.append(self.relpath)
        code = _compiled(self.disk.read_text(encoding="utf-8"), str(self.disk))
        usage, phase = rt.report.usage, rt.report.usage.phase
        usage.phase = "import"
        module.__dict__["__builtins__"] = rt.builtins  # its imports go through tree.lacking
        try:
            exec(code, module.__dict__)
        except Exception as exc:  # noqa: BLE001 - the module stays as far as it ran, the failure is reported
            rt.report.partial[module.__name__] = f"{type(exc).__name__}: {exc} (at {rt.where_in_tree(exc)})"
            rt.report.to_run[module.__name__] = rt.what_would_run(exc)
            if "__getattr__" not in module.__dict__:
                module.__getattr__ = rt.fallback(module.__name__)
        finally:
            usage.phase = phase


class TreeRuntime(SwappedImports, importlib.abc.MetaPathFinder):
    """Serves the tree's package from its files; see the module docstring."""

    def __init__(self, tree: SourceTree, platform: Platform = Platform(), *, package: str = "sglang",
                 overrides: dict[str, str] | None = None):
        self.tree, self.platform, self.package = tree, platform, package
        self.namespaces = (package,)
        self.overrides = dict(overrides or {})  # module -> source run instead of the tree's file
        self.report = RuntimeReport()
        self._tmp: Path | None = None
        self._last = _StandInFinder(self)
        self._saved: list[tuple[Any, str, Any]] = []
        self._emulated: list[tuple[Any, str, Any]] = []
        self._replaced: list[tuple[Any, str, Any]] = []  # tree functions stood in for (stand_in_for)
        self._dynamo = None  # the stand-in for torch._dynamo set on torch (_defer_compile)
        self._guarded: dict[str, set[int]] = {}  # a tree file run -> lines of its guarded imports
        self.builtins = {**builtins.__dict__, "__import__": tree_import(
            self.in_tree, self.guarded_import, package, self.report.usage, self.report.lacked,
            lambda frame: f"{self.relpath_of(frame.f_code.co_filename)}:{frame.f_lineno}")}

    # -- the block
    def __enter__(self):
        self._tmp = Path(tempfile.mkdtemp(prefix=TREE_DIR_PREFIX))
        self._environ = dict(os.environ)  # the tree's start-up writes the environment: put back on exit
        self.report.usage.where = self.caller_in_tree
        super().__enter__()
        self._before = set(sys.modules)
        sys.meta_path.append(self._last)
        self._emulate()
        self._defer_compile()
        return self

    def __exit__(self, *exc) -> None:
        from ddcheck.tree.frames import put_back

        put_back(self._replaced)
        self._replaced.clear()
        for owner, name, value in reversed(self._saved):
            setattr(owner, name, value)
        self._saved.clear()
        self._emulated.clear()
        torch = sys.modules.get("torch")
        if self._dynamo is not None and torch is not None and vars(torch).get("_dynamo") is self._dynamo:
            del torch._dynamo  # torch imports it when asked, as before the block
        self._dynamo = None
        if os.environ != self._environ:
            os.environ.clear()
            os.environ.update(self._environ)
        if self._last in sys.meta_path:
            sys.meta_path.remove(self._last)
        for name in set(sys.modules) - self._before:  # stand-in modules and what they brought in
            module = sys.modules.get(name)
            if isinstance(module, StandInModule):
                del sys.modules[name]
                parent, _, child = name.rpartition(".")
                owner = sys.modules.get(parent)
                if owner is not None and vars(owner).get(child) is module:  # set on a real package too
                    delattr(owner, child)
        super().__exit__(*exc)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    @contextmanager
    def start_up(self):
        """The block runs the tree's start-up code: stand-ins it calls are recorded as the start-up's."""
        usage = self.report.usage
        phase, usage.phase = usage.phase, "start-up"
        try:
            yield
        finally:
            usage.phase = phase

    @property
    def scratch(self) -> str:
        """A private folder for this block's files (removed on exit)."""
        return str(self._tmp)

    def import_module(self, name: str) -> types.ModuleType:
        return importlib.import_module(name)

    # -- where things happen
    def in_tree(self, filename: str) -> bool:
        return self._tmp is not None and filename.startswith(str(self._tmp))

    def relpath_of(self, filename: str) -> str:
        return filename[len(str(self._tmp)) + 1:] if self.in_tree(filename) else os.path.basename(filename)

    def caller_in_tree(self) -> str:
        """The innermost tree line on the current stack, as relpath:line."""
        frame = sys._getframe(1)
        while frame is not None:
            if self.in_tree(frame.f_code.co_filename):
                return f"{self.relpath_of(frame.f_code.co_filename)}:{frame.f_lineno}"
            frame = frame.f_back
        return "?"

    def where_in_tree(self, exc: BaseException) -> str:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if self.in_tree(f.filename)]
        return f"{self.relpath_of(frames[-1].filename)}:{frames[-1].lineno}" if frames else "?"

    def importer(self) -> tuple[types.FrameType | None, bool]:
        """The frame of the tree's code whose import is being resolved (else None), and whether the
        module is looked for as a name of a ``from package import name`` (``_handle_fromlist``)."""
        frame, fromlist = sys._getframe(2), False
        while frame is not None:
            name = frame.f_code.co_filename
            if not (name.startswith("<frozen") or "importlib" in name or frame.f_code is _UNPROFILED_IMPORT
                    or frame.f_code.co_name == TREE_IMPORT and name == LACKING_FILE):
                return (frame if self.in_tree(name) else None), fromlist
            fromlist = fromlist or frame.f_code.co_name == "_handle_fromlist"
            frame = frame.f_back
        return None, fromlist

    def guarded_import(self, filename: str, line: int) -> bool:
        """Whether the import at ``line`` of a tree file run is one the tree guards against ImportError."""
        if filename not in self._guarded:
            try:
                self._guarded[filename] = guarded_lines(parse_kept(Path(filename).read_text(encoding="utf-8")))
            except (OSError, SourceError):
                self._guarded[filename] = set()
        return line in self._guarded[filename]

    def what_would_run(self, exc: BaseException) -> str:
        """What would make a tree line that raised ``exc`` run: where it reached a package outside the tree
        that lacks what it asks for (an attribute, a module), that package as the tree was written for it,
        naming the version here; else an environment where that line runs."""
        owner = getattr(exc, "obj", None) if isinstance(exc, AttributeError) else None
        if isinstance(owner, types.ModuleType) and exc.name:
            top, lacks = owner.__name__.split(".")[0], f" has no {owner.__name__}.{exc.name}"
        elif isinstance(exc, ImportError) and exc.name:
            top, lacks = exc.name.split(".")[0], f": {exc}"
        else:
            top, lacks = None, ""
        if top and top != self.package:
            try:
                from importlib.metadata import version

                here = f"{top} {version(top)} here"
            except Exception:  # noqa: BLE001 - a package with no distribution of its name
                here = f"the {top} installed here"
            return f"the {top} this tree was written for ({here}{lacks})"
        return f"an environment where {self.where_in_tree(exc)} runs"

    def fallback(self, module: str):
        """``__getattr__`` of a module that stopped while imported: sub-modules of the tree are
        imported, anything else is a stand-in."""

        def __getattr__(attr: str):
            if attr.startswith("__"):
                raise AttributeError(attr)
            sub = f"{module}.{attr}"
            if self.tree.module_file(sub) is not None:
                return importlib.import_module(sub)
            value = stand_in(sub, self.report.usage)
            setattr(sys.modules[module], attr, value)
            importer = self.importing_module()
            if importer is not None and importer != module:  # ``from module import attr`` in the tree
                self.report.needs_stopped.setdefault(importer, module)
            return value

        return __getattr__

    def importing_module(self) -> str | None:
        """The tree module whose code is running (the one importing, at import time)."""
        frame = sys._getframe(2)
        while frame is not None:
            if self.in_tree(frame.f_code.co_filename):
                return frame.f_globals.get("__name__")
            frame = frame.f_back
        return None

    def stand_in_for(self, exc: BaseException, protect: set[str] = frozenset()) -> str | None:
        """After ``exc``, stand in for the tree function that could not run here: the outermost tree
        function on its traceback whose module stopped while imported, or took a name from one that
        did (a JIT kernel's loader whose compiler and sources are not here), never one of ``protect``
        (the backend's own module: its verify path is what is judged). It is replaced wherever
        the tree holds it (until the block ends) and recorded; returns a line saying so, or None."""
        from ddcheck.tree.frames import function_of, replace_everywhere

        tb = exc.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            name = frame.f_globals.get("__name__", "")
            stopped = name if name in self.report.partial else self.report.needs_stopped.get(name)
            if self.in_tree(frame.f_code.co_filename) and stopped is not None and name not in protect:
                hit = function_of(frame)
                if hit is not None and not is_stand_in(hit[2]):
                    owner, attr, member = hit
                    label = f"{name}.{attr}" if not isinstance(owner, type) else f"{name}.{owner.__name__}.{attr}"
                    self._replaced += replace_everywhere(self.package, owner, member,
                                                         stand_in(label, self.report.usage))
                    line = (f"{label} (at {self.relpath_of(frame.f_code.co_filename)}:{frame.f_code.co_firstlineno}) "
                            f"cannot run here: it needs {stopped}, which stopped while imported "
                            f"({self.report.partial.get(stopped, '?')}); a stand-in takes its place")
                    self.report.stood_in.append(line)
                    return line
            tb = tb.tb_next
        return None

    # -- the finder
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] != self.package:
            return None
        hit = self.tree.module_file(fullname)
        if hit is None:
            folder = self.tree.namespace_dir(fullname)
            if folder is not None:  # a namespace package (no __init__.py), as Python imports it
                disk = self._tmp / folder
                disk.mkdir(parents=True, exist_ok=True)
                spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
                spec.submodule_search_locations = [str(disk)]
                return spec
            self.report.absent.append(fullname)
            return importlib.machinery.ModuleSpec(fullname, _StandInLoader(self), is_package=True)
        relpath, is_package = hit
        source = self.overrides.get(fullname)
        if source is None:
            source = self.tree.file_at(relpath).read_bytes().decode("utf-8")
        disk = self._tmp / relpath
        disk.parent.mkdir(parents=True, exist_ok=True)
        disk.write_text(source, encoding="utf-8")
        spec = importlib.util.spec_from_file_location(
            fullname, disk, loader=_TreeLoader(self, relpath, disk),
            submodule_search_locations=[str(disk.parent)] if is_package else None)
        return spec

    # -- the platform
    def _emulate(self) -> None:
        """torch's probes answer for the emulated GPU when this machine has none."""
        p = self.platform
        if p.vendor == "cpu" or "torch" not in sys.modules and importlib.util.find_spec("torch") is None:
            return
        import torch

        if torch.cuda.is_available() or not p.emulate:
            return
        major, minor = p.capability
        props = types.SimpleNamespace(name=GPU_NAMES.get(p.arch, f"emulated {p.arch}"), major=major, minor=minor,
                                      total_memory=80 * 2**30, multi_processor_count=132,
                                      gcnArchName="gfx942" if p.vendor == "amd" else "")
        probes = {
            (torch.cuda, "is_available"): lambda: True,
            (torch.cuda, "device_count"): lambda: 1,
            (torch.cuda, "current_device"): lambda: 0,
            (torch.cuda, "get_device_capability"): lambda device=None: (major, minor),
            (torch.cuda, "get_device_name"): lambda device=None: props.name,
            (torch.cuda, "get_device_properties"): lambda device=None: props,
            (torch.cuda, "mem_get_info"): lambda device=None: (props.total_memory, props.total_memory),
            (torch.version, "cuda"): "12.8" if p.vendor == "nvidia" else None,
            (torch.version, "hip"): "6.3" if p.vendor == "amd" else None,
        }
        if p.device.startswith("cpu"):  # the emulated GPU's memory is this machine's
            for name in CUDA_FACTORIES:
                if hasattr(torch, name):
                    probes[(torch, name)] = _on_cpu(getattr(torch, name), self.report)
            probes[(torch.Tensor, "to")] = _on_cpu(torch.Tensor.to, self.report, positional=True)
            probes[(torch.Tensor, "cuda")] = lambda t, *a, **k: t
            # a tensor the tree made on "cuda" is one: its own checks (``if not x.is_cuda: raise``) pass
            probes[(torch.Tensor, "is_cuda")] = property(lambda t: t.device.type in ("cpu", "cuda"))
        for (owner, name), value in probes.items():
            self._saved.append((owner, name, getattr(owner, name, None)))
            self._emulated.append((owner, name, value))
            setattr(owner, name, value)
            self.report.probes.append(f"{getattr(owner, '__name__', owner)}.{name}")

    def _defer_compile(self) -> None:
        """torch's compiler decorators (``torch.compile``, ``torch.compiler.disable``,
        ``torch._dynamo.disable``...) wrap a function when it is first called, not when the tree's module
        decorates it: at import time they import torch's dynamo and inductor (seconds) for functions a
        start-up run never calls. A function that is called is wrapped then, by torch's own decorator, as
        it would have been; anything else of ``torch._dynamo`` imports it, as torch does."""
        torch = sys.modules.get("torch")
        if torch is None:
            return
        compiler = getattr(torch, "compiler", None)
        for owner, name in ((torch, "compile"), (compiler, "disable"), (compiler, "assume_constant_result")):
            real = getattr(owner, name, None)
            if callable(real) and not hasattr(real, "__ddcheck_deferred__"):
                self._saved.append((owner, name, real))
                self._emulated.append((owner, name, _deferred(real)))
                setattr(owner, name, self._emulated[-1][2])
        if "torch._dynamo" not in sys.modules and "_dynamo" not in vars(torch):
            self._dynamo = torch._dynamo = _LazyDynamo(torch)

    @contextmanager
    def this_machine(self):
        """The probes answer for this machine while the block runs (start-up state that allocates: a
        process group on the device that exists here); the tree's cached probe answers are dropped on
        the way in and out, so each side asks afresh."""
        for owner, name, value in self._saved:
            setattr(owner, name, value)
        self._clear_cached_probes()
        try:
            yield
        finally:
            for owner, name, value in self._emulated:
                setattr(owner, name, value)
            self._clear_cached_probes()

    def _clear_cached_probes(self) -> None:
        prefix = self.package + "."
        for name, module in list(sys.modules.items()):
            if name.startswith(prefix) and isinstance(module, types.ModuleType) \
                    and not isinstance(module, StandInModule):
                for value in list(vars(module).values()):
                    if callable(getattr(value, "cache_clear", None)) and hasattr(value, "__wrapped__") \
                            and getattr(value, "__module__", None) == name:
                        value.cache_clear()


# torch factories that take ``device=``: on a CPU run that emulates a GPU, "cuda" means this machine.
CUDA_FACTORIES = ("empty", "zeros", "ones", "full", "tensor", "arange", "empty_strided", "as_tensor", "rand",
                  "randn", "randint", "randperm", "eye", "linspace", "zeros_like", "ones_like", "empty_like",
                  "full_like")


def _is_cuda_device(value: Any) -> bool:
    return (isinstance(value, str) and value.startswith("cuda")) or getattr(value, "type", None) == "cuda"


def _on_cpu(factory, report: RuntimeReport, positional: bool = False):
    """``factory`` with a CUDA device (keyword, or ``Tensor.to``'s first argument) made the CPU."""

    @functools.wraps(factory)
    def call(*args, **kwargs):
        if _is_cuda_device(kwargs.get("device")):
            kwargs["device"] = "cpu"
            report.cuda_on_cpu += 1
        if positional and len(args) > 1 and _is_cuda_device(args[1]):
            args = (args[0], "cpu", *args[2:])
            report.cuda_on_cpu += 1
        return factory(*args, **kwargs)

    return call


class UnprofiledImports:
    """For the block, a module imported while a profile hook is set (one watching the start-up code's
    calls) runs its import-time code with no hook, which is back once the import is done: calling a hook
    on every call and return of the tree's and torch's module code made a start-up run about twice as
    slow. Python's import statement asks the import system for ``_find_and_load`` at each import."""

    def __enter__(self):
        self.bootstrap = sys.modules.get("_frozen_importlib")
        self.real = getattr(self.bootstrap, "_find_and_load", None)
        if self.real is not None:
            self.bootstrap._find_and_load = functools.partial(_find_and_load_unprofiled, self.real)
        return self

    def __exit__(self, *exc) -> None:
        if self.real is not None:
            self.bootstrap._find_and_load = self.real


def _find_and_load_unprofiled(real, name, import_):
    hook = sys.getprofile()
    if hook is None:
        return real(name, import_)
    sys.setprofile(None)
    try:
        return real(name, import_)
    finally:
        sys.setprofile(hook)


_UNPROFILED_IMPORT = _find_and_load_unprofiled.__code__  # a frame of the import system (imported_by_tree)


def _deferred(real):
    """``real`` (a torch decorator whose first argument is the function) applied to a plain function
    on that function's first call; anything else (a module, a method, the decorator's own arguments
    alone) handed to ``real`` at once."""

    def deferred(*args, **kwargs):
        if not args or args[0] is None:  # the decorator form: ``@torch.compile(dynamic=True)``
            if any(isinstance(v, types.FunctionType) for v in kwargs.values()):  # ``compile(model=fn)``
                return real(*args, **kwargs)
            return lambda fn: deferred(fn, *args[1:], **kwargs)
        fn = args[0]
        if not isinstance(fn, types.FunctionType):
            return real(*args, **kwargs)
        done = []

        @functools.wraps(fn)
        def call(*a, **k):
            if not done:
                done.append(real(*args, **kwargs))
            return done[0](*a, **k)

        return call

    deferred.__ddcheck_deferred__ = real
    return deferred


class _LazyDynamo(types.ModuleType):
    """``torch._dynamo`` before it is imported: its ``disable`` decorator deferred (:func:`_deferred`);
    any other name imports the real module, which takes this one's place on ``torch``."""

    def __init__(self, torch) -> None:
        super().__init__("torch._dynamo")
        self._torch = torch
        self.disable = _deferred(lambda *a, **k: self._real().disable(*a, **k))

    def _real(self):
        real = importlib.import_module("torch._dynamo")
        if vars(self._torch).get("_dynamo") is self:
            self._torch._dynamo = real
        return real

    def __getattr__(self, name: str):
        return getattr(self._real(), name)


class _StandInLoader(importlib.abc.Loader):
    def __init__(self, runtime: TreeRuntime):
        self.runtime = runtime

    def create_module(self, spec):
        self.runtime.report.usage.modules.append(spec.name)
        return StandInModule(spec.name, self.runtime.report.usage)

    def exec_module(self, module) -> None:
        pass


class _StandInFinder(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: what nothing else can import, when the tree's code imports it."""

    def __init__(self, runtime: TreeRuntime):
        self.runtime = runtime

    def find_spec(self, fullname, path=None, target=None):
        parent = sys.modules.get(fullname.rpartition(".")[0]) if "." in fullname else None
        if isinstance(parent, StandInModule):
            return self._spec(fullname)
        frame, fromlist = self.runtime.importer()
        if frame is None:
            return None
        if parent is not None and (fromlist or self.runtime.guarded_import(frame.f_code.co_filename, frame.f_lineno)):
            # a name an installed package lacks is the import's to stand in for, on that statement alone
            # (tree.lacking), never a module set on the package; a sub-module it lacks, asked by a probe of
            # what it has, is not found, as Python says
            return None
        return self._spec(fullname)

    def _spec(self, fullname: str):
        return importlib.machinery.ModuleSpec(fullname, _StandInLoader(self.runtime), is_package=True)


def active() -> TreeRuntime | None:
    """The tree runtime whose ``with`` block is running (the one on ``sys.meta_path``), if any."""
    return next((f for f in sys.meta_path if isinstance(f, TreeRuntime)), None)


__all__ = ["TreeRuntime", "Platform", "RuntimeReport", "is_stand_in"]
