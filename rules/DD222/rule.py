"""DD222's code: SGLANG_ENABLE_SPEC_V2 with topk > 1 (the release's guard)."""

from ddcheck.rules import StartupGuard


class SpecV2Topk(StartupGuard):
    guard = 'Spec v2 currently only supports topk = 1'

    def applies(self, s, facts):
        topk = s.eagle_topk or 1
        return s.env.get("SGLANG_ENABLE_SPEC_V2", "").lower() in ("1", "true", "yes") and s.algorithm in facts.EAGLE_FAMILY and topk > 1

    def facts(self, s):
        topk = s.eagle_topk or 1
        return {"topk": topk}
