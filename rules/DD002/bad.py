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

    def init_cuda_graph_state(self, max_bs, max_num_tokens):
        self.cuda_graph_custom_mask = torch.zeros(max_num_tokens * (4096 + self.speculative_num_draft_tokens))

    def init_forward_metadata_replay_cuda_graph(self, bs, forward_mode, spec_info):
        if forward_mode.is_target_verify():
            mask = self.cuda_graph_custom_mask
            mask[: spec_info.custom_mask.shape[0]] = spec_info.custom_mask  # expect: DD002
