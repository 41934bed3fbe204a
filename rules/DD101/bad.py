class ToyVerifyBackend:
    def init_forward_metadata(self, forward_batch):
        spec_info = forward_batch.spec_info
        if forward_batch.forward_mode.is_target_verify():
            self.max_extend_len = spec_info.draft_token_num  # ddcheck: ignore[DD001] fixed long ago  # expect: DD101
