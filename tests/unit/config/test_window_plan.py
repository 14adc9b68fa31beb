import pytest
import torch
from hypothesis import assume, given, strategies as st

from mindspeed_prof.errors import ConfigError
from mindspeed_prof.config.window import OPEN_ENDED, plan_window

Action = torch.profiler.ProfilerAction


def recorded_iterations(schedule, first, last):
    """Iterations a torch schedule records when its step counter equals the iteration number."""
    fn = torch.profiler.schedule(wait=schedule.wait, warmup=schedule.warmup,
                                 active=schedule.active, repeat=schedule.repeat,
                                 skip_first=schedule.skip_first)
    return [n for n in range(first, last + 1) if fn(n) in (Action.RECORD, Action.RECORD_AND_SAVE)]


@given(first=st.integers(1, 50), start=st.integers(1, 80), length=st.integers(1, 10),
       slack=st.integers(0, 20))
def test_schedule_records_exactly_the_window(first, start, length, slack):
    assume(start >= first)
    end = start + length
    train_iters = end - 1 + slack
    schedule = plan_window(start=start, end=end, first_iteration=first, train_iters=train_iters)
    assert recorded_iterations(schedule, first, train_iters) == list(range(start, end))
    assert schedule.first_touched >= first


@given(first=st.integers(1, 50), start=st.integers(1, 80), train_iters=st.integers(1, 120))
def test_minus_one_end_records_to_the_last_iteration(first, start, train_iters):
    assume(first <= start <= train_iters)
    schedule = plan_window(start=start, end=-1, first_iteration=first, train_iters=train_iters)
    assert recorded_iterations(schedule, first, train_iters) == list(range(start, train_iters + 1))


def test_warmup_is_used_when_an_iteration_precedes_the_window():
    schedule = plan_window(start=5, end=7, first_iteration=1)
    assert (schedule.skip_first, schedule.warmup, schedule.active) == (4, 1, 2)


def test_resumed_run_starting_at_the_window_has_no_warmup():
    schedule = plan_window(start=1001, end=1003, first_iteration=1001)
    assert (schedule.skip_first, schedule.warmup) == (1001, 0)


def test_window_already_passed_after_resume_says_where_the_run_starts():
    with pytest.raises(ConfigError) as info:
        plan_window(start=5, end=7, first_iteration=1001)
    assert "--profile-step-start 5 has already passed: this run resumes at iteration 1001" in str(info.value)


def test_window_beyond_train_iters_suggests_the_largest_end():
    with pytest.raises(ConfigError, match=r"--profile-step-end 20 .* --train-iters stops training after iteration 15; use --profile-step-end 16"):
        plan_window(start=10, end=20, train_iters=15)


def test_start_beyond_train_iters_is_refused():
    with pytest.raises(ConfigError, match="--profile-step-start 30 is never reached"):
        plan_window(start=30, end=32, train_iters=20)


def test_exit_interval_that_cuts_the_window_is_refused():
    with pytest.raises(ConfigError, match="--exit-interval stops training after iteration 6"):
        plan_window(start=5, end=8, train_iters=100, exit_interval=6)


def test_exit_interval_after_the_window_is_fine():
    assert plan_window(start=5, end=7, train_iters=100, exit_interval=6).end == 7


def test_open_ended_window_without_train_iters():
    schedule = plan_window(start=3, end=-1)
    assert schedule.active == OPEN_ENDED and schedule.end is None


def test_no_iteration_left_to_run():
    with pytest.raises(ConfigError, match="no iteration will run"):
        plan_window(start=11, end=12, first_iteration=11, train_iters=10)
