"""The torch backend's summary: a real breakdown per step (computing, communication exposed and
overlapped, free) from the trace's own events, units in every header, what SHARE is a share
of, every step with --steps, and a torch trace never sharing a row with an NPU capture."""

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.cli import run_cli, run_cli_json
from mindspeed_prof.output import summarize_directory
from output_fixtures import samples
from output_fixtures.torch_traces import torch_trace

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
REPO = os.path.dirname(TESTS)
PARTS = ("Computing", "Communication(Not Overlapped)", "Free")
COLLECTIVE = ("c10d::", "gloo:")


@pytest.fixture(scope="module")
def gloo_job(tmp_path_factory):
    """Two ranks' traces of a real gloo job: blocking and overlapped all-reduces each step."""
    out = tmp_path_factory.mktemp("gloo") / "profile_dir"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, TESTS]))
    done = subprocess.run([sys.executable, "-m", "output_fixtures.gloo_job", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(os.listdir(out)) == 2
    return out


def union_within(spans, lo, hi):
    """Length of the union of ``spans`` clipped to [lo, hi] (the plain way)."""
    total, reach = 0.0, lo
    for start, end in sorted((max(s, lo), min(e, hi)) for s, e in spans):
        if end <= start:
            continue
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def expected_breakdown(trace_path):
    """The breakdown recomputed from the trace by definition, step by step."""
    with open(trace_path) as handle:
        events = [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]
    comm = [(e["ts"], e["ts"] + e["dur"], e["tid"]) for e in events
            if e["name"].startswith(COLLECTIVE)]
    compute = [(e["ts"], e["ts"] + e["dur"]) for e in events
               if e.get("cat") == "cpu_op" and not e["name"].startswith(COLLECTIVE)
               and not any(t == e["tid"] and s <= e["ts"] and e["ts"] + e["dur"] <= end
                           for s, end, t in comm)]  # a collective's own ops are not compute
    comm = [(s, e) for s, e, _ in comm]
    result = {}
    for step in (e for e in events if e["name"].startswith("ProfilerStep#")):
        lo, hi = step["ts"], step["ts"] + step["dur"]
        busy, talking = union_within(compute, lo, hi), union_within(comm, lo, hi)
        either = union_within(compute + comm, lo, hi)
        result[int(step["name"].split("#")[1])] = {
            "Computing": busy, "Communication": talking,
            "Overlapped": busy + talking - either, "Free": step["dur"] - either}
    return result


@pytest.mark.slow  # the module's gloo job (`gloo_job`)
def test_each_step_of_a_gloo_job_splits_into_computing_communication_and_free(gloo_job):
    summary = summarize_directory(str(gloo_job))
    assert [r.rank for r in summary.ranks] == [0, 1]
    for rank in summary.ranks:
        assert [s["step"] for s in rank.steps] == [1, 2, 3]
        (trace,) = [os.path.join(gloo_job, n) for n in os.listdir(gloo_job)
                    if n.startswith(f"rank{rank.rank}.")]
        expected = expected_breakdown(trace)
        for step in rank.steps:
            assert sum(step[p] for p in PARTS) == pytest.approx(step["step_time"])
            for key, value in expected[step["step"]].items():
                assert step[key] == pytest.approx(value, abs=1e-6), (rank.rank, step, key)
            assert step["Communication(Not Overlapped)"] == pytest.approx(
                step["Communication"] - step["Overlapped"])
        assert "CPU operators" in rank.basis


@pytest.mark.slow  # the module's gloo job (`gloo_job`)
def test_the_blocking_all_reduce_is_exposed_and_the_one_beside_compute_overlapped(gloo_job):
    steps = [step for rank in summarize_directory(str(gloo_job)).ranks for step in rank.steps]
    for step in steps:
        assert step["Communication(Not Overlapped)"] > 0, step  # the blocking one
        assert step["Computing"] > step["Overlapped"]
    # the matmuls run until gloo's thread is done; only an OS that parks the computing thread
    # for the whole reduction (2 ranks on 2 loaded cores) leaves a step without overlap
    assert any(step["Overlapped"] > 0 for step in steps), steps


@pytest.mark.slow  # the module's gloo job (`gloo_job`)
def test_the_table_names_units_the_share_basis_and_with_steps_every_step(gloo_job, capsys):
    code, out, _ = run_cli(capsys, "summary", gloo_job, "--steps")
    assert code == 0
    assert "Step time(us)  Computing(us)  Comm(NotOvl)(us)  Overlapped(us)  Comm(us)  Free(us)" \
        in out
    assert "breakdown from: CPU operators in each ProfilerStep" in out
    assert "SHARE = % of every operator's self time, all ranks, listed or not" in out
    per_step = out.split("Per step (every profiled step of every rank)")[1].splitlines()
    rows = [line.split() for line in per_step[2:] if line.split()[:2] in (["0", "torch"],
                                                                          ["1", "torch"])]
    assert [(r[0], r[2]) for r in rows] == [(rank, step) for rank in "01" for step in "123"]
    assert "Per step" not in run_cli(capsys, "summary", gloo_job)[1]


@pytest.mark.slow  # the module's gloo job (`gloo_job`)
def test_json_and_csv_carry_the_per_step_breakdown(gloo_job, capsys):
    code, data = run_cli_json(capsys, "summary", gloo_job)
    assert code == 0
    step = data["ranks"][0]["steps"][0]
    assert {"Computing", "Communication", "Overlapped", "Free", "step_time"} <= set(step)
    assert data["ranks"][0]["breakdown_basis"].startswith("CPU operators")
    _, text, _ = run_cli(capsys, "summary", gloo_job, "--csv")
    assert f"step,0,1,,,Computing,{step['Computing']}" in text.splitlines()


def test_a_trace_without_collectives_has_no_communication(tmp_path):
    torch_trace(tmp_path, rank=0)
    (rank,) = summarize_directory(str(tmp_path)).ranks
    for step in rank.steps:
        assert step["Communication"] == 0 and step["Overlapped"] == 0
        assert step["Computing"] > 0 and step["Free"] >= 0


def test_a_trace_with_device_kernels_is_broken_down_on_the_device(tmp_path):
    # kineto's CUDA layout, by hand (no GPU here): the step on the device, a GEMM and an NCCL
    # kernel on two streams overlapping for 20 us, a copy; CPU operators do not count then
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 90},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 7,
         "ts": 10, "dur": 120},
        {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_f32", "pid": 0, "tid": 7,
         "ts": 10, "dur": 50},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
         "pid": 0, "tid": 20, "ts": 40, "dur": 40},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH", "pid": 0, "tid": 7,
         "ts": 100, "dur": 10},
    ]
    (tmp_path / "rank0.1.pt.trace.json").write_text(json.dumps({"traceEvents": events}))
    (rank,) = summarize_directory(str(tmp_path)).ranks
    (step,) = rank.steps
    assert rank.basis.startswith("device kernels")
    assert (step["Computing"], step["Communication"], step["Overlapped"],
            step["Communication(Not Overlapped)"], step["Free"], step["step_time"]) == (
        60, 40, 20, 20, 40, 120)


