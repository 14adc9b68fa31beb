"""Inference end to end on the CPU: Megatron's real text-generation server (megatron-core's
MegatronServer, run_mcore_engine, StaticInferenceEngine) on 2 ranks with TP=2 over HTTP, and the
engine called in a loop, each under torchrun with our launcher (tests/harness/inference)."""

import contextlib
import glob
import io
import json
import os
import re
import signal

import pytest

from harness.inference import launch as server_launch
from harness.launch import run_training
from helpers.e2e import LAUNCHER, check, env_for, tracebacks_from_training, verdicts
from helpers.traces import manifest, step_ids, torch_traces
from mindspeed_prof import cli

pytestmark = pytest.mark.e2e

GENERATE_LOOP = server_launch.SERVER_SCRIPT.parent / "generate_loop.py"


def window_flags(save, start, end, *extra):
    return ["--profile", "--profile-ranks", "-1", "--profile-step-start", str(start),
            "--profile-step-end", str(end), "--profile-save-path", str(save),
            "--profile-backend", "torch", *extra]


def cpu_op_threads(trace):
    with open(trace) as handle:
        events = json.load(handle)["traceEvents"]
    return {e["tid"] for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"
            and e.get("name") == "aten::mm"}


def ranges(trace):
    with open(trace) as handle:
        events = json.load(handle)["traceEvents"]
    return sorted(e["name"] for e in events if e.get("name") in ("prefill", "decode"))


def test_server_profiles_requests_2_and_3_on_every_rank_on_the_threads_that_ran_them(tmp_path):
    save = tmp_path / "prof"
    server = server_launch.start(window_flags(save, 2, 4), env=env_for(tmp_path), cwd=tmp_path)
    try:
        answers = [server.put(["1 2 3"], tokens_to_generate=4) for _ in range(4)]
    finally:
        run = server.stop()  # Ctrl-C on rank 0: the server returns, every rank leaves its loop
    assert run.returncode == 0, run.describe()
    assert all(len(a["tokens"][0]) == 3 + 4 for a in answers)
    assert not [line for line in run.stderr.splitlines() if "Traceback" in line], run.describe()
    for rank in (0, 1):
        traces = [t for t in torch_traces(save) if os.path.basename(t).startswith(f"rank{rank}.")]
        assert [os.path.basename(os.path.dirname(t)) for t in traces] == ["req_2-2", "req_3-3"]
        assert [step_ids(t) for t in traces] == [[2], [3]]
        assert all(ranges(t) == ["decode", "decode", "decode", "prefill"] for t in traces)
        data = manifest(save, rank)
        # Ctrl-C reached rank 0 (its server then returned by itself); rank 1 left its loop
        # because rank 0 broadcast the server's end: it ended with its peer, not by itself
        ended = "interrupted" if rank == 0 else "peer ended"
        assert (data["unit"], data["status"], data["exit"]["reason"]) == \
            ("request", "complete", ended)
        if rank == 1:
            assert data["exit"]["detail"].startswith("the serving rank stopped the server after "
                                                     "4 requests, and this rank")
        threads = run.reports[rank]["request_threads"]
        # rank 0 serves each request on a new Flask thread, rank 1 on its main thread
        assert [cpu_op_threads(t) for t in traces] == [{threads[1]}, {threads[2]}]
    main_thread = run.reports[0]["main_thread"]
    assert main_thread not in run.reports[0]["request_threads"]
    code, report = check(save)
    assert code == 0 and verdicts(report) == {0: "valid", 1: "valid"}


