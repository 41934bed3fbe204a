"""DD211's code: a flag the launch set, replaced by the tree's start-up code."""

from ddcheck.rules import LaunchRule


class SglangRewrite(LaunchRule):
    stage = ("tree_run",)

    def check(self, facts):
        run, explicit = facts.run, facts.explicit
        if run.rejected:
            return []
        out = []
        for w in run.writes:
            if w.name in explicit and explicit[w.name] != w.new:
                at = w.where
                out.append(self.finding("rewrite", flag="--" + w.name.replace("_", "-"), given=explicit[w.name],
                                        new=w.new, release=facts.release,
                                        evidence=[self.evidence(at.path, at.line) if at else None]))
        return out
