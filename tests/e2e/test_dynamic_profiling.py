"""megatron-core's dynamic inference engine profiled end to end on the CPU (megatron-core 0.19 on
the Python 3.12 leg; 0.17.x and 0.18.x in the opt-in tier of older engines, tests/harness/dynamic/
README.md, where the server's two routes are mindspeed_prof's own).

The engine step is the unit: the offline engine script (a plain megatron-core script, no
``initialize_megatron``, configured from its own command line) records the steps its window
flags name, with those step numbers as trace step ids; the dynamic text-generation server
(TP=2, the wheel's front ends, coordinator and engine loop) is profiled through its own
``POST /start_profile`` and ``/stop_profile``: every engine rank writes one window of engine
steps, the front ends and the coordinator write nothing, and ``check`` accepts it. The harness
is ``tests/harness/dynamic`` (FACTS.md there); ``serve_dynamic.py``'s reports say what each rank
did, step by step, independently of the profiler.
"""

import json
import os
import signal
import time

import pytest

from harness.dynamic import launch
from helpers.e2e import check, verdicts
from helpers.traces import manifest, step_ids, torch_traces

from harness.dynamic.marks import (CHECKOUT, ENGINE_MARKS, MISSING as _MISSING,
                                   needs_high_level_api, needs_server_deps, real_tool_only)

pytestmark = ENGINE_MARKS
LAUNCHER = ("-m", "mindspeed_prof.launch")


def profile(save, *extra):
    return ["--profile", "--profile-ranks", "-1", "--profile-save-path", str(save),
            "--profile-backend", "torch", *extra]


def trace_events(path):
    with open(path) as handle:
        return json.load(handle)["traceEvents"]


KINDS = ("prefill", "decode", "mixed", "dummy")


def ranges(path):
    """Our forward ranges in a trace (``mixed 1p+2d 23t``, ``dummy``)."""
    return sorted(e["name"] for e in trace_events(path) if e.get("cat") == "user_annotation"
                  and e["name"].split(" ")[0] in KINDS)


def op_threads(path):
    return {e["tid"] for e in trace_events(path) if e.get("cat") == "cpu_op"
            and e.get("name") in ("aten::mm", "aten::addmm", "aten::linear", "aten::matmul")}


def label(forward):
    return f"{forward['kind']} {forward['prefill_requests']}p+{forward['decode_requests']}d " \
           f"{forward['tokens']}t"


def rank_traces(save, rank):
    return [t for t in torch_traces(save) if os.path.basename(t).startswith(f"rank{rank}.")]


def offline(tmp_path, *args, nproc=1):
    run = launch.run_offline(list(args), tmp_path / "reports", nproc=nproc,
                             launcher_prefix=LAUNCHER)
    assert run.returncode == 0, run.describe()
    print(f"offline {' '.join(args)} TP={nproc}: {run.wall_s:.1f} s")
    return run


# ---- the offline engine: a plain megatron-core script -----------------------------------------

MIXED = ("--request", "0:5:6", "--request", "2:21:4", "--request", "0:40:3")


@pytest.mark.parametrize("nproc", [1, 2])
def test_offline_engine_with_step_start_3_end_5_records_steps_3_and_4_with_step_ids_3_and_4(
        tmp_path, nproc):
    save = tmp_path / "prof"
    run = offline(tmp_path, *MIXED, *profile(save, "--profile-step-start", "3",
                                             "--profile-step-end", "5"), nproc=nproc)
    for rank in range(nproc):
        report = run.reports[rank]
        # The profiled run computes what an unprofiled one does: a no-KV-cache forward.
        assert all(r["generated"] == r["reference"] for r in report["requests"].values())
        traces = rank_traces(save, rank)
        assert [os.path.relpath(os.path.dirname(t), save) for t in traces] == ["estep_3-4"]
        assert step_ids(traces[0]) == [3, 4]
        steps = {s["step"]: s for s in report["steps"]}
        # Each forward is a range named after what the engine scheduled in it.
        assert ranges(traces[0]) == sorted(label_of(steps[n]) for n in (3, 4))
        assert label_of(steps[3]) == "mixed 1p+2d 23t"
        assert op_threads(traces[0]) == {report["main_thread"]}
        data = manifest(save, rank)
        window = data["windows"][0]
        assert (data["unit"], window["iterations_recorded"], window["started_by"]) == \
            ("engine step", [3, 4], {"by": "flags"})
        assert [(u["n"], u["kind"], u["tokens"]) for u in window["units"]] == \
            [(3, "mixed", 23), (4, "decode", 2)]
        assert window["units"][0]["finished_requests"] == [2]  # request 2 ends at step 3
    code, answer = check(save)
    assert code == 0 and verdicts(answer) == {r: "valid" for r in range(nproc)}, answer


