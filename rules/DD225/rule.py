"""DD225's code: DFLASH/DDTREE force the steps to 1 (the release's guard)."""

from ddcheck.rules import StartupGuard
from ddcheck.tree.names import SPECULATIVE_NUM_STEPS


class DflashSteps(StartupGuard):
    guard = 'DFLASH only supports speculative_num_steps'

    def applies(self, s, facts):
        return s.algorithm in ("DFLASH", "DDTREE") and s.raw.get(SPECULATIVE_NUM_STEPS) is not None and s.raw.get(SPECULATIVE_NUM_STEPS) != 1

    def facts(self, s):
        return {"algorithm": s.algorithm, "v": s.raw.get(SPECULATIVE_NUM_STEPS)}
