class ToyVerifyBackend:
    def __init__(self, model_runner):
        self.num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens

    def init_forward_metadata(self, forward_batch):
        if forward_batch.forward_mode.is_target_verify():
            self.max_extend_len = self.num_draft_tokens  # ddcheck: ignore[DD001] this toy never runs tree drafters
