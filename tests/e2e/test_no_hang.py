"""Profiling one rank of a multi-rank job cannot make the others time out in a collective.

The guarantee (``--profile-analyse async``, the default): the end of a window never blocks the
profiled rank on writing or parsing. The torch backend exports the chrome trace from a background
thread; the npu backend passes ``async_mode=True`` to torch_npu's trace handler (parsing in a
child process). When Megatron's ``train()`` returns, the rank does not wait for that export
either: Megatron runs collectives after it (final checkpoint, validation and test evaluation).
The process ends once the trace is written.

Proof: rank 0 alone is profiled, its trace export (or NPU parse) is made slower than the process
group's collective timeout, and the job evaluates after training (more collectives). Async jobs
of 2 and 4 ranks complete; the same job with ``--profile-analyse sync`` times out, which shows the
set-up can catch a hang. What stays on the training thread either way (torch's ``stop_trace`` and
the GIL-holding part of kineto's save) is measured in ``backends/torch_backend.py``.
"""

import pytest

from helpers.e2e import FAKES, check, env_for, profile_flags, train, verdicts
from helpers.traces import manifest, step_ids, torch_traces

pytestmark = pytest.mark.e2e

DELAY_S = 7        # the export (or parse) of rank 0's window
PG_TIMEOUT_S = 4   # every collective gives up after this long
EVALUATE = ["--eval-iters", "1"]  # validation and test after train(): collectives


def slow_job(tmp_path, analyse, nproc=2, backend="torch", **env):
    save = tmp_path / "prof"
    if backend == "npu":
        env.update(pythonpath=[FAKES])  # the fake torch_npu
    env = env_for(tmp_path, HARNESS_PG_TIMEOUT_S=PG_TIMEOUT_S, **env)
    flags = profile_flags(save, ("0",), 3, 5, "--profile-analyse", analyse,
                          "--profile-backend", backend, "--profile-with-cpu")
    run = train(tmp_path, flags + EVALUATE, nproc=nproc, env=env, timeout=180)
    return run, save


def timed_out_in_a_collective(run):
    return any("Timed out" in str(report["end"]) for report in run.reports.values())


@pytest.mark.parametrize("nproc", [2, 4])
def test_slow_trace_export_on_the_profiled_rank_does_not_stall_the_others(tmp_path, nproc):
    run, save = slow_job(tmp_path, "async", nproc, HARNESS_SLOW_EXPORT_S=DELAY_S)
    run.check()
    assert run.duration_s > DELAY_S  # the export really was slower than the timeout
    for rank in range(nproc):
        assert run.report(rank)["end"] == {"how": "returned"}
        assert run.report(rank)["eval_iterations"], "no collectives ran after train()"
    (trace,) = torch_traces(save)
    assert step_ids(trace) == [3, 4]
    assert manifest(save, 0)["status"] == "complete"
    assert verdicts(check(save)[1]) == {0: "valid"}


def test_the_same_slow_export_in_sync_mode_times_the_job_out(tmp_path):
    run, _ = slow_job(tmp_path, "sync", HARNESS_SLOW_EXPORT_S=DELAY_S)
    assert run.returncode != 0
    assert timed_out_in_a_collective(run), run.describe()


def test_slow_npu_parse_on_the_profiled_rank_does_not_stall_the_others(tmp_path):
    run, save = slow_job(tmp_path, "async", backend="npu", FAKE_TORCH_NPU_PARSE_DELAY_S=DELAY_S)
    run.check()
    assert run.duration_s > DELAY_S
    assert all(run.report(rank)["eval_iterations"] for rank in (0, 1))
    data = manifest(save, 0)
    assert data["backend"] == "npu" and data["windows"][0]["iterations_recorded"] == [3, 4]
    assert verdicts(check(save)[1]) == {0: "valid"}


def test_the_same_slow_npu_parse_in_sync_mode_times_the_job_out(tmp_path):
    run, _ = slow_job(tmp_path, "sync", backend="npu", FAKE_TORCH_NPU_PARSE_DELAY_S=DELAY_S)
    assert run.returncode != 0
    assert timed_out_in_a_collective(run), run.describe()
