"""DD210's code: the tree's own start-up code rejects the launch."""

from ddcheck.rules import LaunchRule


class SglangRejects(LaunchRule):
    stage = ("tree_run",)

    def check(self, facts):
        run = facts.run
        if not run.rejected:
            return []
        at = run.rejected_at
        return [self.finding("rejects", release=facts.release, said=run.rejected,
                             evidence=[self.evidence(at.path, at.line, run.rejected[:160]) if at else None])]
