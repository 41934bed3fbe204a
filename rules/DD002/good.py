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
