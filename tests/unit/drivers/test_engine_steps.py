"""The engine-step driver and the windows asked for at run time, on the CPU with torch.profiler:
step numbers as trace step ids, forwards labelled with what they carried, HTTP starts and stops
at step boundaries (delay, max, prefix folders, one window at a time, the disk budget), steps
that hop threads, and what summary reads back. The engine itself is a plain loop here; the real
one runs in tests/e2e/test_dynamic_profiling.py."""

import json
import os
import threading

import pytest
import torch

from helpers import loop
from helpers.traces import manifest, step_ids, torch_traces
from mindspeed_prof.drivers.engine import EngineStepDriver, forward_label
from mindspeed_prof.drivers.inference import RequestDriver
from mindspeed_prof.control.http_control import start_request


def config(save, **knobs):
    # the shared builder, saving straight into the test's folder: the readers run on it as given
    return loop.config(save, profile_save_path=str(save), **knobs)


def work():
    a = torch.randn(24, 24)
    return a @ a


def step(driver, n, prefill=0, decode=2, tokens=2, finished=()):
    with driver.step(n) as running:
        with driver.forward(prefill=prefill, decode=decode, tokens=tokens):
            work()
        running.finished = list(finished)


def traces_under(save):
    return {os.path.relpath(os.path.dirname(t), save): t for t in torch_traces(save)}


def names(trace):
    with open(trace) as handle:
        events = json.load(handle)["traceEvents"]
    return sorted({e["name"] for e in events if e.get("cat") == "user_annotation"
                   and not e["name"].startswith("ProfilerStep")})


def test_steps_3_and_4_are_the_trace_step_ids_and_each_forward_is_named_after_its_batch(tmp_path):
    driver = EngineStepDriver(config(tmp_path, profile_step_start=3, profile_step_end=5))
    driver.arm()
    for n in range(1, 7):
        step(driver, n, prefill=1 if n == 3 else 0, decode=2, tokens=23 if n == 3 else 2,
             finished=[2] if n == 3 else ())
    driver.close()
    traces = traces_under(tmp_path)
    assert list(traces) == ["estep_3-4"] and step_ids(traces["estep_3-4"]) == [3, 4]
    assert names(traces["estep_3-4"]) == ["decode 0p+2d 2t", "mixed 1p+2d 23t"]
    window = manifest(tmp_path, 0)["windows"][0]
    assert window["started_by"] == {"by": "flags"}
    assert [(u["n"], u["kind"], u["tokens"], u.get("finished_requests")) for u in
            window["units"]] == [(3, "mixed", 23, [2]), (4, "decode", 2, None)]
    assert manifest(tmp_path, 0)["units_run"] == 6


def test_an_http_start_records_from_the_next_step_until_the_stop_into_its_prefix_folder(tmp_path):
    driver = EngineStepDriver(config(tmp_path))
    driver.arm(planned=False)  # no window flag: a server waits for the start
    step(driver, 1)
    assert driver.start_window(2, start_request({"prefix": "burst"})) == "queued"
    for n in (2, 3, 4):
        step(driver, n)
    assert driver.stop_window() == "stopped"
    step(driver, 5)
    driver.close()
    traces = traces_under(tmp_path)
    assert list(traces) == ["burst/estep_2-end"] and step_ids(traces["burst/estep_2-end"]) == \
        [2, 3, 4]
    window = manifest(tmp_path, 0)["windows"][0]
    assert (window["status"], window["iterations_recorded"]) == ("complete", [2, 3, 4])
    assert window["started_by"] == {"by": "http", "asked_before": 2, "delay": 0, "max": None,
                                    "prefix": "burst"}
    assert "stopped_early" not in window and "cut" not in window


def test_a_start_with_delay_and_max_skips_then_records_then_ends_by_itself(tmp_path):
    driver = EngineStepDriver(config(tmp_path))
    driver.arm(planned=False)
    driver.start_window(1, start_request({"delay": 2, "max": 2}))
    for n in range(1, 8):
        step(driver, n)
    driver.close()
    assert [step_ids(t) for t in torch_traces(tmp_path)] == [[3, 4]]
    assert driver.stop_window() == "not running"  # it ended by itself after max steps


