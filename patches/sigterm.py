"""SIGTERM inside a Megatron job: the core's flush-on-signal (``mindspeed_prof.recording.exits``), taken early.

When one rank fails, torchrun sends SIGTERM to the others (SIGKILL 30 s later); SLURM's time
limit, ``scancel`` and a container stop send it to every process of the job. The core's handler
flushes every live recorder, then chains to whatever handled SIGTERM before. A recorder installs
it when its run arms, but by then Megatron's own ``--exit-signal-handler`` would already own
SIGTERM; so we install it when Megatron's args are validated (``set_global_variables``, which
installs Megatron's handler, runs after ``validate_args``). Megatron's latch then owns SIGTERM,
ends training through ``sys.exit`` at the end of the iteration, and ``train()``'s ``finally``
flushes inside ``exits.final_flush()``.
"""

from mindspeed_prof.recording import exits

# torchrun's SIGKILL follows its SIGTERM after 30 s: the core's bound.
FLUSH_TIMEOUT_S = exits.SIGNAL_FLUSH_TIMEOUT_S


def install():
    """Take SIGTERM over, chained to the current handler; idempotent, main thread only."""
    exits.install_signal_flush(pin=True)


def uninstall():
    """Put the handler we chained to back, if ours is still the one installed."""
    exits.uninstall_signal_flush()
