"""DD224's code: DFLASH/DDTREE block size and draft tokens must match (the release's guard)."""

from ddcheck.rules import StartupGuard
from ddcheck.tree.names import SPECULATIVE_DFLASH_BLOCK_SIZE, SPECULATIVE_NUM_DRAFT_TOKENS


class DflashBlockSize(StartupGuard):
    guard = 'For DFLASH they must match'

    def applies(self, s, facts):
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)
        return s.algorithm in ("DFLASH", "DDTREE") and s.raw.get(SPECULATIVE_DFLASH_BLOCK_SIZE) is not None and raw_draft is not None and s.raw.get(SPECULATIVE_DFLASH_BLOCK_SIZE) != raw_draft

    def facts(self, s):
        raw_draft = s.raw.get(SPECULATIVE_NUM_DRAFT_TOKENS)
        return {"blk": s.raw.get(SPECULATIVE_DFLASH_BLOCK_SIZE), "drf": raw_draft}
