import torch


def fill_kv_indices(spec_info, out):
    out.zero_()


class ToyVerifyBackend:
    def __init__(self, model_runner):
        self.speculative_num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens
        self.max_context_len = model_runner.model_config.context_len
        # The largest width the launch verifies (a DDTree budget + 1), C where no tree drafter runs.
        budget = getattr(model_runner.server_args, "speculative_ddtree_budget", None)
        self.max_verify_width = max(self.speculative_num_draft_tokens, (budget or 0) + 1)

    def init_cuda_graph_state(self, max_bs, max_num_tokens):
        # Room for the largest verify width, not for C.
        self.cuda_graph_custom_mask = torch.zeros(max_num_tokens * (4096 + self.max_verify_width))
        self.cuda_graph_positions = torch.zeros(max_bs * self.max_verify_width, dtype=torch.int64)
        self.cuda_graph_kv_indices = torch.zeros(max_bs * (4096 + self.max_verify_width), dtype=torch.int32)

    def graph_max_kv_len(self):
        max_kv_len = self.max_context_len
        max_kv_len += self.max_verify_width
        return max_kv_len

    def init_forward_metadata_replay_cuda_graph(self, bs, forward_mode, spec_info):
        if forward_mode.is_target_verify():
            mask = self.cuda_graph_custom_mask
            mask[: spec_info.custom_mask.shape[0]] = spec_info.custom_mask
            self.cuda_graph_positions[: bs * spec_info.draft_token_num].copy_(spec_info.positions)
            kv_indices = self.cuda_graph_kv_indices
            fill_kv_indices(spec_info, kv_indices)
            self.kv_bound = self.graph_max_kv_len()
