import torch


class ToyVerifyBackend:
    def __init__(self, model_runner):
        self.num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens

    def init_forward_metadata(self, forward_batch):
        bs = forward_batch.batch_size
        spec_info = forward_batch.spec_info
        if forward_batch.forward_mode.is_target_verify():
            # An equality guard and a log line read C without laying anything out.
            if spec_info.draft_token_num == self.num_draft_tokens:
                print(f"verify width matches the start-up width {self.num_draft_tokens}")
            width = spec_info.draft_token_num
            qo_indptr = torch.arange(0, (1 + bs) * width, step=width)
            self.metadata = (qo_indptr, width)
