"""SGLang attention backends ddcheck knows: where each lives and which of its metadata fields stand
for which term of the verify contract (:mod:`ddcheck.contract`).

Adding a backend is adding an entry here. ``runs`` says whether ``ddcheck smoke --backend`` can run
its metadata code on this machine from the tree with stand-ins; when it cannot, ``why_not`` says why
(shown by ``ddcheck smoke --list-backends``). ``kernels`` names what computes attention numbers where
they can run (Triton, on CPU through its interpreter or on a GPU); without it the backend is judged
by the contract alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ddcheck.contract import Term
from ddcheck.tree.names import ATTENTION_PACKAGE as ATTENTION
from ddcheck.tree.names import PAGE_SIZE

# The leading parameters of each flashinfer wrapper's ``plan`` (``begin_forward`` is its old name), as
# flashinfer documents them; sglang passes them by position (0.5.10 flashinfer_backend.py:1493). Its
# wrappers are stand-ins where flashinfer cannot run: what they were planned with is judged.
PLAN_PARAMETERS = {
    "BatchPrefillWithPagedKVCacheWrapper": ("qo_indptr", "paged_kv_indptr", "paged_kv_indices",
                                            "paged_kv_last_page_len", "num_qo_heads", "num_kv_heads",
                                            "head_dim_qk", PAGE_SIZE, "head_dim_vo", "custom_mask"),
    "BatchPrefillWithRaggedKVCacheWrapper": ("qo_indptr", "kv_indptr", "num_qo_heads", "num_kv_heads",
                                             "head_dim_qk", "head_dim_vo", "custom_mask"),
    "BatchDecodeWithPagedKVCacheWrapper": ("indptr", "indices", "last_page_len", "num_qo_heads", "num_kv_heads",
                                           "head_dim", PAGE_SIZE),
    "BatchMLAPagedAttentionWrapper": ("qo_indptr", "kv_indptr", "kv_indices", "kv_len_arr", "num_heads",
                                      "head_dim_ckv", "head_dim_kpe", PAGE_SIZE),
}

# FA3-style metadata (FlashAttentionMetadata and the TRT-LLM MHA copy of it).
_VARLEN = {
    "forward_metadata.cu_seqlens_q": Term.QUERY_OFFSETS,
    "forward_metadata.cache_seqlens_int32": Term.KV_LENS,
    "forward_metadata.cu_seqlens_k": Term.KV_OFFSETS,
    "forward_metadata.max_seq_len_q": Term.MAX_QUERY_LEN,
    "forward_metadata.max_seq_len_k": Term.MAX_KV_LEN,
    "forward_metadata.page_table": Term.PAGE_TABLE,
}


@dataclass(frozen=True)
class Backend:
    name: str  # the --backend name, as in `--attention-backend`
    module: str
    cls: str
    fields: Mapping[str, Term] = field(default_factory=dict)
    kernels: str | None = None  # "triton": attention numbers are computed and compared with a reference
    why_not: str | None = None  # set when smoke cannot run it here
    # fields a CUDA graph's kernels never read (host-only values), with the code path that says so:
    # on the graph path their captured value is not a fact of the replayed step
    graph_host_only: Mapping[str, str] = field(default_factory=dict)
    # tree modules run for real besides the backend's own (a base class it derives from)
    real_modules: tuple[str, ...] = ()
    # derives from FlashInferAttnBackend, whose constructor builds flashinfer's wrappers: they are
    # inert (built and planned, never run: ``plan`` records its inputs as ``planned``; calling any other
    # method is a stand-in call, a harness failure)
    flashinfer: bool = False
    # why its CUDA-graph path cannot run on a CPU (state allocated on "cuda" by the tree), with the line
    graph_needs_cuda: str | None = None
    # the GPU the emulated machine is (the tree's start-up rejects the backend on others)
    arch: str = "sm90"
    # the longest request (prefix + verify tokens) the backend handles at the harness's page size 1,
    # where its kernels assume pages are larger (the default batch's requests are shortened to fit)
    max_request_len: int | None = None
    # where the backend splits verify into a cascade (prefix attention, then one query per row over the tree
    # nodes it sees), the metadata of its second part: set, the first part is judged over the prefix only
    # and this one, with the same fields, over the tree
    cascade: str | None = None
    # the smoke model's config.json keys for this backend, over the small Llama's (an MLA backend is handed an
    # MLA model: the tree's ModelConfig derives its latent and rope dimensions from these)
    model: Mapping[str, Any] = field(default_factory=dict)
    # False when its fields are the harness's record (flashinfer's plan inputs, which the real wrapper
    # keeps to itself): ``ddcheck guard`` has nothing to read in a running server
    live: bool = True

    @property
    def runs(self) -> bool:
        return self.why_not is None

    def contract_fields(self, graph: bool = False) -> Mapping[str, Term]:
        """The fields judged by the contract; on a replayed graph, not those its kernels never read."""
        if not graph:
            return self.fields
        return {f: t for f, t in self.fields.items() if f not in self.graph_host_only}

    @property
    def relpath(self) -> str:
        return self.module.replace(".", "/") + ".py"


BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("triton", f"{ATTENTION}.triton_backend", "TritonAttnBackend", {
        "forward_metadata.qo_indptr": Term.QUERY_OFFSETS,
        "forward_metadata.kv_indptr": Term.PREFIX_KV_OFFSETS,
        "forward_metadata.mask_indptr": Term.MASK_OFFSETS,
        "forward_metadata.max_extend_len": Term.MAX_QUERY_LEN,
    }, kernels="triton"),
    # topk > 1, and a DDTree tree in HaiyuZhou's fork (flashattention_backend.py:536-620): verify is a cascade,
    # forward_metadata over the prefix, forward_metadata_spec_decode_expand over the tree (0.5.10 :571-660)
    Backend("fa3", f"{ATTENTION}.flashattention_backend", "FlashAttentionBackend", _VARLEN,
            cascade="forward_metadata_spec_decode_expand",
            graph_host_only={"forward_metadata.max_seq_len_k":
                             "forward_extend calls flash_attn_with_kvcache(page_table, cache_seqlens, cu_seqlens_q, "
                             "cu_seqlens_k_new, max_seqlen_q) with no max_seqlen_k (0.5.10 "
                             "flashattention_backend.py:709); 0.5.23 flashattention_backend.py:896: it 'only feeds "
                             "Python-side page-table slicing and the scheduler_metadata heuristic -- never the kernel'"}),
    Backend("trtllm_mha", f"{ATTENTION}.trtllm_mha_backend", "TRTLLMHAAttnBackend", _VARLEN,
            graph_host_only={"forward_metadata.max_seq_len_k":
                             "the kernel is handed max_kv_len=self.max_context_len (0.5.10 "
                             "trtllm_mha_backend.py:871), never max_seq_len_k, which only slices the page table"},
            real_modules=(f"{ATTENTION}.flashinfer_backend",), flashinfer=True),
    # The verify layout is computed by the verify input's own method (spec_info.generate_attn_arg_prefill,
    # 0.5.10 flashinfer_backend.py:1448) and handed to flashinfer's wrapper, which keeps it
    # (wrapper_paged.begin_forward, :1493): what the wrapper was planned with is judged.
    Backend("flashinfer", f"{ATTENTION}.flashinfer_backend", "FlashInferAttnBackend", {
        "forward_metadata.prefill_wrappers.0.planned.qo_indptr": Term.QUERY_OFFSETS,
        "forward_metadata.prefill_wrappers.0.planned.paged_kv_indptr": Term.KV_OFFSETS,
        "forward_metadata.prefill_wrappers.0.planned.paged_kv_indices": Term.KV_INDICES,
    }, flashinfer=True,
            graph_needs_cuda="init_cuda_graph_state allocates its KV-index buffer with device=\"cuda\" (0.5.10 "
                             "flashinfer_backend.py:526)", live=False),
    Backend("flashmla", f"{ATTENTION}.flashmla_backend", "FlashMLABackend",
            why_not="MLA: built on FlashInferMLAAttnBackend (flashinfer wrappers, 0.5.23 flashinfer_mla_backend.py"
                    ":289) and calls get_mla_metadata, a CUDA kernel, for its verify metadata (flashmla_backend.py:188)"),
    # TRT-LLM MLA, built on the tree's real FlashInferMLAAttnBackend (inert wrappers). Judged at page size 1:
    # its block table (block_kv_indices: req_to_token[req, j * page] // page) is computed the same way at
    # every page size, and at 1 it is the requests' token rows.
    Backend("trtllm_mla", f"{ATTENTION}.trtllm_mla_backend", "TRTLLMMLABackend", {
        "forward_decode_metadata.seq_lens_k": Term.KV_LENS,
        "forward_decode_metadata.block_kv_indices": Term.PAGE_TABLE,
        # before 0.5.4 verify is its base's: the MLA wrapper planned by FlashInferMLAIndicesUpdaterPrefill
        # (0.4.10 flashinfer_mla_backend.py:180 and :729); a field a path does not set is not judged
        "forward_metadata.prefill_wrapper.planned.qo_indptr": Term.QUERY_OFFSETS,
        "forward_metadata.prefill_wrapper.planned.kv_indptr": Term.KV_OFFSETS,
        "forward_metadata.prefill_wrapper.planned.kv_indices": Term.KV_INDICES,
    }, real_modules=(f"{ATTENTION}.flashinfer_mla_backend",), flashinfer=True,
            # before 0.5.4 its verify path is its base's prefill updater, which asserts the input is the
            # tree's EagleVerifyInput and calls its generate_attn_arg_prefill (0.4.10 flashinfer_mla_backend.py:702):
            # where no drafter of the tree builds W, smoke hands every backend that class (smoke/api.py)
            # its block-table kernel walks a request's pages in blocks of 64 (NUM_PAGE_PER_BLOCK=
            # TRITON_PAD_NUM_PAGE_PER_BLOCK, 0.5.3 trtllm_mla_backend.py:187): at page size 1 a request of
            # more than 64 tokens is outside what it serves (it asks for page size 32 or 64)
            max_request_len=64,
            model={"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "kv_lora_rank": 64,
                   "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "rope_scaling": None},
            # "TRTLLM MLA backend is only supported on Blackwell GPUs" (0.5.23 arg_groups/overrides.py:1212)
            arch="sm100",
            graph_needs_cuda="its base's init_cuda_graph_state allocates on device=\"cuda\" (0.5.10 "
                             "flashinfer_mla_backend.py:349)"),
    Backend("aiter", f"{ATTENTION}.aiter_backend", "AiterAttnBackend",
            why_not="ROCm only: its kernels and metadata helpers come from the aiter package (0.5.23 "
                    "aiter_backend.py:48), which does not install on this machine"),
)}


def get(name: str) -> Backend:
    """The backend called ``name``; KeyError names the known ones."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise KeyError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}") from None


def of_class(cls: type) -> Backend | None:
    """The entry for a backend class: its own, or that of the nearest base class ddcheck knows."""
    by_cls = {b.cls: b for b in BACKENDS.values()}
    for klass in cls.__mro__:
        if klass.__name__ in by_cls:
            return by_cls[klass.__name__]
    return None


def of_object(obj: object) -> Backend | None:
    """The entry for a backend instance (see :func:`of_class`)."""
    return of_class(type(obj))
