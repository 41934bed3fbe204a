"""DD202's code: a tree verify on a backend path that never reads the custom mask."""

from ddcheck.rules import LaunchRule


class TreeMask(LaunchRule):
    stage = ("site", "tree_failed")

    def check(self, facts):
        s = facts.settings
        if not s.tree_verify or not s.verify_backend:
            return []
        if s.algorithm in facts.EAGLE_FAMILY and s.eagle_topk == 1:
            return []  # an EAGLE chain: its mask is causal, so a backend attending it as a chain is right
        honoured, files = facts.mask_honoured(s.verify_backend)
        if honoured and s.values and s.verify_backend in facts.backend_files():
            # The backend reads the mask somewhere; does it on a path these settings take?
            reachable, why = facts.mask_reads(s.verify_backend)
            if reachable is False:
                return [self.finding("off_path", backend=s.verify_backend, algorithm=s.algorithm,
                                     carrier=s.verify_input or "tree mask",
                                     evidence=[self.evidence(p, n, t) for p, n, t in why])]
        if honoured is not False:
            return []
        tree = "DDTREE" if s.algorithm == "DDTREE" else f"topk={s.eagle_topk}"
        return [self.finding("never", backend=s.verify_backend, tree=tree,
                             evidence=[self.evidence(p, 1, "no custom_mask reference") for p in files])]
