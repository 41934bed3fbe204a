import torch


def fill_kv_indices(spec_info, out):
    out.zero_()


class ToyVerifyBackend:
    def __init__(self, model_runner):
        self.speculative_num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens
        self.max_context_len = model_runner.model_config.context_len

    def init_cuda_graph_state(self, max_bs, max_num_tokens):
        # Made at start-up with room for C tokens per request; the verify path writes W per request.
        self.cuda_graph_custom_mask = torch.zeros(max_num_tokens * (4096 + self.speculative_num_draft_tokens))  # expect: DD002
        self.cuda_graph_positions = torch.zeros(max_bs * self.speculative_num_draft_tokens, dtype=torch.int64)  # expect: DD002
        # C with a fallback, into a size through a local: still room for C tokens per request
        draft_slack = self.speculative_num_draft_tokens or 0
        self.cuda_graph_kv_indices = torch.zeros(max_bs * (4096 + draft_slack), dtype=torch.int32)  # expect: DD002

    def graph_max_kv_len(self):
        max_kv_len = self.max_context_len
        max_kv_len += self.speculative_num_draft_tokens  # expect: DD002
        return max_kv_len

    def init_forward_metadata_replay_cuda_graph(self, bs, forward_mode, spec_info):
        if forward_mode.is_target_verify():
            mask = self.cuda_graph_custom_mask
            mask[: spec_info.custom_mask.shape[0]] = spec_info.custom_mask
            self.cuda_graph_positions[: bs * spec_info.draft_token_num].copy_(spec_info.positions)
            kv_indices = self.cuda_graph_kv_indices
            fill_kv_indices(spec_info, kv_indices)
            self.kv_bound = self.graph_max_kv_len()
