"""The fallback loader: ddcheck's own fakes of the sglang runtime, for a tree whose own code does
not run here (``ddcheck.smoke.loader`` runs the tree's own code; when that ends in a harness failure,
``run_smoke`` runs this one and says so in the report). Kept as it was proven on 0.5.10-0.5.23.

Importing ``sglang`` pulls in ~30 packages, a CUDA torch and ``sgl_kernel``. The verify path needs
only a handful of files, so :class:`SglangImporter` serves the ``sglang`` (and ``sgl_kernel``)
namespace itself, deciding per module:

* **real** -- the backend, the base backend, the kernel modules (``triton_ops/*`` up to 0.5.14,
  ``kernels/ops/attention/*`` and ``kernels/ops/kvcache/*`` from 0.5.16) and a few stdlib-only
  helpers are executed from the tree's own source;
* **provided** -- a short, named list of helpers the backend calls while it is built or verifies
  (``is_cuda``, ``get_spec``, ``KVWriteLoc``...). Each is implemented here in a few lines, or
  executed from the tree's own source (``ForwardMode``, ``TreeMaskMode``); calls are counted;
* **stand-in** -- everything else. A stand-in can be imported, compared, used in ``isinstance`` and
  annotations, but *calling* it raises :class:`StandInCalled` naming itself. A new runtime
  dependency in a future release therefore surfaces as a harness error, never as a silent fake.
"""

from __future__ import annotations

import abc
import ast
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import tempfile
import types
from dataclasses import dataclass, field
from enum import Enum, IntEnum, auto
from pathlib import Path
from typing import Any, Callable

from ddcheck.isolation import SwappedImports
from ddcheck.sources import SourceTree
from ddcheck.target.modules import TreeModules
from ddcheck.target.names import FORWARD_BATCH_FILE, FORWARD_BATCH_MODULE, FORWARD_MODE, PACKAGE, SERVER_ARGS_MODULE

BACKEND_MODULE = "sglang.srt.layers.attention.triton_backend"  # the default backend
BACKEND_RELPATH = "sglang/srt/layers/attention/triton_backend.py"
NAMESPACES = (PACKAGE, "sgl_kernel", "flashinfer")

# Modules executed from the tree. Kernel modules are matched by package so a release that adds a
# helper module next to the kernels still loads it for real.
REAL_MODULES = (
    BACKEND_MODULE,
    "sglang.srt.layers.attention.base_attn_backend",
    "sglang.srt.layers.attention.triton_ops.*",
    "sglang.srt.layers.attention.utils",  # create_flashinfer_kv_indices_triton up to 0.5.12
    "sglang.srt.layers.attention.verify_mask",  # cuda-graph tree-mask buffer, 0.5.17+
    "sglang.srt.layers.attention.kv_shard_hooks",  # get_kv_shard_pool (fa3, 0.5.23)
    "sglang.srt.speculative.ragged_verify",  # the ragged verify layout, 0.5.16+ (stdlib, msgspec, torch)
    "sglang.kernels.ops.attention.*",
    "sglang.kernels.ops.kvcache.*",
    "sglang.kernel_api_logging",  # @debug_kernel_api on the base backend (stdlib + torch)
    "sglang.kernels.kernel_api_logging",
    "sglang.srt.environ",  # envs: stdlib-only by design, gives the release's own defaults
)


def _is_real_name(module: str) -> bool:
    """``module`` matches a REAL_MODULES pattern, ``*`` standing for one dotted component."""
    return any(re.fullmatch(re.escape(p).replace(r"\*", r"[^.]+"), module) for p in REAL_MODULES)


from ddcheck.smoke.loader import HarnessError  # noqa: E402 - one error class for both loaders


class StandInCalled(HarnessError):
    """A stand-in for an sglang module member was called: the verify path needs something new."""


@dataclass
class Trace:
    """What the run touched: provided helpers called, stand-ins called, fake attributes read."""

    provided_calls: dict[str, int] = field(default_factory=dict)
    stand_ins_called: list[str] = field(default_factory=list)
    reads: dict[str, set[str]] = field(default_factory=dict)
    missing: dict[str, set[str]] = field(default_factory=dict)
    real_modules: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # tree relpaths read: what a GPU run must carry

    def call(self, name: str) -> None:
        self.provided_calls[name] = self.provided_calls.get(name, 0) + 1


