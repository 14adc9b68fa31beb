"""Megatron's 1f1b schedule, marked while a window records.

1F1B: warm-up forwards, the steady one-forward-one-backward phase, cool-down backwards.

Megatron picks the schedule in ``get_forward_backward_func`` by looking this name up at call
time, so wrapping the module attribute reaches every step. The marks it opens and what they
carry: ``megatron_schedule_marks.py``. A schedule another package registered under this name
(MindSpeed's DualPipeV under 1F1B's) is wrapped as it is found and marked ``replaced``.
"""

import functools
from typing import Any, Callable

from mindspeed_prof.config import schedule_marks as sm
from mindspeed_prof.patches.megatron_schedule_marks import SCHEDULES, family_of, run_schedule

TARGET = f"{SCHEDULES}.forward_backward_pipelining_without_interleaving"


def mindspeed_prof_one_f_one_b_schedule_wrapper(schedule: Callable[..., Any]) -> Callable[..., Any]:
    family = family_of(sm.ONE_F_ONE_B, schedule)

    @functools.wraps(schedule)
    def marked_schedule(*args: Any, **kwargs: Any) -> Any:
        return run_schedule(family, schedule, args, kwargs)

    return marked_schedule


WRAPPER = mindspeed_prof_one_f_one_b_schedule_wrapper
