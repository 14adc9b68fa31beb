"""Megatron's schedule family '1f1b' marked while a window records: 1F1B: warm-up forwards, the steady one-forward-one-backward phase, cool-down backwards.

Megatron picks the schedule in ``get_forward_backward_func`` by looking this name up at call
time, so wrapping the module attribute reaches every step. The marks it opens and what they
carry: ``megatron_schedule_marks.py``.
"""

import functools
from typing import Any, Callable

from mindspeed_prof.config import schedule_marks as sm
from mindspeed_prof.patches.megatron_schedule_marks import SCHEDULES, run_schedule

TARGET = f"{SCHEDULES}.forward_backward_pipelining_without_interleaving"


def mindspeed_prof_one_f_one_b_schedule_wrapper(schedule: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(schedule)
    def marked_schedule(*args: Any, **kwargs: Any) -> Any:
        return run_schedule(sm.ONE_F_ONE_B, schedule, args, kwargs)

    return marked_schedule


WRAPPER = mindspeed_prof_one_f_one_b_schedule_wrapper
