"""The window recorder every scenario shares (DESIGN §6): units, per-unit sessions, one running
session per process, sessions bound to their thread."""

import json
import os
import threading

from helpers.inference import config, work  # the same tiny model and window 2-3
from helpers.traces import step_ids, torch_traces
from mindspeed_prof.recording.recorder import WindowRecorder
from mindspeed_prof.config.units import ITERATION, REQUEST, RL_STEP


def run(recorder, units, labels=()):
    for n in units:
        recorder.begin(n)
        with recorder.range(labels[0]) if labels else recorder.range("work"):
            work()
        recorder.end(n)


def read_manifest(folder, rank=0):
    with open(os.path.join(folder, f"profile_manifest_rank{rank}.json")) as handle:
        return json.load(handle)


def test_request_unit_records_one_session_per_request_in_req_folders(tmp_path):
    recorder = WindowRecorder(config(tmp_path), unit=REQUEST, session_per_unit=True)
    recorder.arm(first=1)
    run(recorder, range(1, 6))
    recorder.close()
    save = tmp_path / "prof"
    assert sorted(p for p in os.listdir(save) if not p.endswith(".json")) == ["req_2-2", "req_3-3"]
    assert [step_ids(t) for t in torch_traces(save / "req_2-2")] == [[2]]
    assert [step_ids(t) for t in torch_traces(save / "req_3-3")] == [[3]]
    data = read_manifest(save)
    assert data["unit"] == "request" and data["status"] == "complete"
    assert [w["iterations_recorded"] for w in data["windows"]] == [[2], [3]]


def test_labelled_ranges_land_inside_the_recorded_step(tmp_path):
    recorder = WindowRecorder(config(tmp_path), unit=REQUEST, session_per_unit=True)
    recorder.arm(first=1)
    run(recorder, range(1, 4), labels=("prefill",))
    recorder.close()
    with open(torch_traces(tmp_path / "prof" / "req_2-2")[0]) as handle:
        names = {e.get("name") for e in json.load(handle)["traceEvents"]}
    assert {"prefill", "ProfilerStep#2"} <= names


def test_role_recorder_writes_a_complete_save_path_under_its_role(tmp_path):
    cfg = config(tmp_path)
    recorder = WindowRecorder(cfg, unit=RL_STEP, role="actor",
                              save_path=os.path.join(cfg.profile_save_path, "actor"))
    recorder.arm(first=1, last=5)
    run(recorder, range(1, 6))
    recorder.close()
    data = read_manifest(tmp_path / "prof" / "actor")
    assert data["role"] == "actor" and data["unit"] == "RL step"
    assert step_ids(torch_traces(tmp_path / "prof" / "actor")[0]) == [2, 3]


def test_overlapping_sessions_of_two_recorders_are_refused_naming_both(tmp_path, capsys):
    cfg = config(tmp_path)
    actor = WindowRecorder(cfg, unit=RL_STEP, role="actor",
                           save_path=os.path.join(cfg.profile_save_path, "actor"))
    ref = WindowRecorder(cfg, unit=RL_STEP, role="ref", session_per_unit=True,
                         save_path=os.path.join(cfg.profile_save_path, "ref"))
    actor.arm(first=1, last=4)
    ref.arm(first=1, last=4)
    actor.begin(2)
    ref.begin(2)           # the actor's session is running: refused, the work goes on
    work()
    ref.end(2)
    actor.end(2)
    assert "role 'ref'" in capsys.readouterr().err
    actor.begin(3)
    work()
    actor.end(3)
    ref.begin(3)           # sequential: fine
    work()
    ref.end(3)
    actor.close()
    ref.close()
    errors = read_manifest(tmp_path / "prof" / "ref")["errors"]
    assert any("role 'actor'" in e["message"] and "one profiler at a time" in e["message"]
               for e in errors)
    assert step_ids(torch_traces(tmp_path / "prof" / "actor")[0]) == [2, 3]
    assert [step_ids(t) for t in torch_traces(tmp_path / "prof" / "ref" / "step_3-3")] == [[3]]
    assert not os.path.exists(tmp_path / "prof" / "ref" / "step_2-2")


def test_a_session_is_never_stopped_from_another_thread(tmp_path):
    recorder = WindowRecorder(config(tmp_path, profile_step_end=3), unit=REQUEST)
    recorder.arm(first=1)
    run(recorder, [1])
    recorder.begin(2)
    work()
    other = threading.Thread(target=recorder.end, args=(2,))
    other.start()
    other.join()
    assert recorder.recording  # the other thread's end() touched nothing
    recorder.end(2)            # the session's own thread closes it
    recorder.close()
    data = read_manifest(tmp_path / "prof")
    assert any("cannot be stepped or stopped from thread" in e["message"] for e in data["errors"])
    assert step_ids(torch_traces(tmp_path / "prof")[0]) == [2]


