"""One function per launch check. Each returns :class:`ConfigFinding` s with an id, a consequence
(REJECT: SGLang refuses at start-up; CRASH: dies later, after weights load or at the first
decode/capture; CORRUPT: runs and returns wrong tokens; PERF: runs, but not as asked; PARSE:
argparse exits 2) and a fix.

Start-up rules are gated on the guard being present in the *target* sources (found with ``ast``),
so a check fires exactly on the releases that would apply it, with the guard's file:line as evidence.
"""

from __future__ import annotations

import dataclasses

from ddcheck.config import target as T
from ddcheck.config.evidence import scan_errors, scan_findings, verify_findings_by_backend
from ddcheck.config.inputs import input_value, mask_reads, resolver_gives_w
from ddcheck.config.paths import Launch, batch_fields, finding_reach, launch_value
from ddcheck.config.speculative import EAGLE_FAMILY, SpecSettings
from ddcheck.config.target import Evidence
from ddcheck.config.verdicts import ConfigFinding, Consequence, _f  # noqa: F401 - the checks' findings
from ddcheck.tree.sources import SourceTree
from ddcheck.tree.evaluate import World
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.names import SPECULATIVE_DFLASH_BLOCK_SIZE, SPECULATIVE_EAGLE_TOPK, SPECULATIVE_NUM_DRAFT_TOKENS, SPECULATIVE_NUM_STEPS


def _guard(tree, pattern, algo):
    g = T.guard_for(tree, pattern, algo)
    if g is None and algo == "DDTREE":  # DDTREE is handled by the DFLASH hooks in the PRs
        g = T.guard_for(tree, pattern, "DFLASH")
    return g


# ---------------------------------------------------------------------------------------------
# verify width W vs start-up width C
# ---------------------------------------------------------------------------------------------

ALTERNATIVES = ("flashinfer", "fa3", "triton", "flex_attention", "torch_native")  # general-purpose MHA backends


