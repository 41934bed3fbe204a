"""DD229's code: STANDALONE with dp attention (the release's guard)."""

from ddcheck.rules import StartupGuard


class StandaloneDpAttention(StartupGuard):
    guard = 'standalone speculative decoding does not support dp attention'

    def applies(self, s, facts):
        return s.enable_dp_attention and s.algorithm == "STANDALONE"
