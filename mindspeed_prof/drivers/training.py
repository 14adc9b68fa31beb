"""The training driver: a window recorder counting iterations as Megatron's log prints them.

Life of a manager (the Megatron patches drive it; plain loops use ``mindspeed_prof.profile``)::

    manager = ProfilerManager(config, rank=r, world_size=w)   # rank chosen, backend chosen
    manager.arm(first_iteration=i0, train_iters=n)            # windows checked, save path checked
    for it in iterations:                                     # logged numbering, 1-based
        manager.step_begin(it); train_step(); manager.step_end(it)
    manager.close("finished")                                 # in a finally: always flushes

Everything but the iteration vocabulary is the recorder's (``mindspeed_prof/recorder.py``).
"""

from typing import Optional

from ..recorder import WindowRecorder
from ..units import ITERATION


class ProfilerManager(WindowRecorder):
    def __init__(self, config, **kwargs):
        kwargs.setdefault("unit", ITERATION)
        super().__init__(config, **kwargs)

    def arm(self, *, first_iteration: int = 1, train_iters: Optional[int] = None,
            exit_interval: Optional[int] = None) -> None:
        """``first_iteration`` is ``args.iteration + 1`` after a resume; ``train_iters`` and
        ``exit_interval`` are Megatron's, checked against every window before step 1."""
        super().arm(first=first_iteration, last=train_iters, exit_interval=exit_interval)
