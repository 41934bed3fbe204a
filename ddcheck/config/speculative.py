"""The speculative settings of a launch: the flags as given, then as the tree's own start-up code
leaves them (``ddcheck.config.treerun``) and W as the tree's own worker builds the verify input.

Two widths matter: C (``speculative_num_draft_tokens`` after the tree's start-up code, fixed at
start-up, what fixed-width backends lay out the verify batch with) and W (the per-step width of the
verify input the tree's worker builds, ``draft_token_num=...`` evaluated for the launch's values and
environment; a range where the worker decides it per step). Nothing here is derived from a table of
algorithms.
"""

from __future__ import annotations

import json

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from ddcheck.tree.names import (ATTENTION_BACKEND, CUDA_GRAPH_BACKEND_DECODE, CUDA_GRAPH_BS_DECODE,
                                  CUDA_GRAPH_CONFIG, CUDA_GRAPH_MAX_BS_DECODE, DECODE_ATTENTION_BACKEND,
                                  DISABLE_CUDA_GRAPH, DISABLE_DECODE_CUDA_GRAPH, DRAFT_ATTENTION_BACKEND,
                                  EAGLE_FAMILY, ENABLE_DP_ATTENTION, ENABLE_MULTI_LAYER_EAGLE,
                                  MAX_RUNNING_REQUESTS, PAGE_SIZE, PREFILL_ATTENTION_BACKEND,
                                  SPECULATIVE_ALGORITHM, SPECULATIVE_ATTENTION_MODE,
                                  SPECULATIVE_DDTREE_BUDGET, SPECULATIVE_DFLASH_BLOCK_SIZE,
                                  SPECULATIVE_DSPARK_BLOCK_SIZE, SPECULATIVE_EAGLE_TOPK,
                                  SPECULATIVE_NUM_DRAFT_TOKENS, SPECULATIVE_NUM_STEPS)

if TYPE_CHECKING:  # the flag table is the tree's, read in the worker: not loaded to read a kept report
    from ddcheck.config.flags import FlagTable


class VerifySite(BaseModel):
    """A place the tree's worker builds a verify input, as the launch's step meets it."""

    cls: str
    at: str  # path:line
    reached: bool | None  # True: every test on the way holds; None: on some steps; False: not for this launch
    why: str = ""  # the tests that say so, and the calls from the worker's entry point
    width: int | None = None
    width_min: int | None = None
    width_max: int | None = None
    width_expr: str = ""
    width_from: str = ""  # where the value W reads is set
    per_step: str | None = None  # W's expression where the worker computes it each step
    fields: list[str] = Field(default_factory=list, exclude=True)
    input_type: str | None = Field(default=None, exclude=True)
    sets: list[str] = Field(default_factory=list, exclude=True)


class SpecSettings(BaseModel):
    release: str
    algorithm: str | None = None  # after SGLang's alias resolution (NEXTN -> EAGLE)
    algorithm_requested: str | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None  # C
    dflash_block_size: int | None = None
    ddtree_budget: int | None = None
    verify_width: int | None = None  # W (per step: its greatest value), from the tree's worker
    verify_width_min: int | None = None  # W's least value (== verify_width unless decided per step)
    verify_width_expr: str | None = None  # the worker's ``draft_token_num=`` expression
    worker_note: str = Field(default="", exclude=True)  # why no verify input was read
    verify_input: str | None = None  # the verify-input class the tree's worker builds (when known)
    verify_input_fields: list[str] = Field(default_factory=list)
    verify_input_type: str | None = None  # the SpecInputType member it sets (DDTREE_VERIFY)
    verify_input_kinds: list[str] = Field(default_factory=list, exclude=True)  # its class and bases, by name
    verify_input_at: str | None = None  # where the tree's worker builds it
    # Every verify-input site the launch's step meets (reached or not, and why); the fields above are the
    # site being judged (each reached one is judged in turn).
    verify_sites: list[VerifySite] = Field(default_factory=list)
    step_entry: str | None = None  # where the worker's step starts (the method the scheduler calls)
    # The worker computes W each step (``draft_token_num=verify_token_num``): the expression. W above is
    # then its bound (budget + 1), and any step may verify fewer tokens than C even when W == C.
    verify_width_per_step: str | None = None
    capture_width: int | None = None  # tokens per request of the target-verify CUDA graphs (when evaluated)
    verify_input_sets: list[str] = Field(default_factory=list)  # fields the worker sets on it
    values: dict = Field(default_factory=dict, exclude=True)  # server_args after the tree's start-up code
    capture_at: str | None = None
    replay_gate_at: str | None = None  # where the graph runner sends a batch of another width to eager
    resolved_by: str = "flags"  # "tree": the target's own start-up code ran; "flags": only the flags as given
    auto_params: bool = False  # EAGLE steps/topk/draft tokens picked from the model at start-up
    attention_backend: str | None = None
    prefill_attention_backend: str | None = None
    decode_attention_backend: str | None = None
    draft_attention_backend: str | None = None
    # The draft worker's model uses MLA, as the tree's ModelConfig decides from its config (None: not
    # decided here), and the line that set its attention_arch (:mod:`ddcheck.config.architecture`).
    draft_mla: bool | None = None
    draft_attention_arch_at: str | None = None
    speculative_attention_mode: str = "prefill"
    verify_backend: str | None = None  # backend on the target-verify path; None: chosen at start-up
    page_size: int = 1
    cuda_graph: bool = True
    cuda_graph_max_bs: int | None = None
    cuda_graph_bs: list[int] | None = None
    enable_dp_attention: bool = False
    max_running_requests: int | None = None
    enable_multi_layer_eagle: bool = False
    device: str | None = None
    env: dict[str, str] = Field(default_factory=dict, description="the launch's environment as the tree's code saw "
                                "it: NAME=value words in front of the launcher, and exported variables it read")
    raw: dict = Field(default_factory=dict, description="speculative values as given on the command line")

    @property
    def tree_verify(self) -> bool:
        """A tree (not a chain) is verified: DDTREE, topk > 1, or a worker that hands the verify
        input its own mask."""
        return self.algorithm == "DDTREE" or (self.eagle_topk or 1) > 1 or "custom_mask" in self.verify_input_sets

    @property
    def backends(self) -> list[str]:
        """Every attention backend named or implied, verify path first."""
        names = [self.verify_backend, self.attention_backend, self.prefill_attention_backend,
                 self.decode_attention_backend]
        return [n for n in dict.fromkeys(names) if n]


