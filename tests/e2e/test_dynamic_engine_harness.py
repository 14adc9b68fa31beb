"""The CPU harness of megatron-core's dynamic inference engine behaves as the engine does.

``tests/harness/dynamic``: a plain megatron-core engine script (TP=1 and TP=2 over gloo, three
loops users write) and the dynamic text-generation server built from the wheel's own pieces
(front ends, coordinator, ``run_engine_with_coordinator``) over HTTP on 127.0.0.1. What these
tests pin down is what a profiler of engine steps relies on: step numbers, what each step
carried, the thread that runs it, where the server's relayed profile signal lands, and that
stopping the server leaves no process and no port behind. Tokens always equal a no-KV-cache
forward of the same model, so the stand-ins (flash-attn, CUDA) compute the real thing.
"""

import signal
import time

import pytest

from harness.dynamic import launch
from harness.dynamic.marks import (CHECKOUT, MISSING as _MISSING, MODULE_MARKS,
                                   needs_server_deps, real_tool_only)

pytestmark = MODULE_MARKS


def offline(tmp_path, *args, nproc=1):
    run = launch.run_offline(list(args), tmp_path / "reports", nproc=nproc)
    assert run.returncode == 0, run.describe()
    assert sorted(run.reports) == list(range(nproc)), run.describe()
    print(f"offline {' '.join(args)} TP={nproc}: {run.wall_s:.1f} s")
    return run


def kinds(report):
    return [[forward["kind"] for forward in step["forwards"]] for step in report["steps"]]


def assert_tokens_equal_reference(report):
    assert report["requests"], "no request finished"
    for request_id, request in report["requests"].items():
        assert request["generated"] == request["reference"], f"request {request_id}"


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory):
    """TP=1, manual step loop: two requests at step 0, a third joins after two steps."""
    return offline(tmp_path_factory.mktemp("dynamic_mixed"), "--request", "0:5:6",
                   "--request", "2:21:4", "--request", "0:40:3")


def test_tokens_equal_a_no_kv_cache_forward_through_prefill_mixed_and_decode_steps(mixed_run):
    report = mixed_run.reports[0]
    assert_tokens_equal_reference(report)
    assert [len(report["requests"][i]["generated"]) for i in ("0", "1", "2")] == [6, 4, 3]
    assert kinds(report) == [["prefill"], ["decode"], ["mixed"], ["decode"], ["decode"],
                             ["decode"]]
    mixed = report["steps"][2]["forwards"][0]
    assert (mixed["prefill_requests"], mixed["decode_requests"]) == (1, 2)
    assert mixed["tokens"] == 21 + 2


def test_engine_steps_are_numbered_from_one_and_each_request_finishes_at_its_step(mixed_run):
    report = mixed_run.reports[0]
    assert [step["step"] for step in report["steps"]] == [1, 2, 3, 4, 5, 6]
    finished = {request_id: request["finished_at_step"]
                for request_id, request in report["requests"].items()}
    assert finished == {"0": 6, "1": 6, "2": 3}
    assert report["steps"][2]["finished_request_ids"] == [2]
    assert report["steps"][3]["active_request_ids"] == [0, 1]
    assert report["dummy_forwards"] == []


def test_a_long_prompt_is_prefilled_in_chunks_and_tokens_still_match(tmp_path):
    run = offline(tmp_path, "--request", "0:8:6", "--request", "1:150:3", "--max-tokens", "64",
                  "--chunked-prefill")
    report = run.reports[0]
    assert_tokens_equal_reference(report)
    forwards = [f for step in report["steps"] for f in step["forwards"]]
    chunks = [f for f in forwards if f["chunked_prefill_request_id"] == 1]
    assert len(chunks) >= 2, forwards
    assert all(f["tokens"] <= 64 for f in forwards)
    # The short request keeps decoding beside the chunks.
    assert all(f["kind"] == "mixed" for f in chunks)


def test_tp2_ranks_take_the_same_steps_and_both_match_the_reference(tmp_path):
    run = offline(tmp_path, "--request", "0:8:5", "--request", "1:20:3", nproc=2)
    ranks = run.reports
    assert kinds(ranks[0]) == kinds(ranks[1]) == [["prefill"], ["mixed"], ["decode"],
                                                  ["decode"], ["decode"]]
    for report in ranks.values():
        assert_tokens_equal_reference(report)
        assert all(step["thread"] == report["main_thread"] for step in report["steps"])
    assert ranks[0]["requests"] == ranks[1]["requests"]