def label_of(step):
    forward = step["forwards"][-1]
    return label({"kind": forward["kind"], "prefill_requests": forward["prefill_requests"],
                  "decode_requests": forward["decode_requests"], "tokens": forward["tokens"]})


def test_a_plain_script_takes_its_window_from_the_yaml_file_its_command_line_names(tmp_path):
    save = tmp_path / "prof"
    config = tmp_path / "profile.yaml"
    config.write_text(f"profile_step_start: 2\nprofile_step_end: 4\nprofile_ranks: [0]\n"
                      f"profile_save_path: {save}\nprofile_backend: torch\n")
    run = offline(tmp_path, "--request", "0:6:5", "--no-reference", "--profile",
                  "--profile-config", str(config))
    assert [step_ids(t) for t in torch_traces(save)] == [[2, 3]]
    assert manifest(save, 0)["config"]["profile_step_start"] == 2
    assert "not connected" not in run.stderr


def test_steps_on_a_new_thread_each_are_recorded_one_session_per_step_on_their_thread(tmp_path):
    save = tmp_path / "prof"
    run = offline(tmp_path, "--loop", "step-in-loop", "--request", "0:5:6", "--no-reference",
                  *profile(save, "--profile-step-start", "3", "--profile-step-end", "5"))
    threads = {s["step"]: s["thread"] for s in run.reports[0]["steps"]}
    assert len(set(threads.values())) == len(threads)  # step_modern inside a running loop
    traces = rank_traces(save, 0)
    assert [os.path.basename(os.path.dirname(t)) for t in traces] == ["estep_3-3", "estep_4-4"]
    assert [step_ids(t) for t in traces] == [[3], [4]]
    assert [op_threads(t) for t in traces] == [{threads[3]}, {threads[4]}]
    code, answer = check(save)
    assert code == 0, answer


@needs_high_level_api
def test_the_high_level_api_records_its_steps_on_its_runtime_thread(tmp_path):
    save = tmp_path / "prof"
    run = offline(tmp_path, "--loop", "llm", "--request", "0:6:4", "--request", "0:9:4",
                  "--no-reference", *profile(save, "--profile-step-start", "2",
                                             "--profile-step-end", "4"), nproc=2)
    for rank in (0, 1):
        traces = rank_traces(save, rank)
        assert [step_ids(t) for t in traces] == [[2, 3]]
        assert op_threads(traces[0]) == {run.reports[rank]["api_thread"]}
    coordinator = run.reports[0]["coordinator_pid"]
    assert {manifest(save, r)["pid"] for r in (0, 1)} == {run.reports[r]["pid"] for r in (0, 1)}
    assert coordinator not in {manifest(save, r)["pid"] for r in (0, 1)}
    assert "not connected" not in run.stderr  # the spawned coordinator stays quiet


def test_without_profile_nothing_is_written_and_tokens_are_unchanged(tmp_path):
    run = offline(tmp_path, *MIXED)
    assert all(r["generated"] == r["reference"] for r in run.reports[0]["requests"].values())
    assert not (tmp_path / "reports" / "profile_dir").exists()
    assert "mindspeed_prof" not in run.stderr


# ---- the server, profiled over HTTP -------------------------------------------------------------

PROMPTS = ("1 4 7 10 13 16", "2 5 8")


def _wait_for(condition, what, timeout=60.0):
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise TimeoutError(f"{what}: not after {timeout} s")
        time.sleep(0.2)


def _landed(server, count):
    """Until rank 0 has said that ``count`` relayed starts or stops reached it: the route answers
    before the signal travels, and a request sent through another front end can overtake it
    (FACTS.md section 4)."""
    _wait_for(lambda: server.stdout().count("_profile: ") >= count,
              f"{count} profile signals on rank 0")


def _quiet(server, seconds=1.5):
    """Until no rank has taken a step for ``seconds`` (the dummy forwards after a burst too)."""
    def taken():
        return [(len(r["steps"]), len(r["dummy_forwards"])) for r in server.reports().values()]

    last, since = taken(), time.time()
    deadline = since + 60
    while time.time() - since < seconds:
        time.sleep(0.3)
        now = taken()
        if now != last:
            last, since = now, time.time()
        if time.time() > deadline:
            raise TimeoutError("the engines never went quiet")


def _leftovers(run, grace=10.0):
    """The job's processes still alive ``grace`` seconds after torchrun returned: a front end or
    the coordinator may take a moment to leave after their SIGINT (FACTS.md section 12)."""
    deadline = time.time() + grace
    while run.alive_pids() and time.time() < deadline:
        time.sleep(0.5)
    return run.alive_pids()


