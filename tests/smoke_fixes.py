"""Hand-made fixes of a real triton_backend.py, applied at test time (never stored in the repo).

They exist so the smoke tests can prove that the harness passes a correctly fixed backend and
catches a fix applied to only some of the target-verify sites, independently of ``ddcheck fix``.

Sites (by the TritonAttnBackend method that holds them):
* ``eager``   -- ``init_forward_metadata`` (qo_indptr, seq_mask_len, max_extend_len);
* ``capture`` -- ``init_forward_metadata_capture_cuda_graph`` (<= 0.5.12) or the
  ``max_extend_len`` of ``_build_cuda_graph_forward_metadata`` (0.5.14+);
* ``replay``  -- ``init_forward_metadata_replay_cuda_graph`` (<= 0.5.12) or
  ``_update_target_verify_buffers`` (0.5.14+).
"""

from __future__ import annotations

import ast

WIDTH = "spec_info.draft_token_num"
SITES = {
    "init_forward_metadata": "eager",
    "init_forward_metadata_capture_cuda_graph": "capture",
    "_build_cuda_graph_forward_metadata": "capture",
    "init_forward_metadata_replay_cuda_graph": "replay",
    "_update_target_verify_buffers": "replay",
}


def hand_fix(text: str, sites: tuple[str, ...] = ("eager", "capture", "replay")) -> str:
    """Replace the start-up width C by the verify input's width at the chosen sites."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TritonAttnBackend")
    spans = [(f.lineno, f.end_lineno, f.name) for f in cls.body
             if isinstance(f, ast.FunctionDef) and SITES.get(f.name) in sites]
    changed = 0
    for start, end, name in sorted(spans, reverse=True):
        body = "".join(lines[start - 1:end])
        if name == "_build_cuda_graph_forward_metadata":  # only the target-verify max_extend_len
            new = body.replace("max_extend_len=self.num_draft_tokens,", f"max_extend_len={WIDTH},")
        else:
            new = body.replace("self.num_draft_tokens", WIDTH)
        changed += new != body
        lines[start - 1:end] = [new]
    if changed == 0:
        raise ValueError(f"no verify site found for {sites}")
    return "".join(lines)
