"""DD232's code: max running requests left to the release's reset (its guard)."""

from ddcheck.rules import LaunchRule
from ddcheck.tree.names import SPECULATIVE_DFLASH_BLOCK_SIZE, SPECULATIVE_EAGLE_TOPK, SPECULATIVE_NUM_DRAFT_TOKENS, SPECULATIVE_NUM_STEPS  # noqa: F401


class MaxRunningRequests(LaunchRule):
    stage = ("startup",)

    def check(self, facts):
        s = facts.settings
        a = s.algorithm
        if a is None:
            return []
        topk = s.eagle_topk or 1  # noqa: F841
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)  # noqa: F841
        if not (s.max_running_requests is None):
            return []
        g = facts.guard('Max running requests is reset to 48', a)
        if g is None:
            return []
        return [self.finding("refused", release=s.release, evidence=[g.evidence], **self.facts(s))]

    def facts(self, s):
        topk = s.eagle_topk or 1  # noqa: F841
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)  # noqa: F841
        return {}
