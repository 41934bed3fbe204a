"""Every SGLang name ddcheck relies on, defined once: a renamed SGLang method, field or module is one
edit here, whichever command reads it (scan, fix, config, smoke, guard).

Plain data, importing nothing, so the guard (loaded in every process of a served model) and the
one-file scan pay nothing for it. ``tests/tree/test_names.py`` finds no second definition of these names
elsewhere in ``ddcheck/``: no constant of the same name, and no module-level literal spelling one of
these values again. What a fork may rename is also extendable from ``[tool.ddcheck]`` (the
analysis's :class:`ddcheck.analysis.vocabulary.Vocabulary` starts from the values here). Names are
grouped by what ddcheck does with them; each comment says where SGLang defines the name.
"""

from __future__ import annotations

PACKAGE = "sglang"
ATTENTION_PACKAGE = "sglang.srt.layers.attention"  # the attention backends, one module each

# ForwardMode (sglang/srt/model_executor/forward_batch_info.py); TARGET_VERIFY is the verify step.
FORWARD_BATCH_MODULE = "sglang.srt.model_executor.forward_batch_info"
FORWARD_MODE = "ForwardMode"
TARGET_VERIFY = "TARGET_VERIFY"

# The launch's arguments: the dataclass ServerArgs (sglang/srt/server_args.py) and the functions and
# methods through which the tree publishes one process-wide (``set_global_server_args_for_scheduler``,
# 0.5.x; ``RuntimeContext.set_server_args``, 0.5.23), matched by this pattern; a module-level dict
# ``global_server_args_dict`` (0.4.x) matches it as ``set_<its name>``.
SERVER_ARGS_MODULE = "sglang.srt.server_args"
SERVER_ARGS_CLASS = "ServerArgs"
SPECULATIVE_ALGORITHM_CLASS = "SpeculativeAlgorithm"  # the --speculative-algorithm enum (spec_info.py)
SERVER_ARGS_SETTER = r"set_(global_)?server_args(_[a-z_]*)?(_dict)?"

# What a model runner's start-up calls to set a single-GPU process's parallel state (tensor, pipeline
# and attention groups; ModelRunner.init_torch_distributed in every release), in order. The smoke
# harness calls them, by parameter name, for a world of one process on gloo.
SINGLE_PROCESS_STARTUP = (
    ("sglang.srt.distributed.parallel_state", "init_distributed_environment"),
    ("sglang.srt.distributed.parallel_state", "initialize_model_parallel"),
    ("sglang.srt.layers.dp_attention", "initialize_dp_attention"),
)

