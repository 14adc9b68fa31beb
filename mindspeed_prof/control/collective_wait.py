"""How long each thread has waited in torch.distributed collectives (``--profile-on-straggler``).

A rank's own compute time is its unit's time minus the time it spent blocked waiting for the
other ranks. Every blocking collective of torch.distributed ends in ``Work.wait()`` (a
synchronous ``all_reduce`` waits on its work inside ``distributed_c10d``; ``async_op=True``
handles and coalesced groups are waited on by the caller): timing that one method measures the
wait wherever the host blocks in it, which gloo does. NCCL and HCCL collectives are
asynchronous on the host (``wait()`` only orders streams), so there the measure is about zero
and the number is the unit's time as the rank saw it (``measure()`` says which).

Installed only while a recorder with ``--profile-on-straggler`` is open (counted, so several
recorders of one process share it), and removed when the last one closes: without the flag
nothing of torch is touched.
"""

import threading
import time
from typing import Any, Dict, Optional

# Reentrant: a SIGTERM's flush (exits.py) that stops another recorder's poll runs uninstall()
# on the main thread, maybe inside the install() or uninstall() it interrupted; either sees a
# count it can act on, never a lock its own thread holds.
_lock = threading.RLock()
_users = 0
_original: Any = None
_waited: Dict[int, float] = {}  # thread ident -> seconds waited so far


def _work_class() -> Any:
    import torch.distributed as dist

    if not dist.is_available():
        return None
    from torch._C._distributed_c10d import Work

    return Work


def install() -> bool:
    """Start timing ``Work.wait`` (once per process); False where torch.distributed is absent."""
    global _users, _original
    with _lock:
        if _users:
            _users += 1
            return True
        work = _work_class()
        if work is None:
            return False
        original = work.wait

        def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                ident = threading.get_ident()
                _waited[ident] = _waited.get(ident, 0.0) + time.perf_counter() - start

        wait.__doc__ = original.__doc__
        work.wait = wait
        _original, _users = original, 1
        return True


def uninstall() -> None:
    """One user fewer; the last one puts ``Work.wait`` back."""
    global _users, _original
    with _lock:
        if not _users:
            return
        _users -= 1
        if _users == 0 and _original is not None:
            _work_class().wait = _original
            _original = None
            _waited.clear()


def waited() -> float:
    """Seconds this thread has spent in ``Work.wait`` since timing began."""
    return _waited.get(threading.get_ident(), 0.0)


def measure(backend: Optional[str]) -> str:
    """What a rank's number is on a process group of ``backend``, in words."""
    if backend == "gloo":
        return "compute time: unit time minus time waiting in collectives"
    return (f"unit time as the rank saw it ({backend or 'no'} process group: its collectives do "
            f"not block the host, so the wait cannot be told apart)")