def check_verify_width(s: SpecSettings, tree: SourceTree) -> list[ConfigFinding]:
    """W != C on a backend whose verify layout is fixed at C (scan error findings) -> CORRUPT."""
    W, C = s.verify_width, s.num_draft_tokens
    if s.verify_width_per_step:
        # W's range over the step's own decisions; an end that could not be evaluated is not judged
        # (said by the report), but one end known to differ from C is enough for a finding.
        if s.algorithm is None or C is None or (W in (None, C) and s.verify_width_min in (None, C)):
            return []
    elif s.algorithm is None or W is None or C is None or W == C:
        return []
    ways_out = (f"set W = C (e.g. --speculative-ddtree-budget {C - 1})" if s.algorithm == "DDTREE"
                else "make the verify width equal --speculative-num-draft-tokens")
    differs = f"W={W} != C={C}"
    span = f"from {_end(s.verify_width_min)} to {_end(W)}"
    if s.verify_width_per_step:  # no flag pins a width the worker computes each step
        ways_out = "pick a backend whose verify path is per-step"
        differs = f"W (computed each step as `{s.verify_width_per_step}`, {span}) can differ from C={C}"
    if s.verify_backend is None:
        bad = {b: f for b, f in verify_findings_by_backend(tree, [b for b in ALTERNATIVES
                                                              if b in T.backend_files(tree)]).items() if f}
        return [_f("verify-width", Consequence.CORRUPT, level="warning",
                   message=f"verify width {differs} and the attention backend is chosen at start-up; "
                           f"common backends with a fixed-width verify layout in {s.release}: {', '.join(sorted(bad)) or 'none'}",
                   fix="pass --attention-backend explicitly (one whose verify path is per-step) and re-run")]
    found = verify_findings_by_backend(tree, [s.verify_backend]).get(s.verify_backend)
    if s.verify_backend not in T.backend_files(tree):
        return [_f("verify-width", Consequence.CORRUPT, level="warning", backend=s.verify_backend,
                   message=f"verify width {differs}; backend {s.verify_backend!r} is not in the "
                           f"{s.release} attention registry, so its verify path could not be checked")]
    found = list(found or [])
    fixed_at: set = set()  # what the findings' start-up width holds for this launch, where evaluated
    undecided = []  # (finding, the test ddcheck cannot decide for this launch)
    if s.verify_input:
        # Width resolvers (DD003): decided for the verify input this launch's worker builds.
        resolvers = [f for f in scan_findings(tree, list(T.backend_files(tree)[s.verify_backend])) if f.resolver]
        found = [f for f in found if not f.resolver]  # a resolver the scan calls DD001: decided here alike
        for f in resolvers:
            gives_w, test = resolver_gives_w(tree, f, input_value(s.verify_input, s.verify_input_fields,
                                                                  s.verify_input_type, s.verify_input_kinds))
            if gives_w is False:
                found.append(dataclasses.replace(f, message=f"{f.function} returns C for {s.verify_input}: "
                                                                 f"`{test}` does not hold for it"))
            elif gives_w is None:
                undecided.append((f, test))
    if s.values:
        # Only what this launch's path reaches (entry points, graphs on or off, its settings' branches).
        launch = Launch(values=s.values, algorithm=s.algorithm, input_cls=s.verify_input,
                        input_fields=set(s.verify_input_fields), graphs=s.cuda_graph,
                        input_type=s.verify_input_type, input_kinds=frozenset(s.verify_input_kinds),
                        world=World(TreeModules.of(tree), s.algorithm),
                        modes=TreeModules.of(tree).mode_table(), batch_fields=batch_fields(tree))
        memo: dict = {}
        value = {id(f): launch_value(tree, f, launch, memo) for f in found}
        fixed_at = set(value.values())
        if not s.verify_width_per_step:
            # the backend's start-up width may itself be W for this launch (sized for the tree drafter)
            found = [f for f in found if value[id(f)] != W]
        if s.verify_width_per_step and s.cuda_graph and s.replay_gate_at and s.capture_width is not None:
            # Graph paths replay only batches as wide as the capture (can_run): a graph-only use of a
            # start-up width equal to the captured one is right for every batch that reaches it.
            eager = dataclasses.replace(launch, graphs=False)
            eager_memo: dict = {}
            found = [f for f in found if not (value[id(f)] == s.capture_width
                                              and finding_reach(tree, f, eager, eager_memo).status == "never")]
        reaches = [(f, finding_reach(tree, f, launch, memo)) for f in found]
        found = [f for f, r in reaches if r.status == "reached"]
        undecided += [(f, r.why) for f, r in reaches if r.status == "conditional"]
    if not found and undecided:
        f, test = undecided[0]
        return [_f("verify-width", Consequence.CORRUPT, level="warning", backend=s.verify_backend,
                   message=f"{differs}: backend {s.verify_backend!r} uses C on this launch's verify path only "
                           f"where `{test}` holds ({f.function}; {len(undecided)} finding(s)), which depends on "
                           f"the model or the run, not on the flags",
                   fix=f"{ways_out}; or run `ddcheck config --smoke` / `ddcheck fix` on the target",
                   evidence=[Evidence(path=g.relpath or g.path, line=g.line, text=f"when {t}: {g.message[:120]}")
                             for g, t in undecided[:5]])]
    if not found:
        return []
    _, engine = scan_errors(tree, list(T.backend_files(tree)[s.verify_backend]))
    cands = [b for b in ALTERNATIVES if b != s.verify_backend and b in T.backend_files(tree)]
    ok = [b for b, fs in verify_findings_by_backend(tree, cands).items()
          if not fs and (not s.tree_verify or T.mask_honoured(tree, b)[0])]
    through = f" (through {s.verify_input})" if s.verify_input else ""
    value = next(iter(fixed_at)) if len(fixed_at) == 1 else None
    laid_out = f"a width fixed at start-up ({value} for this launch)" \
        if isinstance(value, int) and not isinstance(value, bool) and value != C else "C"
    verifies = (f"verifies W tokens per request{through}, computed each step (`{s.verify_width_per_step}`, "
                f"{span}), and C=--speculative-num-draft-tokens={C}" if s.verify_width_per_step else
                f"verifies W={W} tokens per request{through} but C=--speculative-num-draft-tokens={C}")
    return [_f("verify-width", Consequence.CORRUPT, backend=s.verify_backend,
               message=f"{s.algorithm} {verifies}; "
                       f"backend {s.verify_backend!r} lays out the target-verify batch with {laid_out} "
                       f"({len(found)} {engine} finding(s)), so masks/offsets are wrong "
                       + (f"on every step whose W differs from {'it' if laid_out != 'C' else 'C'}"
                          if s.verify_width_per_step else "for every request"),
               fix=("" if s.verify_width_per_step else f"{ways_out}; or ")
                   + f"pick a backend whose verify path is per-step "
                   f"({', '.join(ok[:6]) or 'none in this release'}); or run `ddcheck fix` on the target",
               evidence=[Evidence(path=f.relpath or f.path, line=f.line, text=f.message[:160]) for f in found[:5]])]


