"""mindspeed_prof/control/http_control.py: what POST /start_profile may carry (vLLM's prefix, delay, max,
defaults from the flags), the refusals (400), and one window at a time across the forked
front-end processes of one server (409), as the routes and the engine's rank 0 share it."""

import multiprocessing
import os

import pytest

from mindspeed_prof import ProfilerConfig
from mindspeed_prof.control.http_control import (BadRequest,
    WindowControl,
    engine_defaults,
    from_payload,
    payload,
    start_request)


def test_a_start_body_may_name_its_folder_the_steps_to_skip_and_the_steps_to_record():
    request = start_request({"prefix": "decode-heavy_2", "delay": 3, "max": 5})
    assert (request.prefix, request.delay, request.length, request.by) == \
        ("decode-heavy_2", 3, 5, "http")


def test_an_empty_body_records_from_the_next_step_until_the_stop_unless_the_flags_say():
    assert (start_request(None).delay, start_request({}).length) == (0, 0)
    config = ProfilerConfig(profile=True, profile_forwards=["3-6"])
    assert engine_defaults(config) == (2, 4)  # steps 3..6 of the window: vLLM's delay 2, max 4
    request = start_request({}, *engine_defaults(config))
    assert (request.delay, request.length) == (2, 4)
    assert start_request({"max": 0}, *engine_defaults(config)).length == 0  # the body wins


@pytest.mark.parametrize("body,words", [
    ({"prefix": "../up"}, "not a folder name"),
    ({"prefix": "a/b"}, "not a folder name"),
    ({"prefix": "a\\b"}, "not a folder name"),
    ({"prefix": ".hidden"}, "leading '.'"),
    ({"prefix": ""}, "non-empty folder name"),
    ({"prefix": 7}, "non-empty folder name"),
    ({"prefix": "p" * 65}, "at most 64"),
    ({"prefix": "a b"}, "character(s) ' '"),
    ({"delay": -1}, "'delay' must be an integer >= 0"),
    ({"delay": 1.5}, "'delay' must be an integer >= 0"),
    ({"max": "3"}, "'max' must be an integer >= 0"),
    ({"max": True}, "'max' must be an integer >= 0"),
    ({"steps": 3}, "unknown field(s) 'steps'"),
    ([1, 2], "must be a JSON object"),
])
def test_a_start_body_that_is_not_a_window_is_refused_naming_the_field(body, words):
    with pytest.raises(BadRequest) as refused:
        start_request(body)
    assert words in str(refused.value)


def test_our_knobs_travel_in_the_relayed_signal_and_a_foreign_payload_is_refused():
    request = start_request({"prefix": "p", "delay": 1, "max": 2})
    travelled, generation = from_payload([payload(request, 7)])
    assert (travelled, generation) == (request, 7)
    default, none = from_payload([], 1, 4)  # upstream's own signal: the flags' defaults
    assert (default.delay, default.length, none) == (1, 4, None)
    assert from_payload([{"prefix": "../x"}]) == (None, None)
    assert from_payload([{"mindspeed_prof": 1, "prefix": "../x"}]) == (None, None)


def test_one_window_at_a_time_and_a_stop_needs_a_running_window():
    control = WindowControl()
    assert control.try_stop() == (None, "no window started over HTTP is running")
    generation, _ = control.try_start()
    assert generation == 1
    again, why = control.try_start()
    assert again is None and "POST /stop_profile first" in why
    assert control.try_stop() == (1, "")
    assert control.try_start()[0] == 2


def _start_in_child(control, queue):
    queue.put(control.try_start())


def test_front_ends_forked_from_the_serving_process_share_the_one_window_rule():
    control = WindowControl()
    assert control.try_start()[0] == 1
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_start_in_child, args=(control, queue))
    child.start()
    child.join(30)
    generation, why = queue.get(timeout=5)
    assert generation is None and "already running" in why  # another front end's start
    control.try_stop()
    child = context.Process(target=_start_in_child, args=(control, queue))
    child.start()
    child.join(30)
    assert queue.get(timeout=5)[0] == 2
    assert control.open  # the child's start is the server's


def test_a_window_with_a_length_is_closed_for_the_routes_when_rank_0_passes_its_last_step():
    control = WindowControl()
    generation, _ = control.try_start()
    control.started(generation, asked_before=10, request=start_request({"delay": 1, "max": 2}))
    # Asked before step 10, delay 1, max 2: step 10 skipped, steps 11 and 12 recorded.
    control.unit_ended(11)
    assert control.open
    control.unit_ended(12)
    assert not control.open
    again, why = control.try_stop()
    assert again is None and "ended by itself after its 'max' units" in why


@pytest.mark.parametrize("taken_here", [True, False], ids=["rank 0 records", "rank 0 relays"])
def test_a_window_is_closed_for_the_routes_when_rank_0_records_it_and_no_longer_holds_it(
        taken_here):
    # Rank 0 relays it only under --profile-ranks 1: its recorder never holds the window, so
    # its answer says nothing of the window's end.
    control = WindowControl()
    generation, _ = control.try_start()
    control.started(generation, asked_before=3, request=start_request({}), taken_here=taken_here)
    control.unit_ended(3, asked_pending=True)
    assert control.open
    control.unit_ended(4, asked_pending=False)  # rank 0 stopped it: its budget
    if not taken_here:
        assert control.open and control.try_stop() == (generation, "")
        return
    assert not control.open
    again, why = control.try_stop()
    assert again is None and f"window {generation} ended on rank 0 before a stop" in why
    assert control.try_start()[0] == generation + 1


def test_a_window_from_the_flags_running_on_rank_0_refuses_a_start():
    control = WindowControl()
    control.flags_window(True)
    generation, why = control.try_start()
    assert generation is None and "from the profiling flags" in why
    control.flags_window(False)
    assert control.try_start()[0] == 1


def test_the_control_imports_no_web_framework_nor_megatron():
    import subprocess
    import sys

    code = ("import sys, mindspeed_prof.control.http_control; "
            "print([m for m in ('quart', 'flask', 'megatron', 'zmq') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, MINDSPEED_PROF_AUTOLOAD="0"), check=True)
    assert out.stdout.strip() == "[]"
