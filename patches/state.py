"""Process-wide state of the integration. Kept here, never on Megatron's ``args``: args are
pickled into checkpoints, and a live profiler there breaks checkpoint saving (MindSpeed !2806)."""

import sys

from mindspeed_prof import log
from mindspeed_prof.patches.registry import PatchRegistry

registry = PatchRegistry()


class _State:
    def __init__(self):
        self.reset()

    def reset(self):
        self.activated_by = None   # "launcher", "auto", "autoload", "mindspeed"
        self.argv = None           # the command line as typed (before any rewriting)
        self.config = None         # ProfilerConfig, once Megatron's args are validated
        self.manager = None        # the live ProfilerManager while train() runs
        self.update_range = None   # "stage:update" once megatron.rl's RL loop runs (megatron_rl)
        self.finished_manager = None  # the last train()'s manager: its export may still run
        self.inference = None      # the request driver, once an engine or a request armed it
        self.train_hooked = False  # a patched train() ran: the chain is connected
        self.usage_error = False   # we stopped the job on bad flags (already said so)
        self.left_to_host = None   # "nsys": the host's own profiler runs this process (said so)


state = _State()


def usage_exit(message, rank=0, show=True):
    """A usage error found inside the training process: one line, exit code 2, no traceback."""
    state.usage_error = True
    if show:
        log.error(f"{message}", rank=rank)
    sys.stdout.flush()
    raise SystemExit(2)
