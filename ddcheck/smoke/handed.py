"""What a backend is handed besides its verify input: the forward batch, the layer, the pools and the
model runner, each the tree's own class.

Each holds only what the harness owns, under the field names of :mod:`ddcheck.tree.names`: the batch's
tensors and mode, the pools' buffers, the batch's shape, the launch's server args. Everything else an
instance would have is the tree's to answer: built by the class's own ``__init__`` where it builds
here, else read from a :class:`~ddcheck.smoke.loader.Recording` like the class (a field default, a
class member, what ``__init__`` derives from the values held: :mod:`ddcheck.tree.classes`), else a
recorded stand-in. The report lists what the backend read of each.
"""

from __future__ import annotations

from typing import Any

import torch

from ddcheck.smoke.batch import Shape, VerifyBatch
from ddcheck.smoke.loader import Recording, Trace, tree_class
from ddcheck.tree import names
from ddcheck.tree.classes import declared_names, init_parameters


def recorded_instance(cls: type, kwargs: dict[str, Any], trace: Trace, label: str) -> Any:
    """An instance of the tree's class ``cls`` built by its own constructor from ``kwargs``; attribute
    reads after construction are recorded under ``label`` (a read it lacks, as missing)."""

    class Recorded(cls):  # noqa: D401 - the tree's class, reads recorded once built
        def __getattribute__(self, name: str):
            if not name.startswith("__") and object.__getattribute__(self, "__dict__").get("_ddcheck_armed"):
                trace.reads.setdefault(label, set()).add(name)
            return super().__getattribute__(name)

        def __getattr__(self, name: str):
            own = getattr(cls, "__getattr__", None)  # the class's own (nn.Module's parameters, submodules)
            if own is not None:
                try:
                    return own(self, name)
                except AttributeError:
                    pass
            if not name.startswith("__"):
                trace.missing.setdefault(label, set()).add(name)
            raise AttributeError(f"{label} has no attribute {name!r}")

    Recorded.__name__ = Recorded.__qualname__ = cls.__name__
    Recorded.__module__ = cls.__module__
    obj = Recorded(**kwargs)
    obj.__dict__["_ddcheck_armed"] = True
    return obj


def built(cls: Any, kwargs: dict[str, Any], trace: Trace, label: str) -> Any:
    """The tree's class built from ``kwargs`` (:func:`recorded_instance`); where it is not here (none, or
    one read from its source) or its constructor fails (the failure is reported), a Recording like it
    holding ``kwargs``."""
    if isinstance(cls, type):
        try:
            return recorded_instance(cls, kwargs, trace, label)
        except Exception as exc:  # noqa: BLE001 - reported; the recording answers as the class would
            trace.stopped[f"{cls.__name__}(...)"] = f"{type(exc).__name__}: {exc}"
    return Recording(label, trace, cls, **kwargs)


def layer(shape: Shape, trace: Trace) -> Any:
    """The tree's RadixAttention for the batch's heads (layer 0; its own defaults otherwise: no soft-cap,
    no window, a decoder's self-attention)."""
    values = {names.LAYER_NUM_HEADS: shape.num_q_heads, names.LAYER_NUM_KV_HEADS: shape.num_kv_heads,
              names.LAYER_HEAD_DIM: shape.head_dim, names.LAYER_SCALING: shape.head_dim ** -0.5, names.LAYER_ID: 0}
    return built(tree_class(names.RADIX_ATTENTION_MODULE, names.RADIX_ATTENTION_CLASS), values, trace, "layer")


def positions(batch) -> torch.Tensor:
    """Each draft token's position: its request's prefix length plus its index in the request."""
    width = batch.out_cache_loc.numel() // max(1, batch.bs)
    steps = torch.arange(width, device=batch.seq_lens.device)
    return (batch.seq_lens.to(torch.int64)[:, None] + steps[None, :]).flatten()