def _end(v: int | None) -> str:
    return "?" if v is None else str(v)


def check_scan_layout(s: SpecSettings, tree: SourceTree) -> list[ConfigFinding]:
    """Where the tree's start-up code could not run: what the scan says of the backend the launch
    names, whatever W turns out to be (a layout fixed at C is wrong at every W != C)."""
    b = s.verify_backend
    if s.algorithm is None or b is None or b not in T.backend_files(tree):
        return []
    found = verify_findings_by_backend(tree, [b]).get(b) or []
    if not found:
        return []
    _, engine = scan_errors(tree, list(T.backend_files(tree)[b]))
    return [_f("verify-width", Consequence.CORRUPT, level="warning", backend=b,
               message=f"backend {b!r} lays out the target-verify batch with C=--speculative-num-draft-tokens "
                       f"({len(found)} {engine} finding(s)): wrong for every step whose verify width W differs "
                       f"from C; W and C for this launch could not be judged here (the tree's code did not run)",
               fix="let the tree's start-up code run (see why it could not), or pick a backend whose verify path "
                   "is per-step, or run `ddcheck fix` on the target",
               evidence=[Evidence(path=f.relpath or f.path, line=f.line, text=f.message[:160]) for f in found[:5]])]


def _evidence_at(where: str, text: str) -> Evidence:
    path, _, line = where.rpartition(":")
    return Evidence(path=path, line=int(line) if line.isdigit() else 0, text=text)


def check_verify_graph(s: SpecSettings, tree: SourceTree) -> list[ConfigFinding]:
    """CUDA graphs on and W != the width the verify graph was captured with: a crash at replay, or,
    where the runner's ``can_run`` checks the batch's width, verify running eagerly."""
    W, C = s.verify_width, s.num_draft_tokens
    if not s.cuda_graph or s.algorithm is None or C is None or (W is None and not s.verify_width_per_step):
        return []
    if s.capture_width is not None and s.verify_width_per_step:
        # Every step verifies its own width, at most W: those narrower than the capture replay it?
        cap = _evidence_at(s.capture_at or ":0", f"captures {s.capture_width} tokens per request")
        if s.replay_gate_at:
            return []  # narrower steps run eagerly; the capture-width steps replay
        return [_f("verify-graph-width", Consequence.CRASH,
                   message=f"CUDA graphs are on and capture the verify graph at {s.capture_width} tokens per request, "
                           f"but the worker computes W each step (`{s.verify_width_per_step}`, from "
                           f"{_end(s.verify_width_min)} to {_end(W)}) and the "
                           f"graph runner's can_run does not compare a batch's width with the captured one: a "
                           f"narrower step replays a graph laid out for {s.capture_width}",
                   fix="disable decode CUDA graphs (--disable-cuda-graph), or pad every step to the captured width",
                   evidence=[cap])]
    if W is None or W == C and s.capture_width in (None, W):
        return []
    if s.capture_width is not None:
        # The tree's graph runner, evaluated for this launch.
        at_w = s.capture_width == W
        path, _, line = (s.capture_at or ":0").rpartition(":")
        ev = Evidence(path=path, line=int(line), text=f"captures {s.capture_width} tokens per request")
        C = s.capture_width
    else:
        source = "ddtree" if s.algorithm == "DDTREE" else s.algorithm.lower()
        at_w, ev = T.verify_capture(tree, source)
    if at_w:
        return []
    if s.capture_width is not None and s.replay_gate_at:
        return [_f("verify-graph-width", Consequence.PERF, level="warning",
                   message=f"CUDA graphs capture the verify graph at {C} tokens per request and {s.algorithm} "
                           f"verifies W={W}: the graph runner refuses to replay a batch of another width, so "
                           f"every verify step runs eagerly (slow, not wrong)",
                   fix="make the captured width equal W (for DDTREE: the budget that gives W == C), or accept "
                       "eager verify", evidence=[ev, _evidence_at(s.replay_gate_at, "can_run compares the batch's "
                                                                  "width with the captured one")])]
    return [_f("verify-graph-width", Consequence.CRASH,
               message=f"CUDA graphs are on and the target captures the verify graph at C={C} tokens per request, "
                       f"but {s.algorithm} verifies W={W}: capture/replay fails (shape mismatch) at start-up",
               fix="disable decode CUDA graphs (--disable-cuda-graph or --cuda-graph-backend-decode disabled), "
                   "make W == C, or use a target that captures the verify graph at W", evidence=[ev])]


