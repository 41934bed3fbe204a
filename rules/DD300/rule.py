"""DD300's code: a `ddcheck smoke` run's paths at W != C that went wrong where its controls were right."""

from ddcheck.rules import SmokeRule


class SmokeWrongAtW(SmokeRule):
    def check(self, report):
        if report.exit_code != 1:  # right (0), or not judged (3): smoke says which, no finding
            return []
        out = []
        for p in report.paths:
            if p.case != "ddtree" or p.status == "ok":
                continue
            at = dict(backend=report.attention_backend, W=p.width, C=p.num_draft_tokens, hint="fix",
                      path=p.path + (f"@{p.capture_width}" if p.capture_width else ""))
            if p.status == "tree_crash":
                out.append(self.finding("tree_crash", report.backend, error=p.error or "", **at))
            for o in p.out_of_bounds[:1]:
                out.append(self.finding("out_of_bounds", report.backend, rows=o["rows"], batch_rows=o["batch_rows"],
                                        buffer=o["buffer"], **at))
            if p.violations:
                fields = ", ".join(dict.fromkeys(f"{v['field']} ({v['term']})" for v in p.violations))
                out.append(self.finding("contract", report.backend, fields=fields, **at))
            if p.wrong_tokens:
                out.append(self.finding("numbers", report.backend, wrong=p.wrong_tokens, tokens=p.tokens, **at))
        if not out:  # wrong in a way no path names alone (smoke's verdict says it)
            out.append(self.finding("verdict", report.backend, backend=report.attention_backend, W=report.width,
                                    C=report.num_draft_tokens, verdict=report.verdict, hint="fix"))
        return out