# ----------------------------------------------------------------------------- SGLang's files
# Modules (dotted) and files (relpaths in a tree, as ddcheck.tree.sources names them).
SPEC_INFO_MODULE = "sglang.srt.speculative.spec_info"  # SpeculativeAlgorithm, SpecInput
SPEC_INFO_FILE = "sglang/srt/speculative/spec_info.py"
EAGLE_VERIFY_INPUT = "sglang.srt.speculative.eagle_info.EagleVerifyInput"  # EAGLE's verify input (0.5.x)
VERSION_FILES = ("sglang/_version.py", "sglang/version.py")  # __version__, newer then older
ARG_GROUPS_DIR = "sglang/srt/arg_groups/"  # 0.5.23: ServerArgs' fields and start-up code, by group
ARG_GROUP_FIELDS_DIR = ARG_GROUPS_DIR + "fields/"  # 0.5.23: ServerArgs' fields, one module a group
# Any folder so named holds speculative code (srt/speculative/, kernels/ops/speculative/): where a
# release's plugin algorithms register themselves.
SPECULATIVE_FOLDER = "speculative"
SERVER_ARGS_FILE = "sglang/srt/server_args.py"  # ServerArgs and its start-up handlers
FORWARD_BATCH_FILE = "sglang/srt/model_executor/forward_batch_info.py"  # ForwardMode, ForwardBatch
ATTENTION_REGISTRY_FILE = "sglang/srt/layers/attention/attention_registry.py"  # backend name -> class
SPEC_REGISTRY_MODULE = "sglang.srt.speculative.spec_registry"  # 0.5.16+: algorithm name -> worker, input
MODEL_RUNNER_MODULE = "sglang.srt.model_executor.model_runner"  # ModelRunner
MODEL_EXECUTOR_DIR = "sglang/srt/model_executor/"  # the runners, the CUDA-graph runners among them
MODEL_RUNNERS_DIR = MODEL_EXECUTOR_DIR + "runner/"  # 0.5.16+: the runners, one module each
MODEL_CONFIG_MODULE = "sglang.srt.configs.model_config"  # ModelConfig, AttentionArch
RADIX_ATTENTION_MODULE = "sglang.srt.layers.radix_attention"  # RadixAttention, AttentionType
FP4_KV_CACHE_MODULE = "sglang.srt.layers.quantization.fp4_kv_cache_quant_method"  # KVCacheAttentionAccessKind
TRITON_BACKEND_FILE = "sglang/srt/layers/attention/triton_backend.py"  # the backend smoke runs by default
# Triton's extend kernel module (``_get_block_sizes_for_extend_attention``): newer releases, then older.
EXTEND_ATTENTION_MODULES = ("sglang.kernels.ops.attention.extend_attention",
                            "sglang.srt.layers.attention.triton_ops.extend_attention")
ARG_CHOICES_FILE = "sglang/srt/arg_groups/choices.py"  # 0.5.23: the flags' choices, out of server_args.py
SERVER_ARGS_CONFIG_PARSER_FILE = "sglang/srt/utils/server_args_config_parser.py"  # --config's YAML merge

# ----------------------------------------------------------------------------- the forward mode (also above)
FORWARD_BATCH_CLASS = "ForwardBatch"
# The KV allocator of a static, page-size-1 pool (mem_cache/allocator.py, 0.5.17+ allocator/token.py)
TOKEN_ALLOCATOR_CLASS = "TokenToKVPoolAllocator"
# What a backend is handed at construction: the runner and its model's config (model_executor/, configs/)
MODEL_RUNNER_CLASS = "ModelRunner"
MODEL_CONFIG_CLASS = "ModelConfig"
# How a worker builds its model's ModelConfig (``ModelConfig.from_server_args(server_args, model_path=...,
# is_draft_model=...)``: tp_worker.py in every release, 0.5.10 :326-339), and what it decides there: the
# attention architecture (``self.attention_arch = AttentionArch.MLA``, 0.5.10 model_config.py:436-560),
# which the runner turns into ``use_mla_backend`` and the registry into a backend's MLA module (0.5.10
# model_runner.py:344, attention_registry.py:27-41).
MODEL_CONFIG_FACTORY = "from_server_args"
ATTENTION_ARCH_CLASS = "AttentionArch"
ATTENTION_ARCH_ATTR = "attention_arch"
MLA_ARCH = "MLA"
# What a speculative worker reaches its target model through: a worker's ``model_runner``, the runner's
# ``attn_backend`` and ``server_args`` (ModelRunner's and the workers' attributes), read when smoke
# evaluates the worker's verify-input call (``resolve_..._capability(self.target_worker.model_runner.attn_backend)``).
MODEL_RUNNER_ATTR = "model_runner"
ATTN_BACKEND_ATTR = "attn_backend"
SERVER_ARGS_ATTR = "server_args"
# The draft worker's method the scheduler hands each batch to: where the launch's step starts.
DRAFT_WORKER_ENTRY = "forward_batch_generation"
IS_TARGET_VERIFY = "is_target_verify"  # ForwardMode's predicate for TARGET_VERIFY
# Functions whose whole body is the verify path (``init_forward_metadata_..._target_verify``).
VERIFY_FUNCTION_MARKERS = ("target_verify",)
# Words that mark code which can start a verify path: the member and the function marker.
VERIFY_MARKERS = (*VERIFY_FUNCTION_MARKERS, TARGET_VERIFY)

