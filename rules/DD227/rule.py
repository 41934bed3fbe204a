"""DD227's code: the DFLASH block size left to the draft model's config (the release's guard)."""

from ddcheck.rules import StartupGuard
from ddcheck.tree.names import SPECULATIVE_DFLASH_BLOCK_SIZE, SPECULATIVE_NUM_DRAFT_TOKENS


class DflashBlockInferred(StartupGuard):
    guard = 'defaulting (speculative_num_draft_tokens )?to'

    def applies(self, s, facts):
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)
        return s.algorithm in ("DFLASH", "DDTREE") and s.raw.get(SPECULATIVE_DFLASH_BLOCK_SIZE) is None and raw_draft is None