def test_server_stopped_by_sigterm_inside_its_window_flushes_every_rank_and_says_so(tmp_path):
    save = tmp_path / "prof"
    server = server_launch.start(window_flags(save, 2, 6), env=env_for(tmp_path), cwd=tmp_path)
    try:
        for _ in range(4):
            server.put(["1 2 3"], tokens_to_generate=4)
    finally:
        os.kill(server.process.pid, signal.SIGTERM)  # to torchrun, as SLURM or a container stop
        run = server.wait(timeout=60)
    assert run.returncode is not None, run.describe()  # it ended on its own, not killed
    said = ("the server stopped (signal) after request 4, before the window of requests 2-5 "
            "completed: ")
    for rank in (0, 1):
        data = manifest(save, rank)
        assert data["exit"] == {"reason": "signal", "detail": "SIGTERM"}
        assert data["window_cut"] == {"start": 2, "end": 6, "last_served": 4}
        [message] = [w["message"] for w in data["warnings"] if w["message"].startswith(said)]
        # Rank 0 answered request 4; rank 1 may still be inside it, or have begun request 5 (it
        # waits for the next request inside its loop): what each rank says must be on disk.
        recorded = data["planned"][0]["recorded"]
        assert recorded[:2] == [2, 3] and (rank == 1 or recorded == [2, 3, 4]), (rank, recorded)
        for n in recorded:
            assert glob.glob(str(save / f"req_{n}-{n}" / f"rank{rank}.*")), (rank, n)
        kept = f"requests {recorded[0]}-{recorded[-1]} were recorded"
        partial = re.search(r"; the partial trace of request (\d+), cut mid-way, was written",
                            message)
        assert message == said + kept + (f"{partial.group(0)} (check reports it as cut)"
                                         if partial else ""), message
        if partial:
            n = int(partial.group(1))
            assert n == recorded[-1] + 1, (message, recorded)
            assert glob.glob(str(save / f"req_{n}-{n}" / f"rank{rank}.*")), (rank, n)
    # Requests 2-4 of the window 2-5 are on disk and usable, but it is not the window asked for.
    code, report = check(save)
    assert code == 1 and verdicts(report) == {0: "cut", 1: "cut"}


def generate(tmp_path, args, *, nproc, requests, **env):
    return run_training([*server_launch.model_args(tp=nproc), *args], tmp_path=tmp_path,
                        nproc=nproc, env=env_for(tmp_path, HARNESS_REQUESTS=requests, **env),
                        launcher_prefix=LAUNCHER, script=GENERATE_LOOP, with_default_args=False,
                        timeout=180)


def test_engine_loop_trigger_armed_mid_run_profiles_the_next_requests_on_both_ranks(tmp_path):
    save, trigger_file = tmp_path / "prof", tmp_path / "trigger.json"
    run = generate(tmp_path, ["--profile", "--profile-ranks", "-1", "--profile-trigger-file",
                              str(trigger_file), "--profile-trigger-poll", "1",
                              "--profile-save-path", str(save), "--profile-backend", "torch"],
                   nproc=2, requests=6,
                   HARNESS_BEFORE_REQUEST=f"3:mindspeed-prof trigger {trigger_file} --steps 2")
    assert run.returncode == 0, run.describe()
    assert "trigger " in run.stdout and "profiling rank(s) 0,1 at requests 3-4" in run.stdout
    for rank in (0, 1):
        traces = [t for t in torch_traces(save) if os.path.basename(t).startswith(f"rank{rank}.")]
        assert [os.path.basename(os.path.dirname(t)) for t in traces] == ["req_3-3", "req_4-4"]
        assert [step_ids(t) for t in traces] == [[3], [4]]
    code, report = check(save)
    assert code == 0, report


def test_engine_loop_that_stops_inside_the_window_says_so_and_keeps_what_it_recorded(tmp_path):
    save = tmp_path / "prof"
    run = generate(tmp_path, window_flags(save, 2, 6), nproc=1, requests=4)
    assert run.returncode == 0, run.describe()
    assert not tracebacks_from_training(run)
    # An offline engine loop (no text-generation server imported) is no server.
    said = ("the inference process stopped (finished) after request 4, before the window of "
            "requests 2-5 completed: requests 2-4 were recorded")
    assert said in run.stderr
    data = manifest(save, 0)
    assert data["window_cut"] == {"start": 2, "end": 6, "last_served": 4}
    assert [step_ids(t) for t in torch_traces(save)] == [[2], [3], [4]]
    code, report = check(save)
    assert code == 1 and verdicts(report) == {0: "cut"}