# ----------------------------------------------------------------------------- the widths
# C: the start-up width (ServerArgs' field, and the attribute backends copy it to).
SPECULATIVE_NUM_DRAFT_TOKENS = "speculative_num_draft_tokens"
SPECULATIVE_ALGORITHM = "speculative_algorithm"  # ServerArgs' --speculative-algorithm field
SPECULATIVE_PREFIX = "speculative_"  # ServerArgs' speculative fields (algorithm, C, a fork's budget, ...)
C_SOURCE_ATTRS = frozenset({SPECULATIVE_NUM_DRAFT_TOKENS})
# W: the verify input's per-step width fields, newest first (what the guard and smoke read W from).
NUM_TOKENS_PER_REQ = "num_tokens_per_req"
DRAFT_TOKEN_NUM = "draft_token_num"
WIDTH_FIELDS = (NUM_TOKENS_PER_REQ, DRAFT_TOKEN_NUM)
PER_STEP_ATTRS = frozenset(WIDTH_FIELDS)
SPEC_INFO_FIELD = "spec_info"  # the forward batch's verify input
# What a verify input says it is (SpecInput's field, a SpecInputType member; speculative/spec_info.py).
SPEC_INPUT_TYPE_FIELD = "spec_input_type"
SPEC_INPUT_TYPE_CLASS = "SpecInputType"
# What makes a class a verify input: the worker calls this method of it before the verify step
# (``verify_input.prepare_for_verify(batch, page_size)``, every verify input of every release).
PREPARE_FOR_VERIFY = "prepare_for_verify"

# ----------------------------------------------------------------------------- the backends' entry points
# An attention backend's metadata entry points: the eager one, the CUDA-graph pair of older releases,
# the out-/in-graph pair of newer ones (the base class calls those eagerly too), and the graph state.
INIT_FORWARD_METADATA = "init_forward_metadata"
CAPTURE_CUDA_GRAPH = "init_forward_metadata_capture_cuda_graph"
REPLAY_CUDA_GRAPH = "init_forward_metadata_replay_cuda_graph"
OUT_GRAPH = "init_forward_metadata_out_graph"
IN_GRAPH = "init_forward_metadata_in_graph"
INIT_CUDA_GRAPH_STATE = "init_cuda_graph_state"
EAGER_ENTRY_POINTS = (INIT_FORWARD_METADATA,)
NEW_EAGER_ENTRY_POINTS = (OUT_GRAPH, IN_GRAPH)
GRAPH_ENTRY_POINTS = (CAPTURE_CUDA_GRAPH, REPLAY_CUDA_GRAPH, OUT_GRAPH, IN_GRAPH, INIT_CUDA_GRAPH_STATE)
FORWARD_EXTEND = "forward_extend"
FORWARD_METHODS = (FORWARD_EXTEND, "forward", "forward_decode")

# ----------------------------------------------------------------------------- the algorithms
# --speculative-algorithm values ddcheck knows (upstream's and the forks'), and families of them.
DDTREE = "DDTREE"
DFLASH = "DFLASH"
NGRAM = "NGRAM"
EAGLE = "EAGLE"  # upstream's tree verify: what smoke builds a backend for where no drafter of the tree builds W
EAGLE_FAMILY = frozenset({EAGLE, "EAGLE3", "STANDALONE", "FROZEN_KV_MTP"})  # W = C: draft-token count
BLOCK_ALGORITHMS = frozenset({DFLASH, DDTREE})  # W from a block size or a budget
ALGORITHMS = frozenset({*EAGLE_FAMILY, *BLOCK_ALGORITHMS, NGRAM, "NEXTN", "DSPARK", "UNO"})
# A word in an attention-registry function's name -> the algorithms that function serves.
REGISTRY_FUNCTION_HINTS = {"ngram": frozenset({NGRAM}), "eagle": EAGLE_FAMILY, "dflash": frozenset({DFLASH}),
                           "dspark": frozenset({"DSPARK"}), "ddtree": frozenset({DDTREE}),
                           "standalone": frozenset({"STANDALONE"}), "uno": frozenset({"UNO"})}

