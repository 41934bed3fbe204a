"""DD205's code: topk > 1 with a draft backend whose module for this draft model refuses it when the draft
worker starts: every module of the backend is an MLA one, or the draft model uses MLA (the tree's
ModelConfig, ``draft_mla``). A draft model that does not use MLA runs the backend's other module; one not
known here is not judged (said by config), never a hedged finding."""

from ddcheck.rules import LaunchRule


class MlaTopk(LaunchRule):
    def check(self, facts):
        s = facts.settings
        hit = facts.mla_topk_guard()
        if hit is None:
            return []
        backend, ev, mla_only = hit
        if mla_only:
            return [self.finding("mla_only", backend=backend, topk=s.eagle_topk, evidence=ev)]
        if s.draft_mla:
            if s.draft_attention_arch_at:
                ev = [*ev, self.evidence_at(s.draft_attention_arch_at, "the draft model's attention_arch: MLA")]
            return [self.finding("mla_draft", backend=backend, topk=s.eagle_topk, evidence=ev)]
        return []