def test_a_start_while_a_window_runs_is_refused_and_said(tmp_path):
    driver = EngineStepDriver(config(tmp_path))
    driver.arm(planned=False)
    driver.start_window(1, start_request({}))
    step(driver, 1)
    assert driver.start_window(2, start_request({"max": 1})) == "busy"
    step(driver, 2)
    driver.stop_window()
    driver.close()
    assert [step_ids(t) for t in torch_traces(tmp_path)] == [[1, 2]]
    warnings = [w["message"] for w in manifest(tmp_path, 0)["warnings"]]
    assert any("one window at a time" in w for w in warnings)


def test_a_stop_before_the_delayed_window_began_records_nothing_and_says_so(tmp_path):
    driver = EngineStepDriver(config(tmp_path))
    driver.arm(planned=False)
    driver.start_window(1, start_request({"delay": 5}))
    step(driver, 1)
    assert driver.stop_window() == "stopped"
    for n in (2, 3, 4, 5, 6, 7):
        step(driver, n)
    driver.close()
    assert torch_traces(tmp_path) == []
    warnings = [w["message"] for w in manifest(tmp_path, 0)["warnings"]]
    assert any("before its first engine step ran; nothing was recorded" in w for w in warnings)


def test_the_disk_budget_refuses_a_requested_window_that_cannot_fit(tmp_path):
    driver = EngineStepDriver(config(tmp_path, profile_max_gb=0.001))
    driver.arm(planned=False)
    driver.start_window(1, start_request({"max": 50}))  # ~10 MB a step estimated: 500 MB
    for n in range(1, 4):
        step(driver, n)
    driver.close()
    assert torch_traces(tmp_path) == []
    warnings = [w["message"] for w in manifest(tmp_path, 0)["warnings"]]
    assert any("--profile-max-gb 0.001 would be exceeded" in w for w in warnings)


def test_no_window_flag_plans_no_window_and_the_manifest_says_none_was_asked_for(tmp_path):
    driver = EngineStepDriver(config(tmp_path))
    driver.arm(planned=False)
    for n in range(1, 15):
        step(driver, n)
    driver.close()
    data = manifest(tmp_path, 0)
    assert data["windows"] == [] and data["status"] == "incomplete"
    assert any("no window was asked for" in w["message"] for w in data["warnings"])


def test_steps_that_hop_threads_are_recorded_one_session_per_step_on_their_own_thread(tmp_path):
    driver = EngineStepDriver(config(tmp_path, profile_step_start=2, profile_step_end=4))
    driver.arm()
    threads = {}

    def one_step(n):
        threads[n] = threading.get_native_id()
        step(driver, n)

    for n in range(1, 5):
        driver.steps_hop_threads()  # what step_modern inside a running event loop does
        thread = threading.Thread(target=one_step, args=(n,))
        thread.start()
        thread.join()
    driver.close()
    traces = traces_under(tmp_path)
    assert sorted(traces) == ["estep_2-2", "estep_3-3"]
    assert [step_ids(traces[k]) for k in sorted(traces)] == [[2], [3]]
    assert manifest(tmp_path, 0)["planned"][0]["recorded"] == [2, 3]


def test_a_dummy_forward_is_a_step_of_its_own_named_dummy(tmp_path):
    driver = EngineStepDriver(config(tmp_path, profile_step_start=1, profile_step_end=3))
    driver.arm()
    step(driver, 1)
    with driver.dummy(2):
        with driver.forward(prefill=0, decode=0, tokens=8):  # the dummy's own forward
            work()
    step(driver, 3)
    driver.close()
    (trace,) = torch_traces(tmp_path)
    assert step_ids(trace) == [1, 2] and names(trace) == ["decode 0p+2d 2t", "dummy"]
    units = manifest(tmp_path, 0)["windows"][0]["units"]
    assert [u["kind"] for u in units] == ["decode", "dummy"]


