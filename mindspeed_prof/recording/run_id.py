"""The id the ranks of one job share, written in every manifest (``run_id``) with where it came
from (``run_id_source``), so that ``check`` can tell two jobs writing into one save path apart.

The source is what the readers go by (``output/read/jobruns.py``): an id agreed through the
job's store is the ``host-pid`` of the rank that got there first, spelled exactly as a lone
process's own id, so the spelling cannot say whether the ranks share it.
"""

import os
import socket
import sys
from typing import NamedTuple

# Where a run id came from: every rank of the job has the same one, except with PROCESS.
TORCHELASTIC = "torchelastic"  # torchrun's TORCHELASTIC_RUN_ID (--standalone, --rdzv-id)
SLURM = "slurm"  # SLURM_JOB_ID.SLURM_STEP_ID, or SLURM_JOB_ID where no job store answers
JOB_STORE = "job-store"  # agreed through torch.distributed's store (torchrun --master-addr)
PROCESS = "process"  # this process's own host-pid: shared with no other rank


class JobRun(NamedTuple):
    run_id: str
    source: str  # one of SOURCES


def job_run(env=None) -> JobRun:
    """An id the ranks of one job share and where it came from: torchrun's
    ``TORCHELASTIC_RUN_ID`` (a fresh uuid with ``--standalone``; ``none`` when not given), else
    SLURM's job and step (``srun``), else one agreed through the job's store (torchrun with
    ``--master-addr``, ``torch.distributed.launch``, also inside a SLURM allocation without a
    step), else SLURM's job alone, else this process's own (a plain loop, or ranks that share
    nothing: told apart by rank collisions)."""
    env = os.environ if env is None else env
    run = env.get("TORCHELASTIC_RUN_ID", "")
    if run and run != "none":
        return JobRun(run, TORCHELASTIC)
    slurm_job, step = env.get("SLURM_JOB_ID"), env.get("SLURM_STEP_ID")
    if slurm_job and step:
        return JobRun(f"slurm{slurm_job}.{step}", SLURM)
    own = f"{socket.gethostname()}-{os.getpid()}"
    shared = _shared_through_the_job_store(own)
    if shared:
        # Before SLURM's bare job id: every torchrun started in one allocation's shell (sbatch
        # script, salloc) has that job id and no step id, and each is a job of its own.
        return JobRun(shared, JOB_STORE)
    if slurm_job:  # no job store to agree through: the allocation is the best shared id
        return JobRun(f"slurm{slurm_job}", SLURM)
    return JobRun(own, PROCESS)


def job_run_id(env=None) -> str:
    """``job_run(env).run_id``."""
    return job_run(env).run_id


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
