"""DD250's code: `config --smoke`: the launch's verify path, run at its C and W."""

from ddcheck.rules import LaunchRule


class LaunchSmoke(LaunchRule):
    stage = ("smoke",)

    def check(self, facts):
        r = facts.smoke
        if r is None or r.exit_code not in (0, 1):  # not run: not judged (config says why), no finding
            return []
        case = "wrong" if r.exit_code == 1 else "right"
        return [self.finding(case, consequence="CORRUPT" if case == "wrong" else "PERF", backend=r.backend,
                             C=r.C, W=r.W, inputs=r.inputs, verdict=r.verdict)]
