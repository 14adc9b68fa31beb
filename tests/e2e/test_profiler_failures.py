"""A failing profiler never fails the training: the failure is logged on its rank with what to do,
recorded in that rank's manifest, and `mindspeed-prof check` reports the rank. What can be known
before step 1 (an unwritable save path, an unusable torch_npu) stops the job at start-up instead.
"""

import json
import os

import pytest

import mindspeed_prof
from helpers.e2e import check, env_for, profile_flags, tracebacks_from_training, train, verdicts
from helpers.e2e import worker_exit_codes
from helpers.traces import manifest
from mindspeed_prof import backends

pytestmark = pytest.mark.e2e

ALL_ITERATIONS = [1, 2, 3, 4, 5, 6]
# One broken torch.profiler call per rank, all in one 4-rank job.
BROKEN = {0: ("init", "start", "torch.profiler.profile.__init__ broken"),
          1: ("start", "start", "torch.profiler.profile.start broken"),
          2: ("stop", "stop", "torch.profiler.profile.stop broken"),
          3: ("export", "export", "Permission denied")}
FIXES = {"start": "training continues without profiling on this rank",
         "stop": "training continues, this rank's trace may be missing or partial",
         "export": "check free space and permissions of --profile-save-path"}


@pytest.fixture(scope="module")
def broken_job(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("broken")
    save = tmp_path / "prof"
    env = env_for(tmp_path, HARNESS_TORCH_PROFILER_FAIL=";".join(
        f"{point}@{rank}" for rank, (point, _, _) in BROKEN.items()))
    return train(tmp_path, profile_flags(save, ("-1",), 3, 5), nproc=4, env=env), save


def test_training_runs_to_the_end_whatever_profiler_call_fails(broken_job):
    run, _ = broken_job
    run.check()
    for rank in BROKEN:
        assert run.report(rank)["train_step_iterations"] == ALL_ITERATIONS
        assert run.report(rank)["end"] == {"how": "returned"}
    assert tracebacks_from_training(run) == []


def test_each_profiler_failure_is_logged_on_its_rank_with_the_fix(broken_job):
    run, _ = broken_job
    for rank, (_, phase, what) in BROKEN.items():
        lines = [line for line in run.stderr.splitlines()
                 if line.startswith(f"[mindspeed_prof rank {rank}] ERROR: {phase}: ")]
        assert any(what in line and FIXES[phase] in line for line in lines), run.describe()


def test_each_profiler_failure_is_recorded_in_that_rank_manifest(broken_job):
    _, save = broken_job
    for rank, (_, phase, what) in BROKEN.items():
        data = manifest(save, rank)
        assert data["status"] == "failed"
        assert data["exit"] == {"reason": "finished", "detail": None}
        assert [e["phase"] for e in data["errors"]] == [phase], data["errors"]
        assert what in data["errors"][0]["message"]


def test_check_reports_every_rank_whose_profiler_failed(broken_job):
    _, save = broken_job
    code, report = check(save)
    assert code != 0
    assert set(verdicts(report)) == set(BROKEN)
    assert "valid" not in verdicts(report).values()
    for entry in report["ranks"]:
        assert any(BROKEN[entry["rank"]][2] in error for error in entry["errors"]), entry


def test_disk_full_mid_run_loses_only_that_rank_trace_and_says_so(tmp_path):
    # Rank 1 cannot write a file past 256 KiB, as on a full disk; its trace is larger.
    save = tmp_path / "prof"
    run = train(tmp_path, profile_flags(save, ("-1",), 3, 5),
                env=env_for(tmp_path, HARNESS_MAX_FILE_KB="256@1")).check()
    assert run.report(1)["train_step_iterations"] == ALL_ITERATIONS
    (error,) = manifest(save, 1)["errors"]
    assert error["phase"] == "export" and FIXES["export"] in error["message"]
    assert f"[mindspeed_prof rank 1] ERROR: export: writing {save}" in run.stderr
    assert not [name for name in os.listdir(save) if name.startswith("rank1.")], \
        "a partial trace was left on the full disk"
    code, report = check(save)
    assert code != 0 and verdicts(report)[0] == "valid" and verdicts(report)[1] != "valid"


def test_torch_npu_failing_to_start_is_recorded_and_training_continues(tmp_path):
    save = tmp_path / "prof"
    env = env_for(tmp_path, pythonpath=[os.path.join(os.path.dirname(__file__), "..", "fakes")],
                  FAKE_TORCH_NPU_FAIL="start")
    run = train(tmp_path, profile_flags(save, ("0",), 3, 5, "--profile-backend", "npu",
                                        "--profile-with-cpu"), env=env).check()
    assert run.report(0)["train_step_iterations"] == ALL_ITERATIONS
    start_errors = [e["message"] for e in manifest(save, 0)["errors"] if e["phase"] == "start"]
    assert any("Call start failed" in m and "use --profile-backend torch" in m
               for m in start_errors), start_errors
    code, report = check(save)
    assert code != 0 and verdicts(report)[0] != "valid"


@pytest.mark.parametrize("save_path, extra, message", [
    ("{tmp}/a_file/prof", [], "--profile-save-path {tmp}/a_file/prof is not writable on rank"),
    ("{tmp}/prof", ["--profile-backend", "npu"],
     "--profile-backend npu needs a working torch_npu, but `import torch_npu` failed"),
], ids=["unwritable save path", "npu backend without torch_npu"])
def test_problems_known_before_step_1_stop_the_job_at_start_up(tmp_path, save_path, extra,
                                                               message):
    (tmp_path / "a_file").write_text("not a directory")
    save = save_path.format(tmp=tmp_path)
    run = train(tmp_path, profile_flags(save, ("-1",), 3, 5, *extra))
    assert 2 in worker_exit_codes(run).values(), run.describe()
    assert message.format(tmp=tmp_path) in run.stderr
    assert all(report["train_step_iterations"] == [] for report in run.reports.values())
    assert tracebacks_from_training(run) == []


def test_a_profiler_that_cannot_even_be_built_leaves_the_loop_running(tmp_path, monkeypatch):
    class Unbuildable:
        def __init__(self, **kwargs):
            raise RuntimeError("no profiler here")

    monkeypatch.setattr(backends, "backend_class", lambda name: Unbuildable)
    config = mindspeed_prof.ProfilerConfig(profile=True, profile_step_start=2,
                                           profile_step_end=4, profile_ranks=("0",),
                                           profile_save_path=str(tmp_path),
                                           profile_backend="torch")
    ran = []
    with mindspeed_prof.profile(config, train_iters=5, rank=0, world_size=1) as prof:
        for iteration in range(1, 6):
            ran.append(iteration)
            prof.step()
    assert ran == [1, 2, 3, 4, 5]
    data = json.loads((tmp_path / "profile_manifest_rank0.json").read_text())
    assert data["status"] == "failed" and data["windows"][0]["status"] == "failed"
    assert "RuntimeError: no profiler here; training continues" in data["errors"][0]["message"]
