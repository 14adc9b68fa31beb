"""verl/single_controller/base/worker.py: a worker knows its rank and world size from the
environment Ray's worker group sets."""

import os


class Worker:
    def __init__(self, cuda_visible_devices=None):
        self._rank = int(os.environ.get("RANK", 0))
        self._world_size = int(os.environ.get("WORLD_SIZE", 1))

    @property
    def rank(self):
        return self._rank

    @property
    def world_size(self):
        return self._world_size
