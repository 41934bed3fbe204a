"""DD228's code: DFLASH/DDTREE with dp attention (the release's guard)."""

from ddcheck.rules import StartupGuard


class DflashDpAttention(StartupGuard):
    guard = 'DFLASH speculative decoding does not support dp attention'

    def applies(self, s, facts):
        return s.enable_dp_attention and s.algorithm in ("DFLASH", "DDTREE")

    def facts(self, s):
        return {"algorithm": s.algorithm}
