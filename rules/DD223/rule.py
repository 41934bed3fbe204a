"""DD223's code: EAGLE topk 1 replaces the draft tokens by steps + 1 (the release's guard)."""

from ddcheck.rules import LaunchRule
from ddcheck.tree.names import SPECULATIVE_DFLASH_BLOCK_SIZE, SPECULATIVE_EAGLE_TOPK, SPECULATIVE_NUM_DRAFT_TOKENS, SPECULATIVE_NUM_STEPS  # noqa: F401


class EagleTopk1Draft(LaunchRule):
    stage = ("startup",)

    def check(self, facts):
        s = facts.settings
        a = s.algorithm
        if a is None:
            return []
        topk = s.eagle_topk or 1  # noqa: F841
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)  # noqa: F841
        if not (a in facts.EAGLE_FAMILY and s.eagle_topk == 1 and raw_draft is not None and s.num_steps is not None and raw_draft != s.num_steps + 1):
            return []
        g = facts.guard('adjusted to speculative_num_steps \\+ 1', a)
        if g is None:
            return []
        return [self.finding("refused", release=s.release, evidence=[g.evidence], **self.facts(s))]

    def facts(self, s):
        topk = s.eagle_topk or 1  # noqa: F841
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)  # noqa: F841
        return {"raw_draft": raw_draft, "steps1": (s.num_steps or 0) + 1}
