"""DD214's code: a value the tree's speculative start-up handler reads that ddcheck does not have."""

from ddcheck.rules import LaunchRule


class TreeNeeds(LaunchRule):
    stage = ("tree_run",)

    def check(self, facts):
        run = facts.run
        if run.rejected:
            return []
        return [self.finding("needs", "supply" if need.supply else "check", release=facts.release, what=need.what,
                             supply=need.supply, evidence=[self.evidence(need.where.path, need.where.line)])
                for need in run.needs
                if need.where is not None and run.handler is not None and need.where.path == run.handler.path]