# --------------------------------------------------------------------------- stand-ins


class _StandInMeta(abc.ABCMeta):
    """Metaclass of stand-ins: a class so ``isinstance``/``issubclass``/annotations work, but
    calling it (instantiating, or calling it as a function/decorator) fails loudly. A real class of
    the tree may mix one in (``class EagleVerifyInput(SpecInput, EagleVerifyInputV2Mixin)``): it is
    built as usual (an ``ABCMeta`` too, so it goes with abstract bases), and only what it takes
    from the stand-in fails when used."""

    def __call__(cls, *args, **kwargs):
        if "_ddcheck_name" not in cls.__dict__:  # a real class deriving from a stand-in
            return super().__call__(*args, **kwargs)
        name = cls.__dict__.get("_ddcheck_name", cls.__name__)
        trace: Trace | None = cls.__dict__.get("_ddcheck_trace")
        if trace is not None:
            trace.stand_ins_called.append(name)
        raise StandInCalled(
            f"stand-in `{name}` was called: the verify path of this release needs it, and ddcheck "
            f"smoke does not load it (add it to ddcheck.smoke.loader)"
        )

    def __getattr__(cls, attr: str):
        if attr.startswith("__") or "_ddcheck_name" not in type.__getattribute__(cls, "__dict__"):
            raise AttributeError(attr)
        base = type.__getattribute__(cls, "_ddcheck_name")
        child = _stand_in(f"{base}.{attr}", type.__getattribute__(cls, "_ddcheck_trace"))
        type.__setattr__(cls, attr, child)
        return child

    def __getitem__(cls, item):  # Generic[...]-style annotations evaluated at import
        return cls

    def __repr__(cls):
        return f"<ddcheck stand-in {cls.__dict__.get('_ddcheck_name')}>"


FLASHINFER_WRAPPERS = ("BatchPrefillWithPagedKVCacheWrapper", "BatchPrefillWithRaggedKVCacheWrapper",
                       "BatchDecodeWithPagedKVCacheWrapper", "BatchMLAPagedAttentionWrapper")
from ddcheck.backends import PLAN_PARAMETERS  # noqa: E402 - flashinfer's documented API, one table


