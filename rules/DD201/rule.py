"""DD201's code: CUDA graphs on and a verify width other than the one the verify graph was captured with."""

from ddcheck.rules import LaunchRule


def _end(v):
    return "?" if v is None else str(v)


class VerifyGraphWidth(LaunchRule):
    def check(self, facts):
        s = facts.settings
        W, C = s.verify_width, s.num_draft_tokens
        if not s.cuda_graph or s.algorithm is None or C is None or (W is None and not s.verify_width_per_step):
            return []
        if s.capture_width is not None and s.verify_width_per_step:
            # Every step verifies its own width, at most W: those narrower than the capture replay it?
            if s.replay_gate_at:
                return []  # narrower steps run eagerly; the capture-width steps replay
            return [self.finding("per_step", capture=s.capture_width, per_step=s.verify_width_per_step,
                                 low=_end(s.verify_width_min), high=_end(W),
                                 evidence=[self.evidence_at(s.capture_at,
                                                            f"captures {s.capture_width} tokens per request")])]
        if W is None or W == C and s.capture_width in (None, W):
            return []
        if s.capture_width is not None:
            # The tree's graph runner, evaluated for this launch.
            at_w = s.capture_width == W
            ev = self.evidence_at(s.capture_at, f"captures {s.capture_width} tokens per request")
            C = s.capture_width
        else:
            at_w, ev = facts.verify_capture("ddtree" if s.algorithm == "DDTREE" else s.algorithm.lower())
        if at_w:
            return []
        if s.capture_width is not None and s.replay_gate_at:
            return [self.finding("eager", consequence="PERF", capture=C, algorithm=s.algorithm, W=W,
                                 evidence=[ev, self.evidence_at(s.replay_gate_at, "can_run compares the batch's "
                                                                "width with the captured one")])]
        return [self.finding("captured", consequence="CRASH", capture=C, algorithm=s.algorithm, W=W, evidence=[ev])]
