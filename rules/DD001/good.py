import torch


class ToyVerifyBackend:
    def __init__(self, model_runner):
        self.num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens

    def init_forward_metadata(self, forward_batch):
        bs = forward_batch.batch_size
        spec_info = forward_batch.spec_info
        if forward_batch.forward_mode.is_target_verify():
            # Per-step verify width; C only if the verify input has none (ddcheck fix).
            num_tokens_per_req = getattr(spec_info, "draft_token_num", None) or self.num_draft_tokens
            qo_indptr = torch.arange(
                0,
                (1 + bs) * num_tokens_per_req,
                step=num_tokens_per_req,
            )
            seq_mask_len = num_tokens_per_req * (forward_batch.seq_lens + num_tokens_per_req)
            max_extend_len = num_tokens_per_req
            # this step's key bound (the page table is sliced to it), and a tensor made in the step
            max_seq_len_k = forward_batch.seq_lens_cpu.max().item() + num_tokens_per_req
            positions = torch.empty(bs * num_tokens_per_req, dtype=torch.int64)
            self.metadata = (qo_indptr, seq_mask_len, max_extend_len, max_seq_len_k, positions, spec_info.custom_mask)
