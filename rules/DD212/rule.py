"""DD212's code: C set by the tree's start-up code where the launch left it."""

from ddcheck.rules import LaunchRule
from ddcheck.tree.names import SPECULATIVE_NUM_DRAFT_TOKENS


class SglangNumDraftTokens(LaunchRule):
    stage = ("tree_run",)

    def check(self, facts):
        run = facts.run
        if run.rejected:
            return []
        return [self.finding("set", new=w.new, release=facts.release,
                             evidence=[self.evidence(w.where.path, w.where.line) if w.where else None])
                for w in run.writes if w.name == SPECULATIVE_NUM_DRAFT_TOKENS and w.name not in facts.explicit]