def test_server_with_profile_and_no_window_flag_records_from_post_start_profile_to_stop(tmp_path):
    save = tmp_path / "prof"
    flags = ["--profile", "--profile-ranks", "-1", "--profile-save-path", str(save),
             "--profile-backend", "torch"]
    server = server_launch.start(flags, env=env_for(tmp_path), cwd=tmp_path)
    answers = {}
    try:
        server.put(["1 2 3"], tokens_to_generate=4)                      # request 1
        answers["start"] = server.post("/start_profile")
        answers["start_again"] = server.post("/v1/start_profile")
        answers["bad"] = server.post("/start_profile", {"prefix": "../up"})
        for _ in range(2):
            server.put(["1 2 3"], tokens_to_generate=4)                  # requests 2, 3
        answers["stop"] = server.post("/stop_profile")
        answers["stop_again"] = server.post("/stop_profile")
        server.put(["1 2 3"], tokens_to_generate=4)                      # request 4
        answers["delayed"] = server.post("/v1/start_profile", {"prefix": "late", "delay": 1,
                                                                "max": 1})
        for _ in range(2):
            server.put(["1 2 3"], tokens_to_generate=4)                  # requests 5, 6
        answers["stop_after_max"] = server.post("/stop_profile")
    finally:
        run = server.stop()
    assert run.returncode == 0, run.describe()
    assert [answers[k][0] for k in ("start", "stop", "delayed")] == [200, 200, 200]
    assert all(answers[k][2] < 5.0 for k in ("start", "stop", "delayed"))
    assert answers["start_again"][0] == 409 and "one window at a time" in \
        answers["start_again"][1]["details"]
    assert answers["bad"][0] == 400 and "not a folder name" in answers["bad"][1]["details"]
    assert answers["stop_again"][0] == 409
    assert answers["stop_after_max"][0] == 409 and "ended by itself" in \
        answers["stop_after_max"][1]["details"]
    for rank in (0, 1):
        traces = [t for t in torch_traces(save) if os.path.basename(t).startswith(f"rank{rank}.")]
        assert [os.path.relpath(os.path.dirname(t), save) for t in traces] == [
            "late/req_6-6", "req_2-2", "req_3-3"]
        assert [step_ids(t) for t in traces] == [[6], [2], [3]]
        data = manifest(save, rank)
        assert [(p["start"], p["end"], p["status"], p["recorded"], p["started_by"]["by"])
                for p in data["planned"]] == [(2, None, "complete", [2, 3], "http"),
                                              (6, 7, "complete", [6], "http")]
    code, report = check(save)
    assert code == 0 and verdicts(report) == {0: "valid", 1: "valid"}, report


def test_server_without_profile_has_no_profile_routes(tmp_path):
    server = server_launch.start(["--profile-ranks", "-1"], env=env_for(tmp_path), cwd=tmp_path)
    try:
        status, _, _ = server.post("/start_profile")
        answer = server.put(["1 2 3"], tokens_to_generate=2)
    finally:
        run = server.stop()
    assert status in (404, 405) and len(answer["tokens"][0]) == 3 + 2  # Flask: no such route
    assert run.returncode == 0, run.describe()
    assert not (tmp_path / "profile_dir").exists()


@pytest.mark.parametrize("form", ["master", "launch"])
def test_tp2_server_launched_as_the_upstream_scripts_launch_it_is_one_run_with_both_ranks_valid(
        tmp_path, form):
    # Megatron-LM's examples: torchrun --nnodes 1 --node-rank 0 --master-addr --master-port (no
    # run id from torchrun); MindSpeed-LLM's generate scripts: python -m torch.distributed.launch
    # --nproc_per_node --master_port. Before 62f0110: rank 0 split off as a process without a
    # shared run id, "2 runs wrote into this directory", a healthy rank missing, exit 1.
    save = tmp_path / "prof"
    server = server_launch.start(window_flags(save, 2, 4), env=env_for(tmp_path), cwd=tmp_path,
                                 form=form)
    try:
        for _ in range(4):
            server.put(["1 2 3"], tokens_to_generate=4)
    finally:
        run = server.stop()
    assert run.returncode == 0, run.describe()
    assert "--standalone" not in run.command
    assert ("--master-addr" if form == "master" else "torch.distributed.launch") in run.command
    traced = {}
    for trace in torch_traces(save):
        rank = int(os.path.basename(trace).split(".")[0].removeprefix("rank"))
        traced.setdefault(rank, []).extend(step_ids(trace))
    assert traced == {0: [2, 3], 1: [2, 3]}, traced
    assert len({manifest(save, rank)["run_id"] for rank in (0, 1)}) == 1
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["check", str(save)])
    assert "runs wrote into this directory" not in out.getvalue(), out.getvalue()
    assert code == 0, out.getvalue()
    code, report = check(save)
    assert code == 0 and verdicts(report) == {0: "valid", 1: "valid"}, report
