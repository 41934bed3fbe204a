"""Every SGLang name ddcheck relies on, defined once.

A renamed SGLang module, class or method is one edit here. Names are grouped by what ddcheck does
with them; each comment says where SGLang defines the name.
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
SERVER_ARGS_SETTER = r"set_(global_)?server_args(_[a-z_]*)?(_dict)?"

# What a model runner's start-up calls to set a single-GPU process's parallel state (tensor, pipeline
# and attention groups; ModelRunner.init_torch_distributed in every release), in order. The smoke
# harness calls them, by parameter name, for a world of one process on gloo.
SINGLE_PROCESS_STARTUP = (
    ("sglang.srt.distributed.parallel_state", "init_distributed_environment"),
    ("sglang.srt.distributed.parallel_state", "initialize_model_parallel"),
    ("sglang.srt.layers.dp_attention", "initialize_dp_attention"),
)
