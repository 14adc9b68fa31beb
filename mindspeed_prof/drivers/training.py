"""The training driver: iterations as Megatron's log prints them.

Life of a training driver (the Megatron patches drive it; plain loops use
``mindspeed_prof.profile``)::

    driver = TrainingDriver(config, rank=r, world_size=w)    # rank chosen, backend chosen
    driver.arm(first_iteration=i0, train_iters=n)            # windows checked, save path checked
    for it in iterations:                                    # logged numbering, 1-based
        driver.step_begin(it); train_step(); driver.step_end(it)
    driver.close("finished")                                 # in a finally: always flushes

The driver counts; its window recorder (``recorder.py``) records. ``ProfilerManager`` is the
name it has always had.
"""

from typing import Any, Callable, Optional, TypeVar

from ..config.profiler_config import ProfilerConfig
from ..recording.recorder import WindowRecorder
from ..config.units import ITERATION
from .base import RecorderView

T = TypeVar("T")


class TrainingDriver(RecorderView):
    """Iterations of a training loop into a window recorder (see the module docstring)."""

    def __init__(self, config: ProfilerConfig, **kwargs: Any) -> None:
        kwargs.setdefault("unit", ITERATION)
        self.recorder = WindowRecorder(config, **kwargs)
        recorder = self.recorder
        # The calls of the hot path go straight to the recorder (a no-op where it is idle).
        self.begin = self.step_begin = recorder.begin
        self.end = self.step_end = recorder.end
        self.range = recorder.range
        self.mark = recorder.mark  # the pipeline schedule's marks (patches/megatron_schedule*)
        self.retract = recorder.retract

    def arm(self, *, first_iteration: int = 1, train_iters: Optional[int] = None,
            exit_interval: Optional[int] = None) -> None:
        """``first_iteration`` is ``args.iteration + 1`` after a resume; ``train_iters`` and
        ``exit_interval`` are Megatron's, checked against every window before step 1."""
        self.recorder.arm(first=first_iteration, last=train_iters, exit_interval=exit_interval)

    def run(self, number: Callable[[tuple, dict], int], label: Optional[str],
            work: Callable[..., T], args: tuple, kwargs: dict) -> T:
        """One iteration of ``work`` (Megatron's ``train_step``), numbered by ``number(args,
        kwargs)``, inside a ``label`` range when given (megatron.rl: the policy update). An
        exception leaves the recorder to the loop's own close, which knows how training ended."""
        n = number(args, kwargs)
        recorder = self.recorder
        recorder.begin(n)
        if label is None:
            result = work(*args, **kwargs)
        else:
            with recorder.range(label):
                result = work(*args, **kwargs)
        recorder.end(n)
        return result

    def close(self, reason: str = "finished", detail: Optional[str] = None,
              wait_timeout: Optional[float] = None, wait: bool = True) -> None:
        self.recorder.close(reason, detail, wait_timeout=wait_timeout, wait=wait)

    @property
    def backend_name(self) -> Optional[str]:
        return self.recorder.backend_name

    @property
    def selected_ranks(self) -> list:
        return self.recorder.selected_ranks


ProfilerManager = TrainingDriver  # the name the training code and users have always used