def check_tree_mask(s: SpecSettings, tree: SourceTree) -> list[ConfigFinding]:
    """Tree verify on a backend path that never reads the custom mask -> CORRUPT."""
    if not s.tree_verify or not s.verify_backend:
        return []
    if s.algorithm in EAGLE_FAMILY and s.eagle_topk == 1:
        return []  # an EAGLE chain: its mask is causal, so a backend attending it as a chain is right
    honoured, files = T.mask_honoured(tree, s.verify_backend)
    if honoured and s.values and s.verify_backend in T.backend_files(tree):
        # The backend reads the mask somewhere; does it on a path these settings take?
        reachable, why = mask_reads(tree, list(T.backend_files(tree)[s.verify_backend]), s.values)
        if reachable is False:
            return [_f("tree-mask", Consequence.CORRUPT, backend=s.verify_backend,
                       message=f"{s.algorithm} verifies a tree ({s.verify_input or 'tree mask'} carries its mask), but "
                               f"{s.verify_backend!r} reads spec_info.custom_mask only on paths this launch does not "
                               f"take: the tree is attended as a chain",
                       fix="use a backend that applies the tree mask for these settings (e.g. triton, flashinfer)",
                       evidence=[Evidence(path=p, line=n, text=t) for p, n, t in why])]
    if honoured is not False:
        return []
    return [_f("tree-mask", Consequence.CORRUPT, backend=s.verify_backend,
               message=f"tree verify ({'DDTREE' if s.algorithm == 'DDTREE' else f'topk={s.eagle_topk}'}) on "
                       f"{s.verify_backend!r}, whose modules never read spec_info.custom_mask: siblings attend to "
                       f"each other as if the tree were a chain",
               fix="use a backend that applies the tree mask (e.g. triton, flashinfer, fa3) or topk 1",
               evidence=[Evidence(path=p, line=1, text="no custom_mask reference") for p in files])]


# ---------------------------------------------------------------------------------------------
# EAGLE shape checks
# ---------------------------------------------------------------------------------------------

def check_eagle_params(s: SpecSettings, tree: SourceTree) -> list[ConfigFinding]:
    if s.algorithm not in EAGLE_FAMILY:
        return []
    given = {k: s.raw.get(f"speculative_{k}") for k in ("num_steps", "eagle_topk", "num_draft_tokens")}
    if all(v is None for v in given.values()) or all(v is not None for v in given.values()):
        return []
    missing = [k for k, v in given.items() if v is None]
    g = T.guard_for(tree, r"speculative_eagle_topk is None", s.algorithm)
    return [_f("eagle-params", Consequence.REJECT,
               message=f"--speculative-{'/'.join(m.replace('_', '-') for m in missing)} unset while the other "
                       f"EAGLE shape flags are set: SGLang asserts all three are set or none (auto-tuned)",
               fix="set --speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens "
                   "together, or none of them", evidence=[g.evidence if g else None])]


