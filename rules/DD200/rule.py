"""DD200's code: the verify width W differs from C on a backend whose verify path lays it out with C."""

from ddcheck.rules import LaunchRule


def _end(v):
    return "?" if v is None else str(v)


def differs(s) -> bool:
    """W may differ from C for this launch: a W fixed by its flags and not C, or a W computed each step
    whose range (an end that could not be evaluated is not judged) has an end known to differ from C."""
    W, C = s.verify_width, s.num_draft_tokens
    if s.algorithm is None or C is None:
        return False
    if s.verify_width_per_step:
        return not (W in (None, C) and s.verify_width_min in (None, C))
    return W is not None and W != C


class VerifyWidth(LaunchRule):
    stage = ("site", "tree_failed")

    def check(self, facts):
        s = facts.settings
        if facts.run is None or not facts.run.ok:
            return self._layout(facts)
        if not differs(s):
            return []
        W, C = s.verify_width, s.num_draft_tokens
        ways_out = (f"set W = C (e.g. --speculative-ddtree-budget {C - 1})" if s.algorithm == "DDTREE"
                    else "make the verify width equal --speculative-num-draft-tokens")
        differs_said = f"W={W} != C={C}"
        span = f"from {_end(s.verify_width_min)} to {_end(W)}"
        if s.verify_width_per_step:  # no flag pins a width the worker computes each step
            ways_out = "pick a backend whose verify path is per-step"
            differs_said = f"W (computed each step as `{s.verify_width_per_step}`, {span}) can differ from C={C}"
        files = facts.backend_files()
        if s.verify_backend is None:
            bad = {b: f for b, f in facts.verify_findings([b for b in facts.ALTERNATIVES if b in files]).items() if f}
            return [self.finding("left", differs=differs_said, release=s.release,
                                 fixed=", ".join(sorted(bad)) or "none")]
        if s.verify_backend not in files:
            return [self.finding("unregistered", backend=s.verify_backend, differs=differs_said,
                                 release=s.release)]
        found, undecided, fixed_at = facts.width_reads
        if not found and undecided:
            f, test = undecided[0]
            return [self.finding("undecided", backend=s.verify_backend, differs=differs_said, test=test,
                                 function=f.function, n=len(undecided), ways_out=ways_out,
                                 evidence=[self.evidence(g.relpath or g.path, g.line, f"when {t}: {g.message[:120]}")
                                           for g, t in undecided[:5]])]
        if not found:
            return []
        through = f" (through {s.verify_input})" if s.verify_input else ""
        value = next(iter(fixed_at)) if len(fixed_at) == 1 else None
        laid_out = f"a width fixed at start-up ({value} for this launch)" \
            if isinstance(value, int) and not isinstance(value, bool) and value != C else "C"
        verifies = (f"verifies W tokens per request{through}, computed each step (`{s.verify_width_per_step}`, "
                    f"{span}), and C=--speculative-num-draft-tokens={C}" if s.verify_width_per_step else
                    f"verifies W={W} tokens per request{through} but C=--speculative-num-draft-tokens={C}")
        when = (f"on every step whose W differs from {'it' if laid_out != 'C' else 'C'}"
                if s.verify_width_per_step else "for every request")
        ok = facts.per_step_backends(but=s.verify_backend)
        return [self.finding("fixed", backend=s.verify_backend, algorithm=s.algorithm, verifies=verifies,
                             laid_out=laid_out, n=len(found), engine=facts.engine(s.verify_backend), when=when,
                             ways_out="" if s.verify_width_per_step else f"{ways_out}; or ",
                             ok=", ".join(ok[:6]) or "none in this release",
                             evidence=[self.evidence(f.relpath or f.path, f.line, f.message[:160]) for f in found[:5]])]

    def _layout(self, facts):
        """Where the tree's start-up code could not run: what the scan says of the backend the launch
        names, whatever W turns out to be (a layout fixed at C is wrong at every W != C)."""
        s = facts.settings
        b = s.verify_backend
        if s.algorithm is None or b is None or b not in facts.backend_files():
            return []
        found = facts.verify_findings([b]).get(b) or []
        if not found:
            return []
        return [self.finding("scan_only", backend=b, n=len(found), engine=facts.engine(b),
                             evidence=[self.evidence(f.relpath or f.path, f.line, f.message[:160]) for f in found[:5]])]