def _start(kind, folder, save):
    args = profile(save)
    if kind == "wheel":
        return launch.start_server(folder / "reports", nproc=2, args=["--no-reference", *args],
                                   launcher_prefix=LAUNCHER)
    overlay_dir, checkpoint, _ = launch.make_real_checkpoint(CHECKOUT, str(folder))
    return launch.start_real_server(folder / "reports", CHECKOUT, overlay_dir, checkpoint,
                                    extra=args, launcher_prefix=LAUNCHER)


@pytest.fixture(scope="module", params=["wheel", pytest.param("real_tool", marks=real_tool_only)])
def profiled_server(request, tmp_path_factory):
    """A TP=2 server with ``--profile --profile-ranks -1`` and no window flag: a window opened
    and closed over HTTP around two completions, refusals, then a window with a delay and a
    length around a third completion; SIGINT to the job."""
    if _MISSING:
        pytest.skip(f"the dynamic server needs {', '.join(_MISSING)}")
    folder = tmp_path_factory.mktemp(f"profiled_{request.param}")
    save = folder / "prof"
    server = _start(request.param, folder, save)
    answers = {}
    try:
        answers["start"] = server.post("/start_profile")
        _landed(server, 1)
        answers["start_again"] = server.post("/v1/start_profile", {"max": 2})
        answers["batch"] = server.completion(list(PROMPTS), 5)
        answers["stop"] = server.post("/stop_profile")
        _landed(server, 2)
        answers["stop_again"] = server.post("/v1/stop_profile")
        for name, body in (("dots", {"prefix": "../up"}), ("slash", {"prefix": "a/b"}),
                           ("hidden", {"prefix": ".x"}), ("long", {"prefix": "p" * 65}),
                           ("negative", {"delay": -1}), ("text", {"max": "2"}),
                           ("bool", {"max": True}), ("unknown", {"steps": 3}),
                           ("not_object", [1, 2])):
            answers[f"bad_{name}"] = server.post("/start_profile", body)
        _quiet(server)
        answers["delayed"] = server.post("/start_profile", {"prefix": "decode", "delay": 1,
                                                             "max": 2})
        _landed(server, 3)
        answers["single"] = server.completion("30 31 32 33", 6)
        _quiet(server)
        answers["stop_after_max"] = server.post("/stop_profile")
    except BaseException:
        server.kill_all()
        raise
    run = server.stop(signal.SIGINT)
    leftovers = _leftovers(run)
    if leftovers:
        server.kill_all()
    print(f"profiled dynamic server ({request.param}) TP=2: ready after {server.ready_s:.1f} s, "
          f"stopped {run.stop_s:.1f} s after SIGINT, {run.wall_s:.1f} s in all")
    return {"answers": answers, "run": run, "save": save, "leftovers": leftovers,
            "kind": request.param}


def _window(save, rank, folder):
    data = manifest(save, rank)
    return next(w for w in data["windows"] if w["dir"].startswith(folder))


@needs_server_deps
def test_every_engine_rank_writes_one_window_of_the_steps_between_start_and_stop(profiled_server):
    save, reports = profiled_server["save"], profiled_server["run"].reports
    for rank in (0, 1):
        report = reports[rank]
        batch = {int(i): r for i, r in report["requests"].items()
                 if " ".join(map(str, r["prompt"])) in PROMPTS}
        first, last = report["steps"][0]["step"], max(r["finished_at_step"]
                                                       for r in batch.values())
        window = _window(save, rank, f"estep_{first}-")
        assert window["dir"] == f"estep_{first}-end" and window["started_by"]["by"] == "http"
        # The batch's steps, from its first to the one that finished it (and the dummy
        # forwards after it, if any ran before the stop landed).
        recorded = window["iterations_recorded"]
        assert recorded[:last - first + 1] == list(range(first, last + 1))
        traces = [t for t in rank_traces(save, rank) if f"/estep_{first}-end/" in t]
        assert len(traces) == 1 and step_ids(traces[0]) == recorded
        assert op_threads(traces[0]) == {report["main_thread"]}  # the forward's operators
        assert ranges(traces[0])[0].split()[0] in KINDS
        dummies = {d["step"] for d in report["dummy_forwards"]}
        assert [u["n"] for u in window["units"] if u["kind"] == "dummy"] == \
            sorted(dummies & set(recorded))
        finished = {i for u in window["units"] for i in u.get("finished_requests", ())}
        assert finished == set(batch)
        # The relayed signal started and stopped ours, not cudaProfilerStart/Stop.
        assert report["profiler_calls"] == []


