"""DD003's code: C where the verify path takes it only when the verify input carries no width."""

from ddcheck.rules import ScanRule


class FixedWidthFallback(ScanRule):
    kinds = ("fallback",)

    def judge(self, read):
        if read.kind == "harmless":
            return None
        if read.rebound_per_step():
            # `w = C`, then `w = spec_info.draft_token_num` where the input has one: C is the fallback
            return self.claim("fallback")
        if read.direct and read.case == "returns_c" and read.resolves_width():
            # `return W` for the tree drafter's input, `return C` for the others: a width resolver
            return self.claim("resolver")
        return None

    def hint(self, report):
        # A resolver's `return C` with the verify input in scope is rewritten to return its width (unsafe);
        # any other fallback is left as it is.
        if report.case == "resolver" and report.exact and report.verify_input() and report.spelled_in_scope():
            return report.to_width()
        return self.no_fix("fallback")
