"""DD226's code: DFLASH/DDTREE force the topk to 1 (the release's guard)."""

from ddcheck.rules import StartupGuard
from ddcheck.tree.names import SPECULATIVE_EAGLE_TOPK


class DflashTopk(StartupGuard):
    guard = 'DFLASH only supports speculative_eagle_topk'

    def applies(self, s, facts):
        return s.algorithm in ("DFLASH", "DDTREE") and s.raw.get(SPECULATIVE_EAGLE_TOPK) is not None and s.raw.get(SPECULATIVE_EAGLE_TOPK) != 1

    def facts(self, s):
        return {"algorithm": s.algorithm, "v": s.raw.get(SPECULATIVE_EAGLE_TOPK)}
