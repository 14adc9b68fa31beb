"""The inference driver (requests as the unit) on the torch backend and the torch_npu double:
per-request sessions on the thread that computes, prefill/decode ranges, nested generates,
idle ranks, a trigger, what a server (or an offline process) that stops inside or before its
window says, and streamed generations: a request lasts until its stream is consumed."""

import csv
import glob
import os
import threading

from helpers.inference import armed, config, events, one_request, serve, work
from helpers.npu import fake_npu  # noqa: F401 - a fixture
from helpers.traces import manifest, step_ids, torch_traces
from mindspeed_prof.control import trigger

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


# -- a request is the whole generation, however it is consumed (RequestDriver.serve) ---------------

def streamed(driver, tokens=4):
    """A generate that returns a generator computing one token per item (MindSpeed-LLM's
    ``generate(stream=True)``): nothing is computed before the caller iterates."""
    def generate():
        def tokens_one_by_one():
            for i in range(tokens):
                with driver.forward():
                    work()
                yield i
        return tokens_one_by_one()
    return driver.serve(generate, (), {})


def test_a_streamed_generation_is_recorded_while_its_caller_consumes_it(tmp_path):
    driver = armed(config(tmp_path))
    answers = [list(streamed(driver)) for _ in range(3)]
    driver.close()
    assert answers == [[0, 1, 2, 3]] * 3
    save = tmp_path / "prof"
    for trace in torch_traces(save):
        names = [e["name"] for e in events(trace)]
        assert (names.count("prefill"), names.count("decode"), names.count("aten::addmm")) == (
            1, 3, 4)
    assert [step_ids(t) for t in torch_traces(save)] == [[2], [3]]
    assert manifest(save, 0)["status"] == "complete"


def test_a_result_that_is_not_an_iterator_is_returned_as_it_is(tmp_path):
    driver = armed(config(tmp_path))
    answer = {"text": [1, 2]}
    assert driver.serve(lambda: answer, (), {}) is answer
    driver.close()
    assert driver.requests == 1


def test_a_stream_consumed_on_another_thread_cuts_its_request_and_says_why(tmp_path, capsys):
    driver = armed(config(tmp_path))
    one_request(driver)
    stream = streamed(driver)  # request 2 begins here, on this thread ...
    reader = threading.Thread(target=list, args=(stream,))  # ... and is read on another
    reader.start()
    reader.join()
    one_request(driver)  # request 3, on this thread: request 2 is settled first
    driver.close()
    data = manifest(tmp_path / "prof", 0)
    (planned,) = data["planned"]
    assert (planned["status"], planned["cut"]["reason"], planned["recorded"]) == (
        "cut", "abandoned", [3])
    assert f"consumed on thread {reader.ident}, not on thread" in capsys.readouterr().err


def test_a_forward_inside_a_forward_is_one_labelled_forward(tmp_path):
    # Megatron's engine forward over a legacy ForwardStep: both are hooked, one label each step.
    driver = armed(config(tmp_path))
    for _ in range(2):
        with driver.request():
            for _ in range(3):
                with driver.forward(), driver.forward():
                    work()
    driver.close()
    (trace,) = torch_traces(tmp_path / "prof")
    names = [e["name"] for e in events(trace)]
    assert (names.count("prefill"), names.count("decode")) == (1, 2)


def test_an_offline_process_says_the_inference_process_stopped(tmp_path, capsys):
    driver = armed(config(tmp_path, profile_step_end=6), server=False)
    serve(driver, 3)
    driver.close("exception", "ValueError: boom")
    said = ("the inference process stopped (exception) after request 3, before the window of "
            "requests 2-5 completed: requests 2-3 were recorded")
    assert said in capsys.readouterr().err
    assert said in [w["message"] for w in manifest(tmp_path / "prof", 0)["warnings"]]


def test_an_idle_rank_serves_the_work_untouched(tmp_path):
    driver = armed(config(tmp_path, profile_ranks=(0,)), rank=1, world_size=2)
    stream = iter([1, 2])
    assert driver.serve(lambda: stream, (), {}) is stream
    assert driver.requests == 0


def test_a_stream_that_raises_mid_way_cuts_its_request_and_the_error_reaches_the_reader(
        tmp_path):
    driver = armed(config(tmp_path))
    one_request(driver)

    def generate():
        def tokens():
            for i in range(4):
                if i == 2:
                    raise RuntimeError("device lost at token 2")
                with driver.forward():
                    work()
                yield i
        return tokens()

    read = []
    try:
        for token in driver.serve(generate, (), {}):
            read.append(token)
    except RuntimeError as error:
        read.append(str(error))
    one_request(driver)
    driver.close()
    assert read == [0, 1, "device lost at token 2"]
    data = manifest(tmp_path / "prof", 0)
    (planned,) = data["planned"]
    assert (planned["status"], planned["cut"], planned["recorded"]) == (
        "cut", {"reason": "exception", "in_progress": 2}, [3])
    traces = {os.path.basename(os.path.dirname(t)): t for t in torch_traces(tmp_path / "prof")}
    names = [e["name"] for e in events(traces["req_2-2"])]
    assert (names.count("prefill"), names.count("decode")) == (1, 1)


def test_a_request_an_http_window_recorded_is_not_called_never_begun_by_the_flags_window(
        tmp_path):
    from mindspeed_prof.config.window import WindowRequest
    from mindspeed_prof.output import check_directory

    driver = armed(config(tmp_path))  # the flags' window: requests 2-3
    one_request(driver)
    assert driver.start_window(WindowRequest(length=1, prefix="h")) == "queued"  # before 2
    serve(driver, 3)
    driver.close()
    save = tmp_path / "prof"
    assert [os.path.relpath(t, save).split(os.sep)[:-1] for t in torch_traces(save)] == [
        ["h", "req_2-2"], ["req_3-3"]]
    data = manifest(save, 0)
    http, flags = data["planned"]
    assert (http["start"], http["end"], http["recorded"], http["started_by"]["by"]) == \
        (2, 3, [2], "http")
    assert (flags["start"], flags["end"], flags["recorded"], flags["skipped"],
            flags["started_by"]["by"]) == (2, 4, [3], [], "flags")
    assert flags["recorded_elsewhere"] == [{"unit": 2, "window": [2, 3], "started_by": "http",
                                            "prefix": "h"}]
    said = [w["message"] for w in data["warnings"]]
    assert not [m for m in said if "never began" in m]
    assert "request 2 of the window 2-3 was recorded by the window started over HTTP under h/ " \
           "(from request 2), not in this window's folder (one window at a time)" in said
    report = check_directory(str(save))
    assert report.exit_code == 0
    assert not [w for w in report.rank(0).warnings if "never began" in w]
