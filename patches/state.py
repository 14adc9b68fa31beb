"""Process-wide state of the integration. Kept here, never on Megatron's ``args``: args are
pickled into checkpoints, and a live profiler there breaks checkpoint saving (MindSpeed !2806)."""

import sys
import threading

from mindspeed_prof import log
from mindspeed_prof.drivers.base import NULL_DRIVER
from mindspeed_prof.patches.registry import PatchRegistry

registry = PatchRegistry()


class _State:
    def __init__(self):
        self.reset()

    def reset(self):
        self.activated_by = None   # "launcher", "auto", "autoload", "mindspeed"
        self.argv = None           # the command line as typed (before any rewriting)
        self.config = None         # ProfilerConfig, once Megatron's args are validated
        # The drivers the hooks call: the null driver until one records here (never None).
        self.manager = NULL_DRIVER  # the training driver while a profiled train() runs
        self.inference = NULL_DRIVER  # the request driver, once an engine or a request armed it
        self.engine = NULL_DRIVER  # the engine-step driver, once a dynamic engine armed it
        self.window_given = True   # a window flag was given (False: a server waits for HTTP)
        self.static_building = threading.local()  # a static engine builds its dynamic one
        self.training = False      # a patched train() is running (its generate()s are no requests)
        self.update_range = None   # "stage:update" once megatron.rl's RL loop runs (megatron_rl)
        self.finished_manager = None  # the last train()'s driver: its export may still run
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
