"""Every way a training run can end inside the profiling window flushes the trace of every profiled
rank, records in its manifest how the run ended, and leaves the training's own failure (exception,
exit code, signal) exactly as it would have been without the profiler.

Each test is one 2-rank torchrun job of 6 iterations profiling iterations 3-4 (3-5 for the
job-wide signals); the failure strikes in iteration 4. Every rank loads its data with Megatron's
DataLoader worker processes (the harness's ``--num-workers``, upstream's default 2), as on a
cluster. A window the failure cuts keeps iteration 3, shows iteration 4 as the partial step, and
`check` calls it `cut` (exit 1); a window the failure leaves whole stays `valid`.
"""

import signal

import pytest

from helpers.e2e import (check, env_for, profile_flags, tracebacks_from_training, train, verdicts,
                         worker_exit_codes)
from helpers.traces import manifest, step_ids, torch_traces

pytestmark = pytest.mark.e2e

INJECTED = "RuntimeError: HARNESS_RAISE_AT_ITER: injected failure at iteration 4"


def flags(save, ranks=("-1",)):
    return profile_flags(save, ranks, 3, 5)


def assert_flushed_and_checked(save, ranks, cut_in=None):
    """Each rank's trace is on disk with iteration 3 recorded; `check` accepts them all, or, when
    the failure struck inside iteration ``cut_in``, calls them cut with that partial step."""
    for rank in ranks:
        traces = torch_traces(save)
        mine = [t for t in traces if f"/rank{rank}." in t]
        assert len(mine) == 1, traces
        data = manifest(save, rank)
        if cut_in is None:
            assert 3 in step_ids(mine[0]) and data["status"] == "complete"
            continue
        assert step_ids(mine[0]) == list(range(3, cut_in + 1))  # nothing after the cut
        assert data["status"] == "cut"
        window = data["windows"][0]
        assert window["iterations_recorded"] == list(range(3, cut_in))
        assert window["cut"] == {"reason": data["exit"]["reason"], "in_progress": cut_in}
    code, report = check(save)
    expected = "valid" if cut_in is None else "cut"
    assert code == (0 if cut_in is None else 1), report
    assert verdicts(report) == {rank: expected for rank in ranks}, report


def test_exception_in_the_window_flushes_every_rank_and_propagates_unchanged(tmp_path):
    # Both ranks raise; rank 1's trace takes 3 s longer to write, so torchrun's SIGTERM (sent
    # once rank 0 has died of its exception) reaches rank 1 in the middle of its flush.
    save = tmp_path / "prof"
    env = env_for(tmp_path, HARNESS_RAISE_AT_ITER=4, HARNESS_SLOW_EXPORT_S="3@1")
    run = train(tmp_path, flags(save), env=env)
    assert worker_exit_codes(run) == {0: 1, 1: -15}, run.describe()
    assert f"[rank0]: {INJECTED}" in run.stderr  # Megatron's exception, as raised
    assert run.report(0)["end"]["repr"] == repr(RuntimeError(INJECTED.split(": ", 1)[1]))
    for rank in (0, 1):  # rank 1 finished its manifest before the held SIGTERM ended it
        assert manifest(save, rank)["exit"] == {"reason": "exception", "detail": INJECTED}
    assert manifest(save, 1)["exit_events"]["signals"] == ["SIGTERM"]
    assert_flushed_and_checked(save, [0, 1], cut_in=4)


@pytest.mark.parametrize("exit_flags, env", [
    (["--exit-signal-handler"], {"HARNESS_SIGNAL_AT_ITER": 4}),
    (["--exit-duration-in-mins", "5"], {"HARNESS_CLOCK_AHEAD_AT_ITER": "4:600"}),
], ids=["exit-signal-handler", "exit-duration-in-mins"])
def test_megatron_sys_exit_in_the_window_flushes_and_keeps_the_exit_code(tmp_path, exit_flags,
                                                                          env):
    save = tmp_path / "prof"
    run = train(tmp_path, flags(save) + exit_flags, env=env_for(tmp_path, **env)).check()
    for rank in (0, 1):
        assert run.report(rank)["sys_exit_in_train"] == {"code": 0, "iteration": 4}
        assert run.report(rank)["end"] == {"how": "sys_exit", "code": 0}
        data = manifest(save, rank)
        assert data["exit"] == {"reason": "sys.exit", "detail": "exit code 0"}
        assert data["windows"][0]["iterations_recorded"] == [3, 4]
    assert_flushed_and_checked(save, [0, 1])


