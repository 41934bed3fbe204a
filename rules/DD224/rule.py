"""DD224's code: DFLASH/DDTREE block size and draft tokens must match (the release's guard)."""

from ddcheck.rules import LaunchRule
from ddcheck.tree.names import SPECULATIVE_DFLASH_BLOCK_SIZE, SPECULATIVE_EAGLE_TOPK, SPECULATIVE_NUM_DRAFT_TOKENS, SPECULATIVE_NUM_STEPS  # noqa: F401


class DflashBlockSize(LaunchRule):
    stage = ("startup",)

    def check(self, facts):
        s = facts.settings
        a = s.algorithm
        if a is None:
            return []
        topk = s.eagle_topk or 1  # noqa: F841
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)  # noqa: F841
        if not (a in ("DFLASH", "DDTREE") and s.raw.get(SPECULATIVE_DFLASH_BLOCK_SIZE) is not None and raw_draft is not None and s.raw.get(SPECULATIVE_DFLASH_BLOCK_SIZE) != raw_draft):
            return []
        g = facts.guard('For DFLASH they must match', a)
        if g is None:
            return []
        return [self.finding("refused", release=s.release, evidence=[g.evidence], **self.facts(s))]

    def facts(self, s):
        topk = s.eagle_topk or 1  # noqa: F841
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)  # noqa: F841
        return {"blk": s.raw.get(SPECULATIVE_DFLASH_BLOCK_SIZE), "drf": raw_draft}
