"""DD213's code: what the tree's start-up code warned, once a message."""

from ddcheck.rules import LaunchRule


class SglangWarning(LaunchRule):
    stage = ("tree_run",)

    def check(self, facts):
        run = facts.run
        if run.rejected:
            return []
        out, seen = [], set()
        for log in run.logged:
            if log.level in ("warning", "error") and log.message not in seen:
                seen.add(log.message)
                at = log.where
                out.append(self.finding("warns", release=facts.release, said=log.message,
                                        evidence=[self.evidence(at.path, at.line) if at else None]))
        return out