def forward_batch(batch: VerifyBatch, mode: Any, spec_info: Any, pool: Any, req_pool: Any, trace: Trace,
                  label: str = "forward_batch", spec_algorithm: Any = None, tree: Any = None) -> Recording:
    """A TARGET_VERIFY ForwardBatch like the tree's: the batch's tensors (seq_lens are the prefix
    lengths), its mode, verify input and pools; ``spec_algorithm``: the launch's algorithm, the tree's own
    member (else the class's default answers). Every other field is the tree's class default, but for the
    KV-location plan the tree builds as it builds a batch (``names.KV_LOC_PLAN``): one like its class, over
    the batch's slots and lengths."""
    launch = {} if spec_algorithm is None else {names.SPEC_ALGORITHM_FIELD: spec_algorithm}
    values = {names.BATCH_SIZE: batch.bs, names.FORWARD_MODE_FIELD: mode, names.SPEC_INFO_FIELD: spec_info,
              names.REQ_POOL_INDICES: batch.req_pool_indices, names.SEQ_LENS: batch.seq_lens,
              names.SEQ_LENS_SUM: int(batch.seq_lens.sum()), names.SEQ_LENS_CPU: batch.seq_lens.cpu(),
              names.OUT_CACHE_LOC: batch.out_cache_loc, names.POSITIONS: positions(batch),
              names.INPUT_IDS: torch.zeros(batch.out_cache_loc.numel(), dtype=torch.int64,
                                           device=batch.seq_lens.device),
              names.TOKEN_TO_KV_POOL: pool, names.REQ_TO_TOKEN_POOL: req_pool}
    cls = tree_class(names.FORWARD_BATCH_MODULE, names.FORWARD_BATCH_CLASS)
    if cls is not None and names.KV_LOC_PLAN in declared_names(cls):
        slots = {k: values[k] for k in (names.REQ_POOL_INDICES, names.SEQ_LENS, names.SEQ_LENS_CPU)}
        values[names.KV_LOC_PLAN] = Recording(f"{label}.{names.KV_LOC_PLAN}", trace,
                                              tree_class(None, names.KV_LOC_PLAN_CLASS, tree), **slots)
    return Recording(label, trace, cls, **launch, **values)


def _storage(k_buf: torch.Tensor, v_buf: torch.Tensor) -> dict[str, Any]:
    """The KV cache's accessors over the batch's buffers (one layer)."""

    def set_kv_buffer(layer, loc, k, v, *args, **kwargs):
        # the tree's KVWriteLoc (0.5.16+) carries the per-token location as ``loc``; a stand-in's record
        # carries it first
        loc = getattr(loc, "loc", None) if not isinstance(loc, torch.Tensor) and hasattr(loc, "loc") else \
            getattr(loc, "args", (loc,))[0]
        k_buf[loc] = k.reshape((-1,) + k_buf.shape[1:]).to(k_buf.dtype)
        v_buf[loc] = v.reshape((-1,) + v_buf.shape[1:]).to(v_buf.dtype)

    return {names.GET_KEY_BUFFER: lambda layer_id: k_buf, names.GET_VALUE_BUFFER: lambda layer_id: v_buf,
            names.GET_KV_BUFFER: lambda layer_id: (k_buf, v_buf), names.GET_V_HEAD_DIM: lambda: v_buf.shape[-1],
            names.SET_KV_BUFFER: set_kv_buffer}


def kv_pool(batch: VerifyBatch, trace: Trace, tree: Any, device: str) -> Recording:
    """A one-layer MHA token-to-KV pool like the tree's, over the batch's buffers: its size, dtype and
    layer count as its ``__init__`` takes them, everything else the tree's class answers."""
    k_buf, v_buf = batch.k_buffer, batch.v_buffer
    values = {names.POOL_SIZE: k_buf.shape[0], names.PAGE_SIZE: 1, names.POOL_DTYPE: k_buf.dtype,
              names.POOL_LAYER_NUM: 1, names.POOL_DEVICE: device}
    return Recording(names.TOKEN_TO_KV_POOL, trace, tree_class(None, names.MHA_KV_POOL_CLASS, tree),
                     **values, **_storage(k_buf, v_buf))


def req_to_token_pool(batch: VerifyBatch, shape: Shape, trace: Trace, tree: Any, device: str) -> Recording:
    """The request-to-token pool like the tree's, holding the batch's table."""
    values = {names.POOL_SIZE: shape.max_bs, names.POOL_MAX_CONTEXT_LEN: shape.max_context_len,
              names.POOL_DEVICE: device, names.REQ_TO_TOKEN: batch.req_to_token}
    return Recording(names.REQ_TO_TOKEN_POOL, trace, tree_class(None, names.REQ_TO_TOKEN_POOL_CLASS, tree), **values)


def allocator(pool: Recording, trace: Trace, tree: Any, device: str) -> Recording:
    """The static KV allocator like the tree's, over ``pool``."""
    values = {names.POOL_SIZE: getattr(pool, names.POOL_SIZE), names.PAGE_SIZE: 1,
              names.POOL_DTYPE: getattr(pool, names.POOL_DTYPE), names.POOL_DEVICE: device,
              names.ALLOCATOR_KVCACHE: pool}
    return Recording(names.TOKEN_TO_KV_POOL_ALLOCATOR, trace, tree_class(None, names.TOKEN_ALLOCATOR_CLASS, tree),
                     **values)