def test_summary_reads_latency_tokens_finished_requests_and_top_operators_per_window(tmp_path):
    from mindspeed_prof.output.summary.directory import summarize_directory

    driver = EngineStepDriver(config(tmp_path, profile_step_start=1, profile_step_end=4))
    driver.arm()
    step(driver, 1, prefill=2, decode=0, tokens=9)
    step(driver, 2, tokens=2)
    step(driver, 3, tokens=2, finished=[0, 1])
    driver.close()
    (window,) = summarize_directory(str(tmp_path)).rank(0).engine_windows
    assert [(r["step"], r["kind"], r["requests"], r["tokens"]) for r in window["rows"]] == \
        [(1, "prefill", 2, 9), (2, "decode", 2, 2), (3, "decode", 2, 2)]
    assert all(r["latency_ms"] > 0 and r["span_ms"] > 0 for r in window["rows"])
    assert window["finished_requests"] == [0, 1] and window["mean_tokens"] == pytest.approx(13 / 3)
    assert window["top_ops"] and window["started_by"] == {"by": "flags"}


def test_forward_labels_say_kind_requests_and_tokens():
    assert [forward_label(*c) for c in ((3, 0, 40), (0, 4, 4), (1, 2, 23))] == \
        ["prefill 3p+0d 40t", "decode 0p+4d 4t", "mixed 1p+2d 23t"]


# ---- the static engine: --profile-forwards A-B inside each request ---------------------------

def request(driver, forwards):
    with driver.request():
        for _ in range(forwards):
            with driver.forward():
                work()


def test_profile_forwards_2_3_records_only_those_forwards_of_each_profiled_request(tmp_path):
    driver = RequestDriver(config(tmp_path, profile_step_start=2, profile_step_end=4,
                                  profile_forwards=["2-3"]))
    driver.arm()
    for forwards in (5, 5, 1, 5):
        request(driver, forwards)
    driver.close()
    traces = traces_under(tmp_path)
    assert sorted(traces) == ["req_2-2"] and step_ids(traces["req_2-2"]) == [2]
    with open(traces["req_2-2"]) as handle:
        events = json.load(handle)["traceEvents"]
    assert sorted(e["name"] for e in events if e.get("name") in ("prefill", "decode")) == \
        ["decode", "decode"]  # forwards 2 and 3: no prefill, not forwards 4-5
    warnings = [w["message"] for w in manifest(tmp_path, 0)["warnings"]]
    assert any("request 3 ran 1 forward(s)" in w for w in warnings)


def test_a_static_server_window_asked_for_over_http_counts_requests(tmp_path):
    driver = RequestDriver(config(tmp_path))
    driver.arm(planned=False)
    request(driver, 2)
    assert driver.start_window(start_request({"max": 2, "prefix": "two"})) == "queued"
    for _ in range(3):
        request(driver, 2)
    driver.close()
    assert sorted(traces_under(tmp_path)) == ["two/req_2-2", "two/req_3-3"]
    planned = manifest(tmp_path, 0)["planned"]
    assert [(p["start"], p["end"], p["status"], p["recorded"]) for p in planned] == \
        [(2, 4, "complete", [2, 3])]


def test_an_http_window_with_no_max_and_no_budget_stops_at_its_default_budget(tmp_path,
                                                                              monkeypatch):
    from mindspeed_prof.control import http_control

    monkeypatch.setattr(http_control, "DEFAULT_WINDOW_GB", 1e-6)  # 1 KB: crossed by one step
    driver = EngineStepDriver(config(tmp_path))
    driver.arm(planned=False)
    driver.start_window(1, start_request({}))
    for n in range(1, 5):
        step(driver, n)
    assert not driver.window_running  # no /stop_profile came: the budget ended it
    driver.close()
    [trace] = torch_traces(tmp_path)
    assert step_ids(trace) == [1]
    warnings = [w["message"] for w in manifest(tmp_path, 0)["warnings"]]
    assert "stopping the window started over HTTP with no 'max' after engine step 1: it wrote " \
           "its default budget of 1e-06 GB on this rank (give 'max' in the start, or " \
           "--profile-max-gb, to choose)" in warnings
    # With a length, or with --profile-max-gb, the default budget does not apply.
    assert http_control.default_budget_gb(config(tmp_path), start_request({"max": 3})) is None
    assert http_control.default_budget_gb(config(tmp_path, profile_max_gb=5.0),
                                          start_request({})) is None
