import torch


class ToyVerifyBackend:
    def __init__(self, model_runner):
        self.speculative_num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens

    def init_forward_metadata(self, forward_batch, metadata):
        spec_info = forward_batch.spec_info
        if not forward_batch.forward_mode.is_target_verify():
            return
        bs = forward_batch.batch_size
        metadata.max_seq_len_k = forward_batch.seq_lens_cpu.max().item() + self.speculative_num_draft_tokens  # expect: DD002
        metadata.scratch = torch.empty(bs * self.speculative_num_draft_tokens, dtype=torch.int32)  # expect: DD002
        metadata.custom_mask = spec_info.custom_mask