def check_eagle_tree_size(s: SpecSettings, tree: SourceTree) -> list[ConfigFinding]:
    """draft tokens - 1 must fit the tree: topk + (steps - 1) * topk^2 candidates."""
    if s.algorithm not in EAGLE_FAMILY or None in (s.num_steps, s.eagle_topk, s.num_draft_tokens):
        return []
    k, n, d = s.eagle_topk, s.num_steps, s.num_draft_tokens
    cap = k + (n - 1) * k * k
    if k <= 1 or d - 1 <= cap:
        return []
    return [_f("eagle-tree-size", Consequence.CRASH,
               message=f"--speculative-num-draft-tokens {d} needs {d - 1} tree nodes but steps={n}, topk={k} "
                       f"yield at most {cap}: the tree build fails at the first decode",
               fix=f"lower --speculative-num-draft-tokens to <= {cap + 1} or raise steps/topk")]


def mla_topk_guard(s: SpecSettings, tree: SourceTree) -> tuple[str, list[Evidence], bool] | None:
    """(draft backend, its topk-1 guard lines, whether every module of the backend is an MLA one) where
    the launch drafts a tree (topk > 1) on a backend whose (MLA) module refuses topk > 1; else None."""
    if (s.eagle_topk or 1) <= 1 or s.algorithm not in EAGLE_FAMILY:
        return None
    backend = s.draft_attention_backend or s.decode_attention_backend or s.attention_backend
    if not backend:
        return None
    ev = T.topk1_only(tree, backend)
    if not ev:
        return None
    files = T.backend_files(tree).get(backend, ())
    return backend, ev, all("mla" in p.rsplit("/", 1)[-1] for p in files)


def check_mla_topk(s: SpecSettings, tree: SourceTree) -> list[ConfigFinding]:
    """topk > 1 with a draft backend whose module for this draft model refuses it when the draft worker
    starts: every module of the backend is an MLA one, or the draft model uses MLA (the tree's
    ModelConfig, ``s.draft_mla``). A draft model that does not use MLA runs the backend's other module;
    one not known here is not judged (said by :func:`ddcheck.config.judge`), never a hedged finding."""
    hit = mla_topk_guard(s, tree)
    if hit is None:
        return []
    backend, ev, mla_only = hit
    if mla_only:
        said = f"topk={s.eagle_topk} with draft backend {backend!r}, whose modules only support topk 1"
    elif s.draft_mla:
        said = (f"topk={s.eagle_topk} with draft backend {backend!r} on a draft model that uses MLA (its "
                f"attention_arch, as the tree's ModelConfig sets it from the model's config): the backend's MLA "
                f"module only supports topk 1")
        if s.draft_attention_arch_at:
            ev = [*ev, _evidence_at(s.draft_attention_arch_at, "the draft model's attention_arch: MLA")]
    else:
        return []
    return [_f("mla-topk", Consequence.CRASH, level="error", backend=backend,
               message=f"{said}: the server dies when the draft worker starts, after the weights load",
               fix="use --speculative-eagle-topk 1 or another backend for the draft "
                   "(--speculative-draft-attention-backend)", evidence=ev)]


def check_multi_layer_eagle(s: SpecSettings, tree: SourceTree) -> list[ConfigFinding]:
    if not s.enable_multi_layer_eagle or None in (s.num_steps, s.num_draft_tokens):
        return []
    if s.num_draft_tokens == s.num_steps + 1:
        return []
    files = [f.relpath for f in tree.files if "multi_layer_eagle" in f.relpath]
    ev = T.text_marker(tree, r"speculative_num_draft_tokens == self\.speculative_num_steps \+ 1", files)
    return [_f("multi-layer-eagle", Consequence.CRASH,
               message=f"multi-layer EAGLE needs draft tokens == steps + 1 ({s.num_steps + 1}), got "
                       f"{s.num_draft_tokens}: the worker asserts at start", evidence=[ev],
               fix=f"--speculative-num-draft-tokens {s.num_steps + 1} (or --speculative-eagle-topk 1)")]


