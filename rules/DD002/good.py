import torch


class ToyVerifyBackend:
    def __init__(self, model_runner):
        self.speculative_num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens
        # Capacity at start-up, outside the verify path, is the graph runner's business.
        self.buffer = torch.empty(64 * self.speculative_num_draft_tokens)

    def init_forward_metadata(self, forward_batch, metadata):
        spec_info = forward_batch.spec_info
        if not forward_batch.forward_mode.is_target_verify():
            return
        bs = forward_batch.batch_size
        num_tokens_per_req = getattr(spec_info, "draft_token_num", None) or self.speculative_num_draft_tokens
        metadata.max_seq_len_k = forward_batch.seq_lens_cpu.max().item() + num_tokens_per_req
        metadata.scratch = torch.empty(bs * num_tokens_per_req, dtype=torch.int32)
        metadata.custom_mask = spec_info.custom_mask

    def init_cuda_graph_state(self, max_bs, max_num_tokens, max_verify_width):
        # Room for the largest verify width the deployment allows, not for C.
        self.cuda_graph_custom_mask = torch.zeros(max_num_tokens * (4096 + max_verify_width))

    def init_forward_metadata_replay_cuda_graph(self, bs, forward_mode, spec_info):
        if forward_mode.is_target_verify():
            mask = self.cuda_graph_custom_mask
            mask[: spec_info.custom_mask.shape[0]] = spec_info.custom_mask