@needs_server_deps
def test_nothing_is_written_by_the_front_ends_or_the_coordinator(profiled_server):
    save, run = profiled_server["save"], profiled_server["run"]
    assert run.pids["frontends"] and run.pids["coordinator"]  # they ran
    manifests = sorted(n for n in os.listdir(save) if n.startswith("profile_manifest"))
    assert manifests == ["profile_manifest_rank0.json", "profile_manifest_rank1.json"]
    assert {manifest(save, r)["pid"] for r in (0, 1)} == {run.reports[r]["pid"] for r in (0, 1)}
    # Every file under the save path is a rank's: listed in one of the two manifests.
    listed = {os.path.normpath(f) for r in (0, 1) for f in manifest(save, r)["files"]}
    written = {os.path.relpath(os.path.join(folder, name), save)
               for folder, _, names in os.walk(save) for name in names}
    assert written - set(manifests) == listed
    assert "not connected" not in run.stderr


@needs_server_deps
def test_check_accepts_every_rank_and_summary_reads_the_steps(profiled_server):
    save = profiled_server["save"]
    code, answer = check(save)
    assert code == 0 and verdicts(answer) == {0: "valid", 1: "valid"}, answer
    from mindspeed_prof.output.summary.directory import summarize_directory

    summary = summarize_directory(str(save))
    windows = summary.rank(0).engine_windows
    assert {w["dir"] for w in windows} >= {"estep_1-end"}
    first = next(w for w in windows if w["dir"] == "estep_1-end")
    rows = first["rows"]
    assert rows[0]["kind"] == "prefill"
    # the two prompts (6 and 3 tokens) are prefilled together in the first step, or the first
    # alone when the engine steps before the second is added (a loaded host: CI on cf99075),
    # the second then beside the first's decode (each decoding request one token)
    prefilled = [(r["prefill"], r["tokens"] - r["decode"]) for r in rows if r["prefill"]]
    assert prefilled in ([(2, 9)], [(1, 6), (1, 3)]), rows[:4]
    assert first["mean_latency_ms"] > 0 and first["top_ops"]
    assert set(first["finished_requests"]) == {0, 1}


@needs_server_deps
@pytest.mark.parametrize("route", ["start", "stop", "delayed"])
def test_the_routes_answer_at_once(profiled_server, route):
    status, payload, seconds = profiled_server["answers"][route]
    assert status == 200 and payload["status"] == "ok", payload
    assert seconds < 5.0


@needs_server_deps
def test_a_start_while_a_window_runs_and_a_stop_with_none_are_refused_with_409(profiled_server):
    answers = profiled_server["answers"]
    status, payload, _ = answers["start_again"]
    assert status == 409 and "one window at a time" in payload["details"]
    status, payload, _ = answers["stop_again"]
    assert status == 409 and "no window started over HTTP is running" in payload["details"]
    status, payload, _ = answers["stop_after_max"]
    assert status == 409 and "ended by itself after its 'max'" in payload["details"]


@needs_server_deps
@pytest.mark.parametrize("name,words", [
    ("dots", "not a folder name"), ("slash", "not a folder name"), ("hidden", "not a folder"),
    ("long", "at most 64"), ("negative", "'delay' must be an integer >= 0"),
    ("text", "'max' must be an integer >= 0"), ("bool", "'max' must be an integer >= 0"),
    ("unknown", "unknown field(s) 'steps'"), ("not_object", "must be a JSON object")])
def test_a_bad_start_body_is_refused_with_400_naming_the_field(profiled_server, name, words):
    status, payload, _ = profiled_server["answers"][f"bad_{name}"]
    assert status == 400 and words in payload["details"], payload


@needs_server_deps
def test_a_start_with_delay_and_max_records_those_steps_into_its_prefix_folder(profiled_server):
    save, reports = profiled_server["save"], profiled_server["run"].reports
    status, payload, _ = profiled_server["answers"]["delayed"]
    assert (payload["delay"], payload["max"], payload["prefix"]) == (1, 2, "decode")
    for rank in (0, 1):
        window = _window(save, rank, "decode/")
        asked = window["started_by"]["asked_before"]
        assert window["dir"] == f"decode/estep_{asked + 1}-{asked + 2}"
        assert window["iterations_recorded"] == [asked + 1, asked + 2]
        # The step it was asked before is the request's prefill: skipped (delay 1).
        # (A step's own forward is its last: the report adds the dummy forwards before it.)
        kinds = {s["step"]: s["forwards"][-1]["kind"] for s in reports[rank]["steps"]}
        assert kinds[asked] == "prefill"
        assert [u["kind"] for u in window["units"]] == ["decode", "decode"]
        trace = [t for t in rank_traces(save, rank) if "/decode/" in t]
        assert [step_ids(t) for t in trace] == [[asked + 1, asked + 2]]


@needs_server_deps
def test_sigint_to_the_job_leaves_no_process_behind(profiled_server):
    run = profiled_server["run"]
    assert profiled_server["leftovers"] == {}
    assert not launch.port_open(run.port)
    for rank in (0, 1):
        assert manifest(profiled_server["save"], rank)["exit"] is not None
