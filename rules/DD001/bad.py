import torch


class ToyVerifyBackend:
    def __init__(self, model_runner):
        self.num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens

    def init_forward_metadata(self, forward_batch):
        bs = forward_batch.batch_size
        spec_info = forward_batch.spec_info
        if forward_batch.forward_mode.is_target_verify():
            qo_indptr = torch.arange(
                0,
                (1 + bs) * self.num_draft_tokens,  # expect: DD001
                step=self.num_draft_tokens,  # expect: DD001
            )
            seq_mask_len = self.num_draft_tokens * (forward_batch.seq_lens + self.num_draft_tokens)  # expect: DD001 DD001
            max_extend_len = self.num_draft_tokens  # expect: DD001
            # this step's key bound (the page table is sliced to it), and a tensor made in the step
            max_seq_len_k = forward_batch.seq_lens_cpu.max().item() + self.num_draft_tokens  # expect: DD001
            positions = torch.empty(bs * self.num_draft_tokens, dtype=torch.int64)  # expect: DD001
            self.metadata = (qo_indptr, seq_mask_len, max_extend_len, max_seq_len_k, positions, spec_info.custom_mask)
