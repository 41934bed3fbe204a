"""DD223's code: EAGLE topk 1 replaces the draft tokens by steps + 1 (the release's guard)."""

from ddcheck.rules import StartupGuard
from ddcheck.tree.names import SPECULATIVE_NUM_DRAFT_TOKENS


class EagleTopk1Draft(StartupGuard):
    guard = 'adjusted to speculative_num_steps \\+ 1'

    def applies(self, s, facts):
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)
        return s.algorithm in facts.EAGLE_FAMILY and s.eagle_topk == 1 and raw_draft is not None and s.num_steps is not None and raw_draft != s.num_steps + 1

    def facts(self, s):
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)
        return {"raw_draft": raw_draft, "steps1": (s.num_steps or 0) + 1}