# ----------------------------------------------------------------------------- the start-up code
# ServerArgs' speculative start-up handler: a module function in some trees, a method in others.
HANDLER_NAMES = ("handle_speculative_decoding",)
HANDLER_METHOD_NAMES = ("_handle_speculative_decoding",)
# Functions through which the tree's code reads the server arguments.
# ``get_spec()`` (0.5.23 runtime_context.py:1330) is the server arguments' speculative group, fields named alike.
SERVER_ARGS_GETTERS = ("get_server_args", "get_global_server_args", "get_spec")

# ----------------------------------------------------------------------------- the attention backends chosen at start-up
# ServerArgs' backend fields: left None by a launch, the start-up code picks them (``_get_default_attn_backend``
# in ServerArgs, 0.5.x; ``get_default_attn_backend`` in arg_groups/model_override_base.py, 0.5.23) before the
# speculative handler runs. The draft's field is the speculative one.
ATTENTION_BACKEND = "attention_backend"
PREFILL_ATTENTION_BACKEND = "prefill_attention_backend"
DECODE_ATTENTION_BACKEND = "decode_attention_backend"
DRAFT_ATTENTION_BACKEND = "speculative_draft_attention_backend"
ATTENTION_BACKEND_FIELDS = (ATTENTION_BACKEND, PREFILL_ATTENTION_BACKEND, DECODE_ATTENTION_BACKEND,
                            DRAFT_ATTENTION_BACKEND)
# Where 0.5.16+ stashes start-up decisions (``(source, {field: value})`` entries) before it applies them.
RESOLVED_OVERRIDES = "_resolved_overrides"

# ----------------------------------------------------------------------------- ServerArgs' fields ddcheck reads
# What config reads of a launch's values and smoke hands the tree's ServerArgs (each a field of
# sglang/srt/server_args.py's ServerArgs; tests/tree/test_names.py finds any of its fields spelled elsewhere).
CUDA_GRAPH_BACKEND_DECODE = "cuda_graph_backend_decode"
CUDA_GRAPH_BS_DECODE = "cuda_graph_bs_decode"
CUDA_GRAPH_CONFIG = "cuda_graph_config"
CUDA_GRAPH_MAX_BS_DECODE = "cuda_graph_max_bs_decode"
DISABLE_CUDA_GRAPH = "disable_cuda_graph"
DISABLE_DECODE_CUDA_GRAPH = "disable_decode_cuda_graph"
DP_SIZE = "dp_size"
ENABLE_DP_ATTENTION = "enable_dp_attention"
ENABLE_MULTI_LAYER_EAGLE = "enable_multi_layer_eagle"
KV_CACHE_DTYPE = "kv_cache_dtype"
MAX_RUNNING_REQUESTS = "max_running_requests"
MODEL_PATH = "model_path"
MOE_DENSE_TP_SIZE = "moe_dense_tp_size"
PAGE_SIZE = "page_size"
PP_SIZE = "pp_size"
SPECULATIVE_ATTENTION_MODE = "speculative_attention_mode"
SPECULATIVE_DDTREE_BUDGET = "speculative_ddtree_budget"
SPECULATIVE_DFLASH_BLOCK_SIZE = "speculative_dflash_block_size"
SPECULATIVE_DSPARK_BLOCK_SIZE = "speculative_dspark_block_size"
SPECULATIVE_EAGLE_TOPK = "speculative_eagle_topk"
SPECULATIVE_NUM_STEPS = "speculative_num_steps"
TP_SIZE = "tp_size"
TRITON_ATTENTION_NUM_KV_SPLITS = "triton_attention_num_kv_splits"

