"""The window recorder's parts, each on its own: the queue of sessions still to open
(window_queue), the slot of the one session (window_slot), the budget (window_budget) and the
sources of run-time windows the plan asks (config/polled)."""

import itertools

import pytest

from mindspeed_prof import ProfilerConfig
from mindspeed_prof.config import polled
from mindspeed_prof.config.window import StepSchedule, plan_windows
from mindspeed_prof.recording.window_budget import WindowBudget
from mindspeed_prof.recording.window_queue import WindowQueue
from mindspeed_prof.recording.window_slot import State, WindowSlot


def window(start, length=1):
    return StepSchedule(skip_first=start, warmup=0, active=length)


def starts(sessions):
    return [s.start for s in sessions]


def test_the_queue_draws_an_endless_plan_one_session_at_a_time():
    queue = WindowQueue()
    queue.load(window(n) for n in itertools.count(10, 10))  # --profile-every: no end
    assert queue.next.start == 10
    assert queue.advance().start == 20 and queue.next.start == 20


def test_a_capture_goes_before_everything_queued_and_a_trigger_request_replaces_it():
    queue = WindowQueue()
    queue.load([window(10), window(20)])
    queue.put_first([window(5), window(6)])
    assert starts(queue.remaining()) == [5, 6, 10, 20]
    queue.load(queue.remaining())  # remaining() is drawn: loading it back keeps the order
    queue.load([window(30)])
    assert starts(queue.remaining()) == [30]
    queue.drop_rest()
    assert queue.next.start == 30 and queue.advance() is None


def test_remaining_without_the_next_session_leaves_it_out():
    queue = WindowQueue()
    queue.load([window(1), window(2)])
    assert starts(queue.remaining(with_next=False)) == [2]


def test_the_slot_has_no_session_until_one_opens_and_says_so():
    slot = WindowSlot()
    assert slot.state is State.IDLE and not slot.running
    with pytest.raises(RuntimeError, match="no session"):
        slot.current()
    slot.stopped.set()
    slot.opening(session=object())  # type: ignore[arg-type]
    assert slot.running and not slot.stopped.is_set() and slot.stop_wanted is None


def test_an_http_window_without_max_runs_under_its_own_budget_and_the_jobs_comes_back(tmp_path):
    from mindspeed_prof.config.window import WindowRequest
    from mindspeed_prof.control import http_control

    config = ProfilerConfig(profile=True, profile_save_path=str(tmp_path))
    budget = WindowBudget(used=lambda: 0)
    assert budget.limit is None and budget.allows(window(1)) and not budget.watched
    budget.own_for(config, "torch", WindowRequest(by="http"))
    assert isinstance(budget.limit, http_control.WindowBudget) and budget.watched
    assert budget.limit.limit_gb == http_control.DEFAULT_WINDOW_GB
    budget.end_own()
    assert budget.limit is None


@pytest.mark.parametrize("flags,planned", [
    ({}, [(1, 2)]),
    ({"profile_trigger_file": "t.json", "profile_every": 5}, []),
    ({"profile_on_slow_step": 2.0}, []),
    ({"profile_on_slow_step": 2.0, "profile_every": 5}, [(1, 2), (6, 7)]),
])
def test_the_plan_asks_the_table_of_run_time_sources_not_their_names(flags, planned):
    config = ProfilerConfig(profile=True, profile_step_start=1, profile_step_end=3, **flags)
    assert polled.polled(config) == bool(flags)
    windows = plan_windows(config, first_iteration=1, train_iters=8)
    assert [(w.start, w.end - 1) for w in windows] == planned