def model_config(shape: Shape, trace: Trace, tree: Any, config: dict) -> Recording:
    """The target model's config like the tree's ModelConfig: the smoke model's config.json ``config`` (as the
    tree's readers see one), its dtype and context length; the rest derived by the tree's own code."""
    from ddcheck.tree.models import ModelConfig

    label = f"{names.MODEL_RUNNER_ATTR}.{names.MODEL_CONFIG_ATTR}"
    hf_config = ModelConfig(f"{label}.{names.HF_CONFIG}", config, "the smoke model")
    values = {names.HF_CONFIG: hf_config, names.HF_TEXT_CONFIG: hf_config, names.MODEL_DTYPE: shape.dtype,
              names.CONTEXT_LEN: shape.max_context_len}
    return Recording(label, trace, tree_class(None, names.MODEL_CONFIG_CLASS, tree), **values)


def model_runner(batch: VerifyBatch, shape: Shape, device: str, trace: Trace, server_args: Any, tree: Any,
                 spec_algorithm: Any = None, smoke_model: dict | None = None) -> Recording:
    """A target-model runner like the tree's ModelRunner: the launch's server args (the tree's own
    ServerArgs, :meth:`SglangImporter.server_args`), the smoke model's config, the pools over the batch's
    buffers, the device, a one-process world; ``spec_algorithm``: the tree's algorithm member of the launch.
    What its start-up sets by calls that cannot run here is held too (names.py says each and where); what its
    ``__init__`` and methods derive from these the tree's class answers. ``smoke_model``: config.json keys
    over the smoke model's (the backend's: an MLA backend's model is an MLA model)."""
    from ddcheck.smoke.loader import smoke_model_config

    config = {**smoke_model_config(shape), **(smoke_model or {})}
    pool = kv_pool(batch, trace, tree, device)
    values = {names.SERVER_ARGS_ATTR: server_args, names.MODEL_CONFIG_ATTR: model_config(shape, trace, tree, config),
              names.REQ_TO_TOKEN_POOL: req_to_token_pool(batch, shape, trace, tree, device),
              names.TOKEN_TO_KV_POOL: pool, names.TOKEN_TO_KV_POOL_ALLOCATOR: allocator(pool, trace, tree, device),
              names.DEVICE_ATTR: device, names.GPU_ID: torch.device(device).index or 0,
              names.PAGE_SIZE: 1, names.MODEL_DTYPE: shape.dtype, names.KV_CACHE_DTYPE: batch.k_buffer.dtype,
              names.MAX_RUNNING_REQUESTS: shape.max_bs, names.SLIDING_WINDOW_SIZE: None,
              names.MODEL_ATTR: model(trace, tree, config)}
    values.update({attr: getattr(server_args, field, None) for attr, field in names.RUNNER_ATTENTION_BACKENDS.items()})
    if spec_algorithm is not None:
        values[names.SPEC_ALGORITHM_FIELD] = spec_algorithm
    cls = tree_class(None, names.MODEL_RUNNER_CLASS, tree)
    params = init_parameters(cls)
    values.update({p: v for p, v in one_process(params).items() if p not in values})
    if names.PARALLEL_STATE_ATTR in params:
        values[names.PARALLEL_STATE_ATTR] = parallel_state(trace, tree, values[names.GPU_ID])
    return Recording(names.MODEL_RUNNER_ATTR, trace, cls, **values)


def model(trace: Trace, tree: Any, config: dict) -> Recording:
    """The target model, which is not loaded here: like the tree's class of the smoke model's architecture (what
    it has, it declares; what it lacks, a read finds absent), of no torch modules (what a backend walks for its
    layers' kinds); its parts (its head, its layers) are recorded stand-ins."""
    cls = tree_class(None, config["architectures"][0], tree)
    return Recording(f"{names.MODEL_RUNNER_ATTR}.{names.MODEL_ATTR}", trace, cls, modules=torch.nn.Module().modules)


def one_process(fields) -> dict[str, int]:
    """A one-process world's value of each parallel field among ``fields``: sizes 1, ranks 0."""
    return {f: 1 if f.endswith(names.PARALLEL_SIZE_SUFFIX) else 0 for f in fields
            if f.endswith((names.PARALLEL_SIZE_SUFFIX, names.PARALLEL_RANK_SUFFIX))}


def parallel_state(trace: Trace, tree: Any, gpu_id: int) -> Any:
    """The tree's parallel state of a one-process world on GPU ``gpu_id``."""
    import dataclasses

    cls = tree_class(None, names.PARALLEL_STATE_CLASS, tree)
    fields = [f.name for f in dataclasses.fields(cls)] if cls is not None and dataclasses.is_dataclass(cls) \
        else init_parameters(cls)
    values = {**one_process(fields), **({names.GPU_ID: gpu_id} if names.GPU_ID in fields else {})}
    return built(cls, values, trace, f"{names.MODEL_RUNNER_ATTR}.{names.PARALLEL_STATE_ATTR}")