# ----------------------------------------------------------------------------- the models a launch names
# ServerArgs' model fields and the revision fields SGLang hands the hub reader with them: the target's,
# the draft's. A hub id there is read from the Hugging Face cache (``ddcheck.config.hub``).
SPECULATIVE_DRAFT_MODEL_PATH = "speculative_draft_model_path"
MODEL_FIELDS = ((MODEL_PATH, "revision"), (SPECULATIVE_DRAFT_MODEL_PATH, "speculative_draft_model_revision"))

# ----------------------------------------------------------------------------- what smoke hands a backend
# The objects a backend is handed are the tree's own classes (or recordings of them, ddcheck.smoke.handed);
# these are the few fields the harness binds its own values to, every other one the tree's class answers.
# ForwardBatch's fields (model_executor/forward_batch_info.py) that carry the batch:
FORWARD_MODE_FIELD = "forward_mode"
BATCH_SIZE = "batch_size"
INPUT_IDS = "input_ids"
REQ_POOL_INDICES = "req_pool_indices"
SEQ_LENS = "seq_lens"
SEQ_LENS_CPU = "seq_lens_cpu"
SEQ_LENS_SUM = "seq_lens_sum"
OUT_CACHE_LOC = "out_cache_loc"
POSITIONS = "positions"
ENCODER_LENS = "encoder_lens"  # (None: a decoder-only model; the old graph entry points take it by this name)
CAPTURE_HIDDEN_MODE = "capture_hidden_mode"  # ForwardBatch's and the verify inputs'
# 0.5.19+: the iteration's KV-location plan, which ForwardBatch.init_new builds from the runner's translator
# (0.5.23 forward_batch_info.py:1140-1142) and the backends' page tables read the request slots of
# (kv_index_translator.py:512): a plan like the tree's KVLocPlan over the batch's slots and lengths.
KV_LOC_PLAN = "kv_loc_plan"
KV_LOC_PLAN_CLASS = "KVLocPlan"
SPEC_ALGORITHM_FIELD = "spec_algorithm"  # the forward batch's and the model runner's algorithm member
# The pools, as the runner and (older releases) the forward batch hold them (model_runner.py,
# forward_batch_info.py): the request-to-token table, the KV cache, the KV allocator.
REQ_TO_TOKEN_POOL = "req_to_token_pool"
REQ_TO_TOKEN = "req_to_token"  # ReqToTokenPool's table (mem_cache/memory_pool.py)
TOKEN_TO_KV_POOL = "token_to_kv_pool"
TOKEN_TO_KV_POOL_ALLOCATOR = "token_to_kv_pool_allocator"
# RadixAttention (layers/radix_attention.py): the layer a backend runs, built by its own __init__ from the
# batch's shape through these parameters.
RADIX_ATTENTION_CLASS = "RadixAttention"
LAYER_NUM_HEADS = "num_heads"
LAYER_NUM_KV_HEADS = "num_kv_heads"
LAYER_HEAD_DIM = "head_dim"
LAYER_SCALING = "scaling"
LAYER_ID = "layer_id"
# The pools' classes (mem_cache/memory_pool.py; the allocator above) and the values their __init__ takes
# that the harness owns (KVCache.__init__, ReqToTokenPool.__init__, the allocators' __init__).
MHA_KV_POOL_CLASS = "MHATokenToKVPool"
REQ_TO_TOKEN_POOL_CLASS = "ReqToTokenPool"
POOL_SIZE = "size"
POOL_DTYPE = "dtype"
POOL_LAYER_NUM = "layer_num"
POOL_DEVICE = "device"
POOL_MAX_CONTEXT_LEN = "max_context_len"
ALLOCATOR_KVCACHE = "kvcache"
# The KV cache's storage: a backend reads and writes the cache through these methods of the pool
# (MHATokenToKVPool, memory_pool.py:2196-2250 in 0.5.16). The harness owns that storage (the batch's
# buffers, which its reference reads), and the tree's writer runs a kernel that cannot run here
# (``_set_kv_buffer_impl``), so these are the harness's.
GET_KEY_BUFFER = "get_key_buffer"
GET_VALUE_BUFFER = "get_value_buffer"
GET_KV_BUFFER = "get_kv_buffer"
SET_KV_BUFFER = "set_kv_buffer"
# The model runner's attributes the harness binds (ModelRunner.__init__ and init_memory_pool, model_runner.py):
# its launch's server args (SERVER_ARGS_ATTR), its model's config, its device, and the pools above.
MODEL_CONFIG_ATTR = "model_config"
DEVICE_ATTR = "device"
GPU_ID = "gpu_id"
# ...and those its start-up sets by calls that do not run here, from what the harness owns: the page size
# (PAGE_SIZE; 0.5.23 model_runner.py:399 reads the runtime's schedule), the model's and the KV cache's
# dtypes (MODEL_DTYPE, KV_CACHE_DTYPE; set by load_model, :1362, and configure_kv_cache_dtype, :1553) and
# the batch capacity (MAX_RUNNING_REQUESTS; sized from the GPU's memory, :986); and the attention window,
# None: the smoke model (a Llama) has none, and the tree's load_model asks the loaded model for it (0.5.10
# model_runner.py:1223-1233; 0.5.23 :1353), which is not loaded here (a stand-in answers ``is not None``).
SLIDING_WINDOW_SIZE = "sliding_window_size"
# A one-process world: the runner's parallel parameters (``tp_size``, ``pp_rank``, ... of ModelRunner.__init__,
# 0.5.10) and the fields of its parallel state (``ps``, the tree's ParallelState, 0.5.16+
# distributed/parallel_state_wrapper.py:6) are sizes of 1 and ranks of 0, by these suffixes.
PARALLEL_STATE_ATTR = "ps"
PARALLEL_STATE_CLASS = "ParallelState"
PARALLEL_SIZE_SUFFIX = "_size"
PARALLEL_RANK_SUFFIX = "_rank"
# The attention backends the runner resolved from the launch (init_attention_backends, which builds the
# backends: 0.5.23 model_runner.py:1120-1121, 0.5.16 :835-836): the launch's, as the server args hold them.
RUNNER_ATTENTION_BACKENDS = {"prefill_attention_backend_str": PREFILL_ATTENTION_BACKEND,
                             "decode_attention_backend_str": DECODE_ATTENTION_BACKEND}