def test_a_torch_trace_and_an_npu_capture_of_one_rank_get_a_row_each(tmp_path, capsys):
    # before: one row, backend npu, the NPU's step breakdown beside the torch trace's operators
    samples.npu_capture(tmp_path, 0)
    torch_trace(tmp_path, rank=0)
    code, data = run_cli_json(capsys, "summary", tmp_path)
    assert code == 0
    rows = [(r["rank"], r["backend"]) for r in data["ranks"]]
    assert rows == [(0, "npu"), (0, "torch")]
    npu, torch_row = data["ranks"]
    assert npu["top_kernels"] and not npu["top_ops"]
    assert torch_row["top_ops"] and not torch_row["top_kernels"]
    assert torch_row["breakdown_basis"].startswith("CPU operators")
    assert npu["breakdown_basis"] == "step_trace_time.csv"
    assert data["overall"]["step_time_us"] is None  # no mean across device and CPU times
    assert set(data["overall"]["by_backend"]) == {"npu", "torch"}
    assert data["overall"]["by_backend"]["torch"]["step_time_us"] == torch_row["step_time_us"]
    assert {s["backend"] for s in data["slow_ranks"]} == {"npu", "torch"}
    assert any("captures of both backends for rank(s) 0" in n for n in data["notes"])
    _, out, _ = run_cli(capsys, "summary", tmp_path)
    assert [line.split()[:2] for line in out.splitlines() if line.startswith("all")] == [
        ["all", "npu"], ["all", "torch"]]


def test_plot_draws_a_bar_per_backend_of_a_rank(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    from mindspeed_prof.output.render import plot

    samples.npu_capture(tmp_path, 0)
    torch_trace(tmp_path, rank=0)
    drawn = []
    real = plot.plot_breakdown

    def spy(summary, path):
        import matplotlib.axes

        original = matplotlib.axes.Axes.bar
        monkeypatch.setattr(matplotlib.axes.Axes, "bar",
                            lambda self, x, *a, **k: drawn.append(list(x)) or original(
                                self, x, *a, **k))
        return real(summary, path)

    monkeypatch.setattr(plot, "plot_breakdown", spy)
    code, out, _ = run_cli(capsys, "summary", tmp_path, "--plot", tmp_path / "steps.png")
    assert code == 0 and (tmp_path / "steps.png").stat().st_size > 0
    assert drawn and all(labels == ["0 npu", "0 torch"] for labels in drawn)


@settings(max_examples=80, deadline=None)
@given(intervals=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 30)), max_size=30),
       windows=st.lists(st.tuples(st.integers(-10, 220), st.integers(0, 60)), max_size=12))
def test_the_time_every_window_covers_is_counted_as_one_window_at_a_time(intervals, windows):
    """Every step's window at once (windows overlapping, touching, outside the intervals,
    empty): the same time as clipping each interval to each window, one by one."""
    np = pytest.importorskip("numpy")
    from mindspeed_prof.output.summary import torchsteps

    starts = np.array([float(a) for a, _ in intervals])
    union = torchsteps._union(starts, starts + np.array([float(d) for _, d in intervals]))
    los = np.array([float(a) for a, _ in windows])
    his = los + np.array([float(d) for _, d in windows])
    got = torchsteps._covered(np, union, los, his)
    for lo, hi, value in zip(los, his, got):
        expected = sum(max(min(e, hi) - max(s, lo), 0.0) for s, e in zip(*union))
        assert value == pytest.approx(expected, abs=1e-9)
    assert len(got) == len(windows)
