"""The id the ranks of one job share without talking, written in every manifest (``run_id``), so
that ``check`` can tell two jobs writing into one save path apart."""

import os
import socket
import sys


def job_run_id(env=None):
    """An id the ranks of one job share without talking: torchrun's ``TORCHELASTIC_RUN_ID`` (a
    fresh uuid with ``--standalone``; ``none`` when not given), else SLURM's job and step, else
    this process (a plain loop, or ranks that share nothing: told apart by rank collisions)."""
    env = os.environ if env is None else env
    run = env.get("TORCHELASTIC_RUN_ID", "")
    if run and run != "none":
        return run
    if env.get("SLURM_JOB_ID"):
        step = env.get("SLURM_STEP_ID")
        return f"slurm{env['SLURM_JOB_ID']}" + (f".{step}" if step else "")
    own = f"{socket.gethostname()}-{os.getpid()}"
    return _shared_through_the_job_store(own) or own


_RUN_KEY = "mindspeed_prof/run_id"


def _shared_through_the_job_store(candidate):
    """torchrun without --rdzv-id/--standalone hands its workers no run id: the first rank to
    ask puts its own into the job's key-value store (torch.distributed's default store, which
    every rank of the job reaches) and every other rank reads that one. No collective, no wait:
    ``compare_set`` only sets a key that is not there yet. None where there is no job store."""
    dist = sys.modules.get("torch.distributed")  # never imported for this
    try:
        if dist is None or not (dist.is_available() and dist.is_initialized()):
            return None
        from torch.distributed.distributed_c10d import _get_default_store

        stored = _get_default_store().compare_set(_RUN_KEY, "", candidate)
        return stored.decode() if isinstance(stored, bytes) else str(stored)
    except Exception:  # noqa: BLE001 - a private API, a store gone: each rank keeps its own
        return None
