"""SIGTERM latch for --exit-signal-handler: the loop polls it and exits cleanly."""

import signal

import torch


class DistributedSignalHandler:
    def __init__(self, sig=signal.SIGTERM):
        self.sig = sig
        self._received = False
        self._original_handler = None

    def signals_received(self):
        """One flag per rank; every rank must call it, it is a collective."""
        flags = [torch.zeros(1, dtype=torch.int) for _ in range(torch.distributed.get_world_size())]
        torch.distributed.all_gather(flags, torch.tensor([int(self._received)], dtype=torch.int))
        return [bool(flag.item()) for flag in flags]

    def __enter__(self):
        self._received = False
        self._original_handler = signal.getsignal(self.sig)

        def handler(signum, frame):
            self._received = True

        signal.signal(self.sig, handler)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.release()

    def release(self):
        if self._original_handler is not None:
            signal.signal(self.sig, self._original_handler)
            self._original_handler = None
