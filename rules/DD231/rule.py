"""DD231's code: DDTREE with a page size other than 1 (the release's guard)."""

from ddcheck.rules import StartupGuard


class DdtreePageSize(StartupGuard):
    guard = 'DDTREE currently supports only page_size == 1'

    def applies(self, s, facts):
        return s.algorithm == "DDTREE" and s.page_size != 1

    def facts(self, s):
        return {"page": s.page_size}
