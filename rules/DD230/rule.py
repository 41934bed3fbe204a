"""DD230's code: NGRAM with dp attention (the release's guard)."""

from ddcheck.rules import LaunchRule
from ddcheck.tree.names import SPECULATIVE_DFLASH_BLOCK_SIZE, SPECULATIVE_EAGLE_TOPK, SPECULATIVE_NUM_DRAFT_TOKENS, SPECULATIVE_NUM_STEPS  # noqa: F401


class NgramDpAttention(LaunchRule):
    stage = ("startup",)

    def check(self, facts):
        s = facts.settings
        a = s.algorithm
        if a is None:
            return []
        topk = s.eagle_topk or 1  # noqa: F841
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)  # noqa: F841
        if not (s.enable_dp_attention and a == "NGRAM"):
            return []
        g = facts.guard('ngram speculative decoding does not support dp attention', a)
        if g is None:
            return []
        return [self.finding("refused", release=s.release, evidence=[g.evidence], **self.facts(s))]

    def facts(self, s):
        topk = s.eagle_topk or 1  # noqa: F841
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)  # noqa: F841
        return {}