def test_generate_takes_one_engine_step_per_token_for_requests_added_together(tmp_path):
    run = offline(tmp_path, "--loop", "generate", "--request", "0:6:5", "--request", "0:11:5")
    report = run.reports[0]
    assert kinds(report) == [["prefill"]] + [["decode"]] * 4
    assert_tokens_equal_reference(report)
    assert report["answers"] == [report["requests"][i]["generated"] for i in ("0", "1")]


def test_the_high_level_api_runs_engine_steps_on_its_own_thread(tmp_path):
    run = offline(tmp_path, "--loop", "llm", "--request", "0:6:4", "--request", "0:9:4", nproc=2)
    for report in run.reports.values():
        threads = {step["thread"] for step in report["steps"]}
        assert threads == {report["api_thread"]} and report["api_thread"] != report["main_thread"]
        assert_tokens_equal_reference(report)
    answers = run.reports[0]["answers"]
    assert answers == [run.reports[1]["requests"][i]["generated"] for i in ("0", "1")]
    coordinator = run.reports[0]["coordinator_pid"]
    assert coordinator and not launch.alive(coordinator)
    assert run.reports[1]["coordinator_pid"] is None


# ---- the server -------------------------------------------------------------------------------

PROMPTS = ("1 4 7 10 13 16", "2 5 8", "30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47")


def _wait_for(condition, what, timeout=30.0):
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise TimeoutError(f"{what}: not after {timeout} s")
        time.sleep(0.1)


def _proc(pid):
    with open(f"/proc/{pid}/stat") as handle:
        ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
    with open(f"/proc/{pid}/cmdline") as handle:
        return {"ppid": ppid, "cmdline": handle.read().replace("\0", " ")}


def _start(kind, folder):
    if kind == "wheel":
        return launch.start_server(folder / "reports", nproc=2), {}
    if kind == "async_llm":
        return launch.start_server(folder / "reports", nproc=2, args=["--api", "async-llm"]), {}
    overlay_dir, checkpoint, seconds = launch.make_real_checkpoint(CHECKOUT, str(folder))
    return (launch.start_real_server(folder / "reports", CHECKOUT, overlay_dir, checkpoint),
            {"checkpoint_s": round(seconds, 1)})


@pytest.fixture(scope="module",
                params=["wheel", "async_llm", pytest.param("real_tool", marks=real_tool_only)])
def served(request, tmp_path_factory):
    """One TP=2 server (the wheel's pieces wired as the tool wires them, the same served by
    ``MegatronAsyncLLM.serve``, or the checkout's own tool): health, a profile window around
    one batch of two completions, a second window opened and closed under /v1/ around a third,
    then SIGINT to the job."""
    if _MISSING:
        pytest.skip(f"the dynamic server needs {', '.join(_MISSING)}")
    server, times = _start(request.param, tmp_path_factory.mktemp(f"dynamic_{request.param}"))
    pids = server.job_pids()

    def landed(route, count):
        # The route answers before the signal reaches the engines, and two front ends relay
        # through two coordinator connections: without this wait a stop and the next start
        # can reach the engines in either order (FACTS.md section 4).
        answer = server.post(route)
        _wait_for(lambda: all(len(r["profiler_calls"]) >= count
                              for r in server.reports().values()), f"{route} on every rank")
        return answer

    try:
        answers = {"health": server.get("/health"),
                   "processes": {pid: _proc(pid) for pid in sum(pids.values(), [])},
                   "start": landed("/start_profile", 1),
                   "batch": server.completion(list(PROMPTS[:2]), 5),
                   "stop": landed("/stop_profile", 2),
                   "v1_start": landed("/v1/start_profile", 3),
                   "single": server.completion(PROMPTS[2], 3, path="/completions"),
                   "v1_stop": landed("/v1/stop_profile", 4)}
    except BaseException:
        server.kill_all()
        raise
    run = server.stop(signal.SIGINT)
    leftovers = run.alive_pids()
    if leftovers:
        server.kill_all()
    print(f"dynamic server ({request.param}) TP=2: {times} ready after {server.ready_s:.1f} s, "
          f"stopped {run.stop_s:.1f} s after SIGINT, {run.wall_s:.1f} s in all; rank ends: "
          f"{ {r: rep.get('end') for r, rep in run.reports.items()} }; dummy forwards: "
          f"{ {r: len(rep['dummy_forwards']) for r, rep in run.reports.items()} }")
    return {"kind": request.param, "answers": answers, "run": run, "leftovers": leftovers,
            "pids": pids}


