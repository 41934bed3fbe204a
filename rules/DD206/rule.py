"""DD206's code: multi-layer EAGLE needs draft tokens == steps + 1."""

from ddcheck.rules import LaunchRule


class MultiLayerEagle(LaunchRule):
    def check(self, facts):
        s = facts.settings
        if not s.enable_multi_layer_eagle or None in (s.num_steps, s.num_draft_tokens):
            return []
        if s.num_draft_tokens == s.num_steps + 1:
            return []
        ev = facts.text_marker(r"speculative_num_draft_tokens == self\.speculative_num_steps \+ 1", "multi_layer_eagle")
        return [self.finding("mismatch", want=s.num_steps + 1, got=s.num_draft_tokens, evidence=[ev])]