def test_closing_from_another_thread_says_the_running_session_was_not_written(tmp_path):
    recorder = WindowRecorder(config(tmp_path), unit=REQUEST)
    recorder.arm(first=1)
    started = threading.Event()
    release = threading.Event()

    def serve():
        run(recorder, [1])
        recorder.begin(2)
        started.set()
        release.wait(10)
        recorder.end(2)  # the request finishes after the close: nothing more is written
        recorder._session.backend._prof.stop()  # test clean-up only: the process would end here

    worker = threading.Thread(target=serve)
    worker.start()
    started.wait(10)
    recorder.close("signal", "SIGTERM")
    data = read_manifest(tmp_path / "prof")
    release.set()
    worker.join()
    assert data["windows"][0]["status"] == "incomplete" and data["status"] == "incomplete"
    assert any("cannot be stopped from thread" in e["message"] for e in data["errors"])


def test_iteration_unit_keeps_the_training_layout(tmp_path):
    recorder = WindowRecorder(config(tmp_path), unit=ITERATION)
    recorder.arm(first=1, last=5)
    run(recorder, range(1, 6))
    recorder.close()
    assert step_ids(torch_traces(tmp_path / "prof")[0]) == [2, 3]
    assert read_manifest(tmp_path / "prof")["unit"] == "iteration"


def test_repeated_windows_without_a_known_end_are_not_all_charged_at_start(tmp_path):
    # --profile-every with no last unit plans 10,000 windows ahead; only the first is certain.
    recorder = WindowRecorder(config(tmp_path, profile_every=10, profile_max_gb=1.0),
                              unit=REQUEST, session_per_unit=True)
    recorder.arm(first=1)
    run(recorder, range(1, 4))
    recorder.close()
    assert [step_ids(t) for t in torch_traces(tmp_path / "prof" / "req_2-2")] == [[2]]


def test_sessions_without_a_warm_up_unit_do_not_warn_in_the_users_log(tmp_path, recwarn):
    recorder = WindowRecorder(config(tmp_path), unit=REQUEST, session_per_unit=True)
    recorder.arm(first=1)
    run(recorder, range(1, 4))
    recorder.close()
    assert not [w for w in recwarn if "warmup" in str(w.message)]


def test_the_first_profiled_rank_says_what_the_windows_end_added_to_its_last_iteration(
        tmp_path, capsys):
    # Before: Megatron's log showed the window's last iteration 3-7x the others, no word why.
    import re

    for analyse, rank, profiled in (("sync", 0, [0, 1]), ("async", 0, [0]), ("sync", 1, [0, 1])):
        folder = tmp_path / f"{analyse}{rank}"
        recorder = WindowRecorder(config(folder, profile_analyse=analyse, profile_ranks=profiled),
                                  rank=rank, world_size=2)
        recorder.arm(first=1, last=5)
        run(recorder, range(1, 6))
        recorder.close()
        out = capsys.readouterr().out
        said = [line for line in out.splitlines() if "window 2-3 ended" in line]
        if rank:
            assert said == [], out  # one line per job: the lowest profiled rank's
            continue
        assert len(said) == 1 and said[0].startswith("[mindspeed_prof rank 0] "), out
        if analyse == "sync":
            assert re.search(r"the profiler's stop took \d+\.\d{3} s and writing its trace "
                             r"\d+\.\d{3} s, inside iteration 3; that iteration's time in the "
                             r"log includes it", said[0]), said
        else:
            assert re.search(r"stop took \d+\.\d{3} s \(the trace is written in the "
                             r"background: --profile-analyse async\), inside iteration 3",
                             said[0]), said


def test_whether_a_window_records_on_this_process_is_one_call_true_only_inside_windows(tmp_path):
    from mindspeed_prof.recording.session import window_recording

    recorder = WindowRecorder(config(tmp_path))  # records 2-3, warm-up at 1
    recorder.arm(first=1, last=5)
    seen = []
    for n in range(1, 6):
        recorder.begin(n)
        seen.append((window_recording(), recorder.recording))
        work()
        recorder.end(n)
    recorder.close()
    assert seen == [(True, True), (True, True), (True, True), (False, False), (False, False)]
    assert window_recording() is False
