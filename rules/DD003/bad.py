import torch


class ToyVerifyBackend:
    def __init__(self, model_runner):
        self.num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens

    def init_forward_metadata(self, forward_batch):
        bs = forward_batch.batch_size
        spec_info = forward_batch.spec_info
        if forward_batch.forward_mode.is_target_verify():
            num_draft_tokens = self.num_draft_tokens  # expect: DD003
            if spec_info is not None and getattr(spec_info, "draft_token_num", None) is not None:
                num_draft_tokens = int(spec_info.draft_token_num)
            qo_indptr = torch.arange(0, (1 + bs) * num_draft_tokens, step=num_draft_tokens)
            width = spec_info.draft_token_num if spec_info is not None else self.num_draft_tokens  # expect: DD003
            self.metadata = (qo_indptr, width, self._verify_width(spec_info))

    def _verify_width(self, spec_info):
        # A width resolver: W for the tree drafter's own input, C for the others.
        if spec_info is not None and hasattr(spec_info, "tree_budget"):
            return spec_info.draft_token_num
        return self.num_draft_tokens  # expect: DD003
