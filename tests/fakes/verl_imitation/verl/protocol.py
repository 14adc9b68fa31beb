"""verl/protocol.py's DataProto, as far as a rollout reads it: tensors and ``meta_info``."""


class DataProto:
    def __init__(self, batch=None, meta_info=None):
        self.batch = dict(batch or {})
        self.meta_info = dict(meta_info or {})