def _inert(name: str, trace: Trace) -> type:
    """A flashinfer wrapper class that can be built (a base backend's constructor makes them) and
    planned: ``plan``/``begin_forward`` keep what they were handed, by flashinfer's parameter names, as
    ``planned`` (what its kernels would run on, judged by the contract). Every other method is a
    stand-in: running one fails loudly, naming it."""
    params = PLAN_PARAMETERS.get(name.rsplit(".", 1)[-1], ())

    class Inert:
        def __init__(self, *args, **kwargs):
            trace.call(name)

        def plan(self, *args, **kwargs):
            trace.call(f"{name}.plan")
            self.planned = types.SimpleNamespace(**dict(zip(params, args)), **kwargs)

        begin_forward = plan

        def __getattr__(self, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return _stand_in(f"{name}.{attr}", trace)

    Inert.__name__ = Inert.__qualname__ = name.rsplit(".", 1)[-1]
    return Inert


def _stand_in(name: str, trace: Trace | None) -> type:
    return _StandInMeta(name.rsplit(".", 1)[-1], (), {"_ddcheck_name": name, "_ddcheck_trace": trace})


class _StandInModule(types.ModuleType):
    """A module whose every unknown attribute is a stand-in (or, for a sub-module, the module)."""

    def __init__(self, name: str, importer: "SglangImporter", provided: dict[str, Any] | None = None):
        super().__init__(name)
        self.__path__ = []  # importable as a package: sub-modules go through the importer again
        self.__dict__["_ddcheck_importer"] = importer
        for key, value in (provided or {}).items():
            setattr(self, key, value)

    def __getattr__(self, attr: str):
        if attr.startswith("__") or attr.startswith("_") and self.__name__.split(".")[0] == "flashinfer":
            # flashinfer's private helpers are probed with try/except ImportError (absent in newer
            # releases): absent here too
            raise AttributeError(attr)
        importer: SglangImporter = self.__dict__["_ddcheck_importer"]
        sub = f"{self.__name__}.{attr}"
        if importer.tree_has_module(sub) or importer.provides(sub):
            return importlib.import_module(sub)
        value = _stand_in(sub, importer.trace)
        setattr(self, attr, value)
        return value


# --------------------------------------------------------------------------- provided helpers


def _extract(tree: SourceTree, relpath: str, names: tuple[str, ...], env: dict[str, Any], files: list[str],
             ns: dict[str, Any] | None = None) -> dict[str, Any]:
    """Execute only the named top-level classes/functions of a tree file, in ``env``.

    Used for small, self-contained definitions (``ForwardMode``, ``TreeMaskMode``) whose module is
    too heavy to load. A name the file only imports (``from sglang.x import Name``) is followed
    to that module's file, so a definition that moves between releases is still found.
    """
    ns = {"__name__": "ddcheck_extract", **env} if ns is None else ns
    hit = tree.find(relpath)
    if hit is None:
        return {}
    files.append(hit.relpath)
    model = TreeModules.of(tree)
    module = model.parsed(hit.relpath)
    if module is None:
        return {}
    defs = {n.name: n for n in module.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    for node in module.body:  # imported names first: local defs may use them
        source = model.imported(model.dotted(hit.relpath), node) if isinstance(node, ast.ImportFrom) else None
        if source is not None:
            wanted = tuple(a.name for a in node.names if a.name in names and a.name not in defs)
            if wanted:
                _extract(tree, source.replace(".", "/") + ".py", wanted, env, files, ns)
    local = [defs[n] for n in names if n in defs]
    exec(compile(ast.Module(body=local, type_ignores=[]), f"{tree.label}!{relpath}", "exec"), ns)
    return {n: ns[n] for n in names if n in ns}


EXTRACTED = ((FORWARD_BATCH_FILE, (FORWARD_MODE,)),
             ("sglang/srt/speculative/eagle_utils.py", ("TreeMaskMode", "default_tree_mask_mode")))
# Globals for the extracted definitions. ``_is_cpu`` False: we emulate a GPU deployment, whose
# Triton kernels read the FULL_MASK tree-mask layout.
EXTRACT_ENV = {"IntEnum": IntEnum, "Enum": Enum, "auto": auto, "_is_cpu": False, "_is_npu": False}


def verify_path_files(tree: SourceTree, backend_modules: tuple[str, ...] = (BACKEND_MODULE,)) -> list:
    """The tree files a smoke run of those backends may read: every module matching ``REAL_MODULES``,
    the backends' own, and the files the extracted definitions come from. Enough to run the harness
    on a machine with no sglang (copy them into a directory and pass that as the target)."""
    root = tree.package_root("sglang")
    prefix = f"{root}/" if root else ""
    out = []
    for f in tree.files:
        rel = f.relpath[len(prefix):] if f.relpath.startswith(prefix) else None
        if rel and not rel.endswith("__init__.py"):
            module = rel[:-3].replace("/", ".")
            if _is_real_name(module) or module in backend_modules:
                out.append(f)
    files: list[str] = []
    for relpath, names in EXTRACTED:
        _extract(tree, relpath, names, EXTRACT_ENV, files)
    return out + [tree.find(r) for r in dict.fromkeys(files) if tree.find(r) not in out]


from ddcheck.smoke.loader import Recording  # noqa: E402 - absent attributes raise outside a tree runtime


def _provided(importer: "SglangImporter") -> dict[str, dict[str, Any]]:
    """The helpers the verify path calls, by module. Everything not listed is a stand-in."""
    trace, ctx, tree = importer.trace, importer.context, importer.tree

    def rec(name: str, fn: Callable) -> Callable:
        def wrapper(*args, **kwargs):
            trace.call(name)
            return fn(*args, **kwargs)

        wrapper.__name__ = name.rsplit(".", 1)[-1]
        wrapper.__qualname__ = wrapper.__name__
        return wrapper

    def const(name: str, value: Any) -> Callable:
        return rec(name, lambda *a, **k: value)

    import torch

    on_cuda = ctx.device.startswith("cuda")

    def core_count(device_id: int = 0) -> int:
        return torch.cuda.get_device_properties(device_id).multi_processor_count if on_cuda else 0

    def bool_env(name: str, default: str = "false") -> bool:
        return os.getenv(name, default).lower() in ("true", "1")

    def int_env(name: str, default: int = 0) -> int:
        value = os.getenv(name)
        return int(value) if value and value.strip().lstrip("-").isdigit() else default

    def pdl() -> bool:
        return on_cuda and torch.cuda.get_device_capability()[0] >= 9

    utils = {
        "is_cuda": const("utils.is_cuda", on_cuda),
        "get_bool_env_var": rec("utils.get_bool_env_var", bool_env),
        "get_int_env_var": rec("utils.get_int_env_var", int_env),
        "get_device_core_count": rec("utils.get_device_core_count", core_count),
        "next_power_of_2": rec("utils.next_power_of_2", lambda n: 1 << (n - 1).bit_length() if n > 0 else 1),
        # single GPU, no DP attention: no padding of graph batch sizes
        "require_gathered_buffer": const("utils.require_gathered_buffer", False),
        "get_cuda_graph_max_batch_size": rec("utils.get_cuda_graph_max_batch_size", lambda n: n),
        # torch.compile(backend=...) at import: "eager" traces nothing, so the helpers run as written
        "get_compiler_backend": const("utils.get_compiler_backend", "eager"),
        # fp4 KV caches only (TRT-LLM MLA); the smoke batch's cache is unquantized
        "is_float4_e2m1fn_x2": rec("utils.is_float4_e2m1fn_x2", lambda dtype: False),
        "get_device_capability": rec("utils.get_device_capability", lambda *a, **k: (
            torch.cuda.get_device_capability() if on_cuda else (9, 0))),
    }
    # flashinfer is never loaded; with ctx.flashinfer its wrappers are inert stand-ins that may be built
    utils["is_flashinfer_available"] = const("utils.is_flashinfer_available", ctx.flashinfer)
    for flag in ("is_hip", "is_npu", "is_xpu", "is_cpu", "is_musa", "is_gfx95_supported",
                 "is_gfx942_supported", "is_gfx1250_supported", "is_sm90_supported", "is_sm100_supported",
                 "is_sm120_supported"):
        utils[flag] = const(f"utils.{flag}", False)

    spec = Recording("get_spec()", trace, speculative_num_draft_tokens=ctx.num_draft_tokens,
                     speculative_num_steps=ctx.num_steps, speculative_eagle_topk=ctx.topk,
                     speculative_algorithm=None)
    parallel = Recording("get_parallel()", trace, attn_tp_size=1, attn_dcp_size=1, attn_dcp_rank=0,
                         attn_tp_rank=0, tp_size=1, dcp_group=None, attn_cp_size=1, enable_prefill_cp=False,
                         attn_dp_enabled=False, dcp_enabled=False)
    # 0.5.23 moved server args behind get_exec()/get_schedule().
    execution = Recording(
        "get_exec()", trace,
        kernel=Recording("get_exec().kernel", trace, enable_lean_attention=False, triton_attention_num_kv_splits=8,
                         triton_attention_split_tile_size=None, flashinfer_mla_disable_ragged=False),
        dllm=Recording("get_exec().dllm", trace, dllm_algorithm=None),
        deterministic=Recording("get_exec().deterministic", trace, enable_deterministic_inference=False),
        features=Recording("get_exec().features", trace, enable_mis=False),
        graph=Recording("get_exec().graph", trace, cuda_graph_config=Recording(
            "get_exec().graph.cuda_graph_config", trace,
            decode=Recording("get_exec().graph.cuda_graph_config.decode", trace, max_bs=8))))
    schedule = Recording("get_schedule()", trace, chunked_prefill_size=8192, page_size=1,
                         disable_chunked_prefix_cache=True, max_prefill_tokens=16384)
    model = Recording("get_model()", trace, is_embedding=False)
    major = torch.cuda.get_device_capability()[0] if on_cuda else 0
    platform = Recording("get_platform()", trace, is_sm90=major == 9, is_sm100=major == 10, is_sm120=major == 12,
                         is_cuda=on_cuda, is_hip=False)
    buffers: dict[str, Any] = {}

    def get_buffer(name: str, factory: Callable) -> Any:  # runtime_context's named persistent buffers
        if name not in buffers:
            buffers[name] = factory()
        return buffers[name]
    memory = Recording("get_memory()", trace, disable_radix_cache=False)
    disagg = Recording("get_disagg()", trace, disaggregation_mode="null")
    # the MLA backends' base reads server args through get_global_server_args() (0.5.10) or
    # runtime_context.get_server_args() (0.5.16)
    global_args = Recording("get_global_server_args()", trace, disaggregation_mode="null",
                            disable_chunked_prefix_cache=True, flashinfer_mla_disable_ragged=False,
                            speculative_num_draft_tokens=ctx.num_draft_tokens, speculative_eagle_topk=ctx.topk,
                            speculative_num_steps=ctx.num_steps, enable_deterministic_inference=False,
                            page_size=1, kv_cache_dtype="auto")

    (fb_path, fb_names), (eu_path, eu_names) = EXTRACTED
    forward_mode = _extract(tree, fb_path, fb_names, EXTRACT_ENV, trace.files)
    tree_mask = _extract(tree, eu_path, eu_names, EXTRACT_ENV, trace.files)
    if "default_tree_mask_mode" in tree_mask:
        tree_mask["default_tree_mask_mode"] = rec("eagle_utils.default_tree_mask_mode",
                                                  tree_mask["default_tree_mask_mode"])

    class KVWriteLoc:
        """Stand-in for ``memory_pool.KVWriteLoc``: a plain record of the write locations."""

        def __init__(self, *args, **kwargs):
            trace.call("memory_pool.KVWriteLoc")
            self.args, self.kwargs = args, kwargs

        @classmethod
        def for_batch(cls, forward_batch, *, swa_loc=None, full_loc=None):  # 0.5.23
            return cls(forward_batch.out_cache_loc, swa_loc, full_loc)

    class DllmConfig:
        """Stand-in for ``dllm.config.DllmConfig``: no diffusion LM is configured (None, as for any
        autoregressive model)."""

        @staticmethod
        def from_server_args(server_args):
            trace.call("dllm.config.DllmConfig.from_server_args")
            return None

    return {
        "sglang.srt.utils": utils,
        "sglang.srt.utils.common": utils,
        "sgl_kernel.utils": {"is_arch_support_pdl": rec("sgl_kernel.is_arch_support_pdl", pdl)},
        FORWARD_BATCH_MODULE: forward_mode,
        "sglang.srt.speculative.eagle_utils": tree_mask,
        "sglang.srt.runtime_context": {"get_spec": rec("runtime_context.get_spec", lambda: spec),
                                       "get_parallel": rec("runtime_context.get_parallel", lambda: parallel),
                                       "get_exec": rec("runtime_context.get_exec", lambda: execution),
                                       "get_schedule": rec("runtime_context.get_schedule", lambda: schedule),
                                       "get_model": rec("runtime_context.get_model", lambda: model),
                                       "get_memory": rec("runtime_context.get_memory", lambda: memory),
                                       "get_buffer": rec("runtime_context.get_buffer", get_buffer),
                                       "get_platform": rec("runtime_context.get_platform", lambda: platform),
                                       "get_server_args": rec("runtime_context.get_server_args",
                                                              lambda: global_args),
                                       "get_disagg": rec("runtime_context.get_disagg", lambda: disagg)},
        "sglang.srt.layers.dp_attention": {"get_attention_tp_size": const("dp_attention.get_attention_tp_size", 1)},
        SERVER_ARGS_MODULE: {"get_global_server_args": rec("server_args.get_global_server_args",
                                                                 lambda: global_args)},
        "sglang.srt.configs.hybrid_arch": {n: const(f"hybrid_arch.{n}", None) for n in
                                           ("mambaish_config", "hybrid_gdn_config", "kimi_linear_config",
                                            "linear_attn_model_spec")},
        # CUDA graphs are on (we exercise the capture/replay entry points), not the breakable kind.
        "sglang.srt.model_executor.cuda_graph_config": {
            "cuda_graph_fully_disabled": const("cuda_graph_config.cuda_graph_fully_disabled", False),
            "check_cuda_graph_backend": const("cuda_graph_config.check_cuda_graph_backend", False)},
        "sglang.srt.mem_cache.memory_pool": {"KVWriteLoc": KVWriteLoc},
        # a decorator on JIT-kernel loaders at import (0.5.23); calling a decorated loader still
        # reaches load_jit, a stand-in
        # JIT kernels may be built (TRT-LLM MLA prebuilds one for its forward's zero-KV rows when constructed,
        # 0.5.23 trtllm_mla_backend.py:251) but never run: the built module is a stand-in
        "sglang.kernels.jit.utils": {"cache_once": functools.cache,
                                     "is_arch_support_pdl": rec("kernels.jit.utils.is_arch_support_pdl", pdl),
                                     "make_cpp_args": rec("kernels.jit.utils.make_cpp_args", lambda *a: ()),
                                     "load_jit": rec("kernels.jit.utils.load_jit", lambda name, *a, **k: _stand_in(
                                         f"sglang.kernels.jit.{name}", trace))},
        "flashinfer": {name: _inert(f"flashinfer.{name}", trace) for name in FLASHINFER_WRAPPERS},
        # the size of a kernel's scratch counters, asked when TRT-LLM MLA is built (0.5.23
        # trtllm_mla_backend.py:104-110); never metadata
        "flashinfer.utils": {"get_device_sm_count": rec("flashinfer.utils.get_device_sm_count", lambda device: 1),
                             "get_trtllm_gen_multi_ctas_kv_counter_bytes": rec(
                                 "flashinfer.utils.get_trtllm_gen_multi_ctas_kv_counter_bytes",
                                 lambda *a, **k: 1)},
        "sglang.srt.dllm.config": {"DllmConfig": DllmConfig},
        "sglang.srt.layers.cp.utils": {"is_cp_active": const("cp.utils.is_cp_active", False)},  # no context parallel
        # a kernel's scratch counters, allocated when TRT-LLM MHA is built (0.5.23); never metadata
        "sglang.srt.layers.attention.trtllm_mla_backend": {
            "make_persistent_multi_ctas_kv_counter_buffer": rec(
                "trtllm_mla_backend.make_persistent_multi_ctas_kv_counter_buffer",
                lambda device, *a, **k: torch.zeros(1, dtype=torch.uint8, device=device)),
            "grow_multi_ctas_kv_counter_buffer_if_needed": rec(
                "trtllm_mla_backend.grow_multi_ctas_kv_counter_buffer_if_needed", lambda buffer, *a, **k: buffer)},
    }


# --------------------------------------------------------------------------- the importer


from ddcheck.smoke.loader import LoadContext  # noqa: E402 - one start-up configuration for both loaders


class SglangImporter(SwappedImports, importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``sglang.*`` from a :class:`SourceTree`; install with ``with importer:``.

    Real modules are written to a private temp directory first so Triton (which reads a kernel's
    source with ``inspect``) and tracebacks see ordinary files.
    """

    namespaces = NAMESPACES

    def __init__(self, tree: SourceTree, context: LoadContext, backend_source: str | None = None,
                 extra_real: set[str] | None = None, backend_module: str = BACKEND_MODULE):
        self.tree, self.context, self.trace = tree, context, Trace()
        self.backend_module = backend_module  # run from the tree (or from ``backend_source``)
        # Modules run from the tree for this session only: a tree's own verify-input class and the
        # SpecInput/SpecInputType it derives from (``spec_info``), so the backend meets a real instance.
        self.extra_real: set[str] = set(extra_real or ())
        root = tree.package_root("sglang")
        if root is None:
            raise HarnessError(f"{tree.label}: no sglang package in this target")
        self._prefix = f"{root}/" if root else ""
        self._paths = {f.relpath: f for f in tree.files}
        self._backend_source = backend_source
        self._tmp = Path(tempfile.mkdtemp(prefix="ddcheck-smoke-"))
        self._provided: dict[str, dict[str, Any]] | None = None

    def __exit__(self, *exc) -> None:
        import shutil

        super().__exit__(*exc)
        shutil.rmtree(self._tmp, ignore_errors=True)  # the copies of tree files written for this session

    # -- tree lookups
    def _relpath(self, fullname: str) -> tuple[str, bool] | None:
        """(relpath, is_package) of a module in the tree, or None."""
        return self.tree.module_file(fullname)

    def tree_has_module(self, fullname: str) -> bool:
        return self._relpath(fullname) is not None

    def is_real(self, fullname: str) -> bool:
        hit = self._relpath(fullname)
        return hit is not None and not hit[1] and (_is_real_name(fullname) or fullname in self.extra_real
                                                   or fullname == self.backend_module)

    def preload(self) -> dict[str, str]:
        """Import the session's extra real modules now (inside ``with self:``, before the backend, so
        the backend binds the same ``SpecInputType``). One that fails to run here is dropped back to a
        stand-in; returns {module: why} for those."""
        import sys

        failed: dict[str, str] = {}
        for name in sorted(self.extra_real, key=lambda n: n.count(".")):
            if name in sys.modules:
                continue
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - the caller falls back to a stand-in input
                failed[name] = f"{type(exc).__name__}: {exc}"
                self.extra_real.discard(name)
                sys.modules.pop(name, None)
        return failed

    # -- finder protocol
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] not in NAMESPACES:
            return None
        if fullname.startswith("flashinfer.") and fullname.rsplit(".", 1)[-1].startswith("_"):
            return None  # see _StandInModule.__getattr__: flashinfer's private names are absent
        if self.is_real(fullname):
            relpath = self._relpath(fullname)[0]
            text = self._backend_source if fullname == self.backend_module and self._backend_source is not None \
                else self._paths[relpath].read_bytes().decode("utf-8")
            disk = self._tmp / relpath
            disk.parent.mkdir(parents=True, exist_ok=True)
            disk.write_text(text, encoding="utf-8")
            self.trace.real_modules.append(fullname)
            self.trace.files.append(relpath)
            return importlib.util.spec_from_file_location(fullname, disk)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def provides(self, module: str) -> bool:
        """Whether ``module`` is a stand-in with provided helpers (``flashinfer.utils``)."""
        if self._provided is None:
            self._provided = _provided(self)
        return module in self._provided

    def create_module(self, spec):
        self.provides(spec.name)
        return _StandInModule(spec.name, self, self._provided.get(spec.name))

    def exec_module(self, module):
        pass

    # -- what the harness asks of either loader
    published: list[str] = []

    def server_args(self):
        return None  # the fakes' own server args

    def start_up(self, model_config) -> None:
        pass

    def collect(self) -> None:
        pass

    def backend_class(self, module: types.ModuleType, cls: str) -> type:
        value = getattr(module, cls, None)
        if not isinstance(value, type):
            raise HarnessError(f"the backend module defines no {cls}")
        return value

    def load_backend(self) -> types.ModuleType:
        """Import the backend module (must be inside ``with self:``)."""
        name = self.backend_module
        if not self.tree_has_module(name):
            raise HarnessError(f"{self.tree.label}: no {name.replace('.', '/')}.py in this target")
        try:
            return importlib.import_module(name)
        except HarnessError:
            raise
        except Exception as exc:  # an import-time failure is the harness's, never a verdict
            raise HarnessError(f"importing {name} failed: {type(exc).__name__}: {exc}") from exc

    def forward_mode(self):
        mode = self._provided and self._provided[FORWARD_BATCH_MODULE].get(FORWARD_MODE)
        if mode is None:
            raise HarnessError(f"{self.tree.label}: ForwardMode not found in forward_batch_info.py")
        return mode
