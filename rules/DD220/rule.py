"""DD220's code: trtllm_mha with topk > 1 (the release's guard)."""

from ddcheck.rules import StartupGuard


class TrtllmMhaTopk(StartupGuard):
    guard = 'trtllm_mha backend only supports topk'

    def applies(self, s, facts):
        topk = s.eagle_topk or 1
        return s.algorithm in facts.EAGLE_FAMILY and "trtllm_mha" in set(s.backends) and topk > 1

    def facts(self, s):
        topk = s.eagle_topk or 1
        return {"topk": topk}
