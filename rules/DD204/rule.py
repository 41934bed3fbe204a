"""DD204's code: draft tokens - 1 must fit the tree: topk + (steps - 1) * topk^2 candidates."""

from ddcheck.rules import LaunchRule


class EagleTreeSize(LaunchRule):
    def check(self, facts):
        s = facts.settings
        if s.algorithm not in facts.EAGLE_FAMILY or None in (s.num_steps, s.eagle_topk, s.num_draft_tokens):
            return []
        k, n, d = s.eagle_topk, s.num_steps, s.num_draft_tokens
        cap = k + (n - 1) * k * k
        if k <= 1 or d - 1 <= cap:
            return []
        return [self.finding("too_many", d=d, nodes=d - 1, n=n, k=k, cap=cap, most=cap + 1)]
