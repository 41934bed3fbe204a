"""DD221's code: topk > 1 with a page size > 1 on a backend the release's guard does not allow."""

from ddcheck.rules import LaunchRule


class TopkPageSize(LaunchRule):
    stage = ("startup",)

    def check(self, facts):
        s = facts.settings
        a = s.algorithm
        topk = s.eagle_topk or 1
        if a is None or not (topk > 1 and s.page_size > 1 and a in facts.EAGLE_FAMILY | {"NGRAM"}):
            return []
        g = facts.guard(r"page_size.*> ?1", a)
        allowed = facts.allow_list(g) if g else None
        backend = s.attention_backend
        if g is None or allowed is None or backend is None or backend in allowed:
            return []
        return [self.finding("refused", topk=topk, page=s.page_size, backend=backend, release=s.release,
                             allowed=", ".join(allowed), first=allowed[0], evidence=[g.evidence])]