def _int(v):
    try:
        return None if v is None else int(v)
    except (TypeError, ValueError):
        return None


def _get(ns: dict, *names):
    for n in names:
        if ns.get(n) is not None:
            return ns[n]
    return None


def flags_as_given(ns: dict, table: FlagTable) -> SpecSettings:
    """The launch's settings as its flags give them, before any start-up code: nothing is derived
    here (no alias, no default C, no W). What the tree's start-up code and worker make of them
    replaces these (``resolved_by = "tree"``); where they cannot run, the verdict is not reached."""
    keys = (SPECULATIVE_ALGORITHM, SPECULATIVE_NUM_STEPS, SPECULATIVE_EAGLE_TOPK, SPECULATIVE_NUM_DRAFT_TOKENS,
            SPECULATIVE_DFLASH_BLOCK_SIZE, SPECULATIVE_DDTREE_BUDGET, SPECULATIVE_DSPARK_BLOCK_SIZE)
    raw = {k: ns.get(k) for k in keys if ns.get(k) is not None}
    algo_req = ns.get(SPECULATIVE_ALGORITHM)
    algo = algo_req.upper() if isinstance(algo_req, str) else None
    steps, topk, draft = (_int(ns.get(SPECULATIVE_NUM_STEPS)), _int(ns.get(SPECULATIVE_EAGLE_TOPK)),
                          _int(ns.get(SPECULATIVE_NUM_DRAFT_TOKENS)))
    mode = ns.get(SPECULATIVE_ATTENTION_MODE) or "prefill"
    attn = ns.get(ATTENTION_BACKEND)
    prefill, decode = ns.get(PREFILL_ATTENTION_BACKEND), ns.get(DECODE_ATTENTION_BACKEND)
    verify = (prefill if mode == "prefill" else decode) or attn
    return SpecSettings(
        release=table.release, algorithm=algo, algorithm_requested=algo_req, num_steps=steps, eagle_topk=topk,
        num_draft_tokens=draft, dflash_block_size=_int(ns.get(SPECULATIVE_DFLASH_BLOCK_SIZE)),
        ddtree_budget=_int(ns.get(SPECULATIVE_DDTREE_BUDGET)),
        auto_params=algo in EAGLE_FAMILY and steps is None and topk is None and draft is None,
        attention_backend=attn, prefill_attention_backend=prefill, decode_attention_backend=decode,
        draft_attention_backend=ns.get(DRAFT_ATTENTION_BACKEND), speculative_attention_mode=mode,
        verify_backend=verify, page_size=_int(ns.get(PAGE_SIZE)) or 1, cuda_graph=_cuda_graph_on(ns),
        cuda_graph_max_bs=_int(_get(ns, "cuda_graph_max_bs", CUDA_GRAPH_MAX_BS_DECODE)),
        cuda_graph_bs=_get(ns, "cuda_graph_bs", CUDA_GRAPH_BS_DECODE),
        enable_dp_attention=bool(ns.get(ENABLE_DP_ATTENTION)),
        max_running_requests=_int(ns.get(MAX_RUNNING_REQUESTS)),
        enable_multi_layer_eagle=bool(ns.get(ENABLE_MULTI_LAYER_EAGLE)), device=ns.get("device"), raw=raw)


def _cuda_graph_on(ns: dict) -> bool:
    """Decode (and so target-verify) CUDA graphs, across the legacy and per-phase flags."""
    if ns.get(DISABLE_CUDA_GRAPH) or ns.get(DISABLE_DECODE_CUDA_GRAPH):
        return False
    if ns.get(CUDA_GRAPH_BACKEND_DECODE) == "disabled":
        return False
    cfg = ns.get(CUDA_GRAPH_CONFIG)
    if isinstance(cfg, str):
        try:
            cfg = json.loads(cfg)
        except ValueError:
            cfg = None
    if isinstance(cfg, dict) and isinstance(cfg.get("decode"), dict) and cfg["decode"].get("backend") == "disabled":
        return False
    return True