# ---------------------------------------------------------------------------------------------
# what SGLang itself rejects or rewrites at start-up (gated on the release's own guards)
# ---------------------------------------------------------------------------------------------

def check_startup(s: SpecSettings, tree: SourceTree) -> list[ConfigFinding]:
    out: list[ConfigFinding] = []
    a = s.algorithm
    if a is None:
        return out
    backends = set(s.backends)
    rel = s.release

    def rule(cond, id, consequence, pattern, message, fix, level=None):
        if not cond:
            return
        g = _guard(tree, pattern, a)
        if g is not None:
            out.append(_f(id, consequence, f"{message} ({rel} applies this at start-up)", fix, [g.evidence], level))

    topk = s.eagle_topk or 1
    rule(a in EAGLE_FAMILY and "trtllm_mha" in backends and topk > 1, "sglang-trtllm-mha-topk", Consequence.REJECT,
         r"trtllm_mha backend only supports topk", f"trtllm_mha with topk={topk} is refused",
         "use --speculative-eagle-topk 1 or another attention backend")
    if topk > 1 and s.page_size > 1 and a in EAGLE_FAMILY | {"NGRAM"}:
        g = _guard(tree, r"page_size.*> ?1", a)
        allowed = T.allow_list(g) if g else None
        backend = s.attention_backend
        if g is not None and allowed is not None and backend is not None and backend not in allowed:
            out.append(_f("sglang-topk-page-size", Consequence.REJECT,
                          f"topk={topk} with page_size={s.page_size} on attention backend {backend!r}: {rel} "
                          f"allows this only on {', '.join(allowed)}",
                          f"use --page-size 1 or --attention-backend {allowed[0]}", [g.evidence]))
    spec_v2 = s.env.get("SGLANG_ENABLE_SPEC_V2", "").lower() in ("1", "true", "yes")
    rule(spec_v2 and a in EAGLE_FAMILY and topk > 1, "sglang-spec-v2-topk", Consequence.REJECT,
         r"Spec v2 currently only supports topk = 1", f"SGLANG_ENABLE_SPEC_V2 with topk={topk} is refused",
         "use --speculative-eagle-topk 1 or drop SGLANG_ENABLE_SPEC_V2")
    raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)
    rule(a in EAGLE_FAMILY and s.eagle_topk == 1 and raw_draft is not None and s.num_steps is not None
         and raw_draft != s.num_steps + 1, "sglang-eagle-topk1-draft", Consequence.PERF,
         r"adjusted to speculative_num_steps \+ 1",
         f"--speculative-num-draft-tokens {raw_draft} is silently replaced by steps + 1 = {(s.num_steps or 0) + 1} "
         f"because topk == 1", f"pass --speculative-num-draft-tokens {(s.num_steps or 0) + 1}")
    block_algo = a in ("DFLASH", "DDTREE")
    blk, drf = s.raw.get(SPECULATIVE_DFLASH_BLOCK_SIZE), raw_draft
    rule(block_algo and blk is not None and drf is not None and blk != drf, "sglang-dflash-block-size",
         Consequence.REJECT, r"For DFLASH they must match",
         f"--speculative-dflash-block-size {blk} != --speculative-num-draft-tokens {drf}",
         "drop --speculative-num-draft-tokens (the block size sets it) or make them equal")
    for key, pat, name in ((SPECULATIVE_NUM_STEPS, r"DFLASH only supports speculative_num_steps", "steps"),
                           (SPECULATIVE_EAGLE_TOPK, r"DFLASH only supports speculative_eagle_topk", "topk")):
        v = s.raw.get(key)
        rule(block_algo and v is not None and v != 1, f"sglang-dflash-{name}", Consequence.PERF, pat,
             f"{a} forces {name} to 1; --{key.replace('_', '-')} {v} is overridden", f"drop --{key.replace('_', '-')}")
    rule(block_algo and s.raw.get(SPECULATIVE_DFLASH_BLOCK_SIZE) is None and raw_draft is None,
         "sglang-dflash-block-inferred", Consequence.PERF, r"defaulting (speculative_num_draft_tokens )?to",
         "block size unset: inferred from the draft model config at start-up (16 if absent), so W and C are "
         "not known here", "pass --speculative-dflash-block-size explicitly", level="info")
    rule(s.enable_dp_attention and block_algo, "sglang-dflash-dp-attention", Consequence.REJECT,
         r"DFLASH speculative decoding does not support dp attention", f"{a} with --enable-dp-attention is refused",
         "drop --enable-dp-attention")
    rule(s.enable_dp_attention and a == "STANDALONE", "sglang-standalone-dp-attention", Consequence.REJECT,
         r"standalone speculative decoding does not support dp attention", "STANDALONE with dp-attention is refused",
         "drop --enable-dp-attention or use EAGLE")
    rule(s.enable_dp_attention and a == "NGRAM", "sglang-ngram-dp-attention", Consequence.REJECT,
         r"ngram speculative decoding does not support dp attention", "NGRAM with dp-attention is refused",
         "drop --enable-dp-attention")
    rule(a == "DDTREE" and s.page_size != 1, "sglang-ddtree-page-size", Consequence.REJECT,
         r"DDTREE currently supports only page_size == 1", f"DDTREE with page_size={s.page_size} is refused",
         "use --page-size 1")
    rule(s.max_running_requests is None, "sglang-max-running-requests", Consequence.PERF,
         r"Max running requests is reset to 48", "--max-running-requests unset: reset to 48 for speculative decoding",
         "pass --max-running-requests explicitly", level="info")
    return out


