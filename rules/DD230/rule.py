"""DD230's code: NGRAM with dp attention (the release's guard)."""

from ddcheck.rules import StartupGuard


class NgramDpAttention(StartupGuard):
    guard = 'ngram speculative decoding does not support dp attention'

    def applies(self, s, facts):
        return s.enable_dp_attention and s.algorithm == "NGRAM"
