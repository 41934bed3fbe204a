"""DD222's code: SGLANG_ENABLE_SPEC_V2 with topk > 1 (the release's guard)."""

from ddcheck.rules import LaunchRule
from ddcheck.tree.names import SPECULATIVE_DFLASH_BLOCK_SIZE, SPECULATIVE_EAGLE_TOPK, SPECULATIVE_NUM_DRAFT_TOKENS, SPECULATIVE_NUM_STEPS  # noqa: F401


class SpecV2Topk(LaunchRule):
    stage = ("startup",)

    def check(self, facts):
        s = facts.settings
        a = s.algorithm
        if a is None:
            return []
        topk = s.eagle_topk or 1  # noqa: F841
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)  # noqa: F841
        if not (s.env.get("SGLANG_ENABLE_SPEC_V2", "").lower() in ("1", "true", "yes") and a in facts.EAGLE_FAMILY and topk > 1):
            return []
        g = facts.guard('Spec v2 currently only supports topk = 1', a)
        if g is None:
            return []
        return [self.finding("refused", release=s.release, evidence=[g.evidence], **self.facts(s))]

    def facts(self, s):
        topk = s.eagle_topk or 1  # noqa: F841
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)  # noqa: F841
        return {"topk": topk}