def test_torchrun_sigterm_after_another_rank_failed_flushes_the_surviving_rank(tmp_path):
    # Rank 1 fails in iteration 4 while rank 0 sleeps in the same iteration, outside any
    # collective: rank 0 learns of the failure only from torchrun's SIGTERM.
    save = tmp_path / "prof"
    env = env_for(tmp_path, HARNESS_RAISE_AT_ITER="4@1", HARNESS_SLEEP_AT_ITER="4:150@0")
    run = train(tmp_path, flags(save), env=env)
    assert worker_exit_codes(run) == {0: -15, 1: 1}, run.describe()
    assert run.duration_s < 120, "rank 0 must die of SIGTERM, not sleep out its 150 s"
    assert run.report(0)["signals"] == ["SIGTERM"]
    assert manifest(save, 0)["exit"] == {"reason": "signal", "detail": "SIGTERM"}
    assert manifest(save, 1)["exit"] == {"reason": "exception", "detail": INJECTED}
    assert_flushed_and_checked(save, [0, 1], cut_in=4)


def test_keyboard_interrupt_in_the_window_flushes_and_the_rank_still_dies_of_sigint(tmp_path):
    # Rank 1 sleeps in iteration 4 outside any collective, so it learns of rank 0's end only
    # from torchrun. Blocked in a collective instead, it fails on the lost peer as soon as rank
    # 0's gloo sockets close, which is during rank 0's interpreter teardown, after the flush but
    # before Python re-raises SIGINT: on a busy machine torchrun's SIGTERM then wins that race.
    save = tmp_path / "prof"
    env = env_for(tmp_path, HARNESS_SIGNAL_AT_ITER="4@0", HARNESS_SIGNAL="INT",
                  HARNESS_SLEEP_AT_ITER="4:150@1")
    run = train(tmp_path, flags(save), env=env)
    assert worker_exit_codes(run) == {0: -2, 1: -15}, run.describe()  # -2: KeyboardInterrupt
    assert run.duration_s < 120, "rank 1 must die of torchrun's SIGTERM, not sleep out its 150 s"
    assert run.report(0)["end"]["type"] == "KeyboardInterrupt"
    assert run.report(0)["signals"] == [] and run.report(1)["signals"] == ["SIGTERM"]
    assert manifest(save, 0)["exit"] == {"reason": "interrupted",
                                         "detail": "KeyboardInterrupt (SIGINT)"}
    assert manifest(save, 1)["exit"] == {"reason": "signal", "detail": "SIGTERM"}
    assert_flushed_and_checked(save, [0, 1], cut_in=4)


@pytest.mark.parametrize("signum, exit_reason, rank_end", [
    (signal.SIGTERM, {"reason": "signal", "detail": "SIGTERM"},
     {"how": "signal", "signal": "SIGTERM"}),
    (signal.SIGINT, {"reason": "interrupted", "detail": "KeyboardInterrupt (SIGINT)"},
     {"how": "exception", "type": "KeyboardInterrupt"}),
], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_whole_job_keeps_every_ranks_trace_despite_dying_dataloader_workers(
        tmp_path, signum, exit_reason, rank_end):
    # scancel, a SLURM time limit, `timeout`, Ctrl-C or a container stop: the signal reaches
    # torchrun, every rank and every rank's DataLoader workers at once. The workers' deaths
    # make torch raise inside whatever Python code runs: the rank's final flush.
    save = tmp_path / "prof"
    env = env_for(tmp_path, HARNESS_SLEEP_AT_ITER="4:150")
    run = train(tmp_path, profile_flags(save, ("-1",), 3, 6) + ["--num-workers", "2"], env=env,
                signal_job=(signum, 4), timeout=200)
    assert not run.timed_out and run.duration_s < 120, run.describe()
    for rank in (0, 1):  # each rank ended the way the signal ends it without the profiler
        end = run.report(rank)["end"]
        assert {k: end.get(k) for k in rank_end} == rank_end, run.describe()
    for rank in (0, 1):
        data = manifest(save, rank)
        assert data["exit"] == exit_reason
        assert data["errors"] == [], data["errors"]  # nothing interrupted the stop or export
    if signum == signal.SIGTERM:  # the workers died with the job while the ranks flushed
        assert any("killed by SIGTERM" in child["how"] for rank in (0, 1)
                   for child in manifest(save, rank).get("exit_events", {})
                   .get("children_ended", [])), [manifest(save, r) for r in (0, 1)]
    assert_flushed_and_checked(save, [0, 1], cut_in=4)


def test_a_window_that_exit_interval_would_cut_is_refused_before_any_step(tmp_path):
    save = tmp_path / "prof"
    run = train(tmp_path, profile_flags(save, ("-1",), 3, 6) + ["--exit-interval", "4"])
    assert set(worker_exit_codes(run).values()) <= {2, -15} and 2 in worker_exit_codes(run).values()
    assert ("--profile-step-end 6 needs iterations up to 5, but --exit-interval stops training "
            "after iteration 4; use --profile-step-end 5 (or -1 for the end)") in run.stderr
    assert all(report["train_step_iterations"] == [] for report in run.reports.values())
    assert tracebacks_from_training(run) == [] and not torch_traces(save)