def tree_run_findings(run, explicit: dict, release: str) -> list[ConfigFinding]:
    """What the target's own start-up code did with the launch (see :mod:`ddcheck.config.treerun`)."""
    out: list[ConfigFinding] = []

    def ev(where, text=""):
        return Evidence(path=where.path, line=where.line, text=text[:160]) if where is not None else None

    if run.rejected:
        out.append(_f("sglang-rejects", Consequence.REJECT,
                      f"{release}'s own start-up code rejects this launch: {run.rejected}",
                      "change the flags the message names", [ev(run.rejected_at, run.rejected)]))
        return out
    for w in run.writes:
        if w.name in explicit and explicit[w.name] != w.new:
            flag = "--" + w.name.replace("_", "-")
            out.append(_f("sglang-rewrite", Consequence.PERF,
                          f"{flag} {explicit[w.name]} is replaced by {w.new!r} at start-up ({release})",
                          f"pass {flag} {w.new} (or drop it) so the launch says what runs", [ev(w.where)]))
        elif w.name == SPECULATIVE_NUM_DRAFT_TOKENS and w.name not in explicit:
            out.append(_f("sglang-num-draft-tokens", Consequence.PERF,
                          f"C (speculative_num_draft_tokens) is set to {w.new} by {release}'s start-up code",
                          "pass --speculative-num-draft-tokens to fix C yourself", [ev(w.where)], level="info"))
    seen = set()
    for log in run.logged:
        if log.level in ("warning", "error") and log.message not in seen:
            seen.add(log.message)
            out.append(_f("sglang-warning", Consequence.PERF, f"{release} warns at start-up: {log.message}", "",
                          [ev(log.where)], level="info"))
    for need in run.needs:
        if need.where is not None and run.handler is not None and need.where.path == run.handler.path:
            out.append(_f("tree-needs", Consequence.PERF,
                          f"{release}'s start-up code reads {need.what}; ddcheck resolved the launch as if it "
                          f"were absent, as the tree does when it is",
                          f"pass {need.supply} to ddcheck config" if need.supply else
                          "check this value on the machine that will serve", [ev(need.where)], level="info"))
    return out


# What is still said when the tree's start-up code could not run: facts of the backend's own code.
# What is still said when the tree's start-up code could not run: what the scan says of the backend, and
# a half-given EAGLE shape where the tree has its guard (its start-up code dies there: an error either way)
SCAN_ONLY_CHECKS = (check_scan_layout, check_tree_mask, check_eagle_params)

ALL_CHECKS = (check_eagle_params, check_startup, check_verify_width, check_verify_graph, check_tree_mask,
              check_eagle_tree_size, check_mla_topk, check_multi_layer_eagle)