def generated(answer):
    status, payload, _ = answer
    assert status == 200, payload
    return [choice["generation_token_ids"] for choice in payload["choices"]]


@needs_server_deps
def test_server_answers_health_and_completions_with_the_reference_tokens(served):
    answers, reports = served["answers"], served["run"].reports
    assert answers["health"][0] == 200 and answers["health"][1]["ready"] is True
    batch, single = generated(answers["batch"]), generated(answers["single"])
    assert [len(tokens) for tokens in batch + single] == [5, 5, 3]
    for report in reports.values():
        by_prompt = {" ".join(map(str, r["prompt"])): r for r in report["requests"].values()}
        assert set(by_prompt) == set(PROMPTS)
        for prompt, tokens in zip(PROMPTS, batch + single):
            assert by_prompt[prompt]["generated"] == by_prompt[prompt]["reference"] == tokens


@needs_server_deps
@pytest.mark.parametrize("route", ["start", "stop", "v1_start", "v1_stop"])
def test_profile_routes_answer_at_once(served, route):
    status, payload, seconds = served["answers"][route]
    action = route.replace("v1_", "") + "_profile"
    assert (status, payload) == (200, {"status": "ok", "action": action})
    assert seconds < 5.0


@needs_server_deps
def test_the_relayed_profile_signal_lands_between_steps_on_every_ranks_computing_thread(served):
    for rank, report in served["run"].reports.items():
        calls = report["profiler_calls"]
        assert [c["call"] for c in calls] == ["cudaProfilerStart", "cudaProfilerStop"] * 2, rank
        # The tool computes on the main thread, MegatronAsyncLLM on its runtime thread.
        computing = report.get("api_thread", report["main_thread"])
        assert {step["thread"] for step in report["steps"]} == {computing}
        for call in calls:
            assert call["caller"] == "DynamicInferenceEngine.schedule_requests"
            assert call["thread"] == computing
        by_prompt = {" ".join(map(str, r["prompt"])): r["finished_at_step"]
                     for r in report["requests"].values()}
        start, stop, v1_start, v1_stop = (c["step_count"] for c in calls)
        # Each signal lands after the steps of the requests answered before it was sent and
        # before the steps of those sent after it.
        assert start < report["steps"][0]["step"]
        assert stop >= max(by_prompt[p] for p in PROMPTS[:2]) and v1_start >= stop
        assert v1_start < by_prompt[PROMPTS[2]] <= v1_stop


@needs_server_deps
def test_the_high_level_api_server_steps_on_its_runtime_thread_not_the_main_thread(served):
    if served["kind"] != "async_llm":
        pytest.skip("MegatronAsyncLLM.serve only")
    for report in served["run"].reports.values():
        assert report["api_thread"] != report["main_thread"]
        assert {step["thread"] for step in report["steps"]} == {report["api_thread"]}


@needs_server_deps
def test_front_ends_are_forked_from_rank_0_and_the_coordinator_is_spawned(served):
    processes, pids = served["answers"]["processes"], served["pids"]
    rank0 = served["run"].reports[0]["pid"]
    assert len(pids["coordinator"]) == 1 and pids["frontends"]
    for pid in pids["frontends"]:
        # A fork runs rank 0's own command line; a spawned child starts Python afresh.
        assert processes[pid]["ppid"] == rank0
        assert processes[pid]["cmdline"] == processes[rank0]["cmdline"]
    coordinator = processes[pids["coordinator"][0]]
    assert coordinator["ppid"] == rank0
    assert "from multiprocessing.spawn import spawn_main" in coordinator["cmdline"]


@needs_server_deps
def test_sigint_to_the_job_stops_every_process_and_frees_the_port(served):
    run = served["run"]
    assert served["leftovers"] == {}, served["leftovers"]
    assert not launch.port_open(run.port)
    # serve_dynamic.py records the KeyboardInterrupt; the real tool catches it and returns.
    ends = {"wheel": "KeyboardInterrupt", "async_llm": "KeyboardInterrupt",
            "real_tool": "returned"}
    assert run.reports[0]["end"] == ends[served["kind"]], run.describe()
    # torchrun's SIGINT handler re-raises as its own failure: the job's exit status is 1.
    assert run.returncode == 1, run.describe()
    assert run.stop_s < launch.SHUTDOWN_TIMEOUT_S + 20