# The target model: none is loaded here (load_model would load it). A backend walks its torch modules for
# their attention kinds (0.5.23 trtllm_mha_backend.py:325-328): it has none; a worker checks its parts
# (HaiyuZhou's ddtree_worker.py:97-103, ``lm_head``): recorded stand-ins, as for anything else not here.
MODEL_ATTR = "model"
# ModelConfig's values the tree computes by calls that do not run here (configs/model_config.py: the
# dtype from ``_get_and_verify_dtype``, the context length from ``get_context_length``): the smoke
# model's; its config.json is ``hf_config``/``hf_text_config``, the rest derived by the tree's own code.
HF_CONFIG = "hf_config"
HF_TEXT_CONFIG = "hf_text_config"
MODEL_DTYPE = "dtype"
CONTEXT_LEN = "context_len"
GET_V_HEAD_DIM = "get_v_head_dim"

# Words above that are not SGLang's alone: flashinfer's plan parameters, a Hugging Face config.json's keys,
# torch's keywords use them too, so a literal of one elsewhere is not a second definition (tests/tree/test_names.py).
SHARED_WORDS = frozenset({LAYER_NUM_HEADS, LAYER_NUM_KV_HEADS, LAYER_HEAD_DIM, POOL_SIZE, POOL_DTYPE, POOL_DEVICE})
MODEL_RUNNER_FILE = "sglang/srt/model_executor/model_runner.py"  # ModelRunner (tests/tree/test_names.py reads it)
