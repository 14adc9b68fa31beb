"""The inference driver (requests as the unit) on the torch backend and the torch_npu double:
per-request sessions on the thread that computes, prefill/decode ranges, nested generates,
idle ranks, a trigger, and what a server that stops inside or before its window says."""

import csv
import glob
import os

from helpers.inference import armed, config, events, one_request, serve
from helpers.npu import fake_npu  # noqa: F401 - a fixture
from helpers.traces import manifest, step_ids, torch_traces
from mindspeed_prof import trigger

def test_each_request_of_the_window_is_a_session_of_its_own_in_a_req_folder(tmp_path):
    driver = armed(config(tmp_path))
    serve(driver, 5)
    driver.close()
    save = tmp_path / "prof"
    assert sorted(p for p in os.listdir(save) if not p.endswith(".json")) == ["req_2-2", "req_3-3"]
    assert [step_ids(t) for t in torch_traces(save)] == [[2], [3]]
    data = manifest(save, 0)
    assert (data["unit"], data["status"], data["requests_served"]) == ("request", "complete", 5)


def test_the_first_forward_of_a_request_is_prefill_and_the_others_decode(tmp_path):
    driver = armed(config(tmp_path))
    serve(driver, 3)
    driver.close()
    for trace in torch_traces(tmp_path / "prof"):
        names = [e["name"] for e in events(trace) if e["name"] in ("prefill", "decode")]
        assert sorted(names) == ["decode", "decode", "decode", "prefill"]


def test_requests_on_new_threads_are_recorded_on_the_thread_that_ran_each(tmp_path):
    driver = armed(config(tmp_path))
    threads = serve(driver, 4, on_new_threads=True)
    driver.close()
    save = tmp_path / "prof"
    for n in (2, 3):
        (trace,) = torch_traces(save / f"req_{n}-{n}")
        ops = {e["tid"] for e in events(trace) if e.get("cat") == "cpu_op"
               and e["name"] == "aten::addmm"}
        assert ops == {threads[n - 1]}
    assert manifest(save, 0)["errors"] == []


def test_a_generate_inside_a_generate_belongs_to_the_outer_request(tmp_path):
    driver = armed(config(tmp_path))
    for _ in range(3):
        with driver.request():  # MindSpeed-LLM's generate ...
            one_request(driver)  # ... over Megatron's engine
    driver.close()
    assert driver.requests == 3
    assert [step_ids(t) for t in torch_traces(tmp_path / "prof")] == [[2], [3]]


def test_a_rank_outside_the_selection_counts_nothing_and_writes_nothing(tmp_path):
    driver = armed(config(tmp_path, profile_ranks=(0,)), rank=1, world_size=2)
    serve(driver, 4)
    driver.close()
    assert driver.requests == 0
    assert not os.path.exists(tmp_path / "prof") or os.listdir(tmp_path / "prof") == []


def test_a_server_stopping_inside_the_window_says_which_requests_it_recorded(tmp_path, capsys):
    driver = armed(config(tmp_path, profile_step_end=6))
    serve(driver, 3)
    driver.close("signal", "SIGTERM")
    data = manifest(tmp_path / "prof", 0)
    assert data["window_cut"] == {"start": 2, "end": 6, "last_served": 3}
    said = ("the server stopped (signal) after request 3, before the window of requests 2-5 "
            "completed: requests 2-3 were recorded")
    assert said in capsys.readouterr().err
    assert said in [w["message"] for w in data["warnings"]]
    assert [step_ids(t) for t in torch_traces(tmp_path / "prof")] == [[2], [3]]


def test_a_server_stopping_before_the_window_leaves_an_incomplete_manifest(tmp_path, capsys):
    driver = armed(config(tmp_path, profile_step_start=5, profile_step_end=6))
    serve(driver, 2)
    driver.close()
    data = manifest(tmp_path / "prof", 0)
    assert data["status"] == "incomplete"
    assert data["exit"] == {"reason": "finished", "detail": "after 2 requests"}
    assert "the server ended (finished) before request 5; nothing was profiled" in \
        capsys.readouterr().err


def test_a_trigger_written_between_requests_profiles_the_next_requests(tmp_path):
    trigger_file = str(tmp_path / "trigger.json")
    driver = armed(config(tmp_path, profile_trigger_file=trigger_file, profile_trigger_poll=1))
    serve(driver, 2)
    trigger.write_request(trigger_file, steps=2)
    serve(driver, 3)
    driver.close()
    save = tmp_path / "prof"
    assert sorted(p for p in os.listdir(save) if p.startswith("req_")) == ["req_3-3", "req_4-4"]
    assert [step_ids(t) for t in torch_traces(save)] == [[3], [4]]


def test_npu_captures_are_one_per_request_named_after_rank_and_request(tmp_path, fake_npu):
    driver = armed(config(tmp_path, profile_backend="npu", profile_level="level1",
                          profile_with_cpu=True), rank=0, world_size=2)
    serve(driver, 4, on_new_threads=True)
    driver.close()
    for n in (2, 3):
        (capture,) = glob.glob(str(tmp_path / "prof" / f"req_{n}-{n}" / f"rank0_req{n}_*_ascend_pt"))
        kernels = os.path.join(capture, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv")
        with open(kernels) as handle:
            assert {row["Step Id"] for row in csv.DictReader(handle)} == {str(n)}
    assert manifest(tmp_path / "prof", 0)["status"] == "complete"
