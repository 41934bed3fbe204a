"""DD203's code: the EAGLE shape flags half given."""

from ddcheck.rules import LaunchRule


class EagleParams(LaunchRule):
    stage = ("site", "tree_failed")

    def check(self, facts):
        s = facts.settings
        if s.algorithm not in facts.EAGLE_FAMILY:
            return []
        given = {k: s.raw.get(f"speculative_{k}") for k in ("num_steps", "eagle_topk", "num_draft_tokens")}
        if all(v is None for v in given.values()) or all(v is not None for v in given.values()):
            return []
        missing = [k for k, v in given.items() if v is None]
        g = facts.guard(r"speculative_eagle_topk is None", s.algorithm)
        return [self.finding("half", flags="/".join(m.replace("_", "-") for m in missing),
                             evidence=[g.evidence if g else None])]
