"""Opt-in tier: the pipeline schedule marked inside a window of a real Megatron-LM checkout's
pretrain_gpt.py (CPU, gloo, --pipeline-model-parallel-size 2, 4 microbatches, one torchrun
agent of 2 ranks), and ``pipeline`` and ``whatif`` reading the marks: both stages' bubbles
beside the 1F1B theory, every microbatch's forward and backward from the schedule itself.
MEGATRON_LM_PATH as for test_real_megatron.py.

The interleaved schedule is not run here: Megatron-LM refuses PP=2 with virtual stages unless
p2p overlaps ("pipeline-model-parallel size should be greater than 2" without overlap), and the
overlapped exchange on gloo gives NaN losses (the stand-in's test_pipeline.py runs it with
megatron-core's schedule and overlap off).
"""

import os
import subprocess

import pytest

from harness.launch import launcher as torchrun_launcher
from harness.real_megatron import TINY, overlay
from helpers.cli import run_cli_json
from helpers.e2e import profile_flags
from helpers.traces import manifest, marks_by_step, step_ids, torch_traces
from mindspeed_prof.config import schedule_marks as sm

CHECKOUT = os.environ.get("MEGATRON_LM_PATH")
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    not CHECKOUT, reason="MEGATRON_LM_PATH is not set (point it at a Megatron-LM checkout "
                         "matching the installed megatron-core to run the real-Megatron tier)")]


def _job(tmp_path):
    """Profile steps 3..5 of every rank of a real PP=2 run (TINY's 4 microbatches of one sample:
    global batch 4, micro batch 1, DP 1); the save path."""
    wrapper = overlay.build(CHECKOUT, str(tmp_path / "overlay"))
    save = tmp_path / "prof"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env.update(PYTHONPATH=os.pathsep.join(
                   p for p in (str(tmp_path / "overlay"), os.environ.get("PYTHONPATH")) if p),
               CUDA_DEVICE_MAX_CONNECTIONS="1", TORCHDYNAMO_DISABLE="1", OMP_NUM_THREADS="1",
               MINDSPEED_PROF_AUTOLOAD="0", PYTHONUNBUFFERED="1")
    command = [*torchrun_launcher("master", 2), "-m", "mindspeed_prof.launch", wrapper, *TINY,
               "--pipeline-model-parallel-size", "2", *profile_flags(save, ("all",), 3, 5)]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "iteration        6/       6" in done.stdout
    return save


def test_the_real_1f1b_schedule_is_marked_and_pipeline_prices_both_stages(tmp_path, capsys):
    save = _job(tmp_path)
    traces = torch_traces(save)
    assert len(traces) == 2 and all(step_ids(t) == [3, 4] for t in traces)
    stages = set()
    for trace in traces:
        for step, marks in marks_by_step(trace).items():
            (outer,) = [m for m in marks if m.timer == sm.FORWARD_BACKWARD]
            # Megatron's own schedule, found by its name: 2 stages, 4 microbatches, no chunks
            assert (outer.schedule, outer.stages, outer.chunks, outer.microbatches) == \
                (sm.ONE_F_ONE_B, 2, 1, 4), step
            for timer in sm.COMPUTE:
                assert sorted(m.mb for m in marks if m.timer == timer) == [0, 1, 2, 3], step
            stage = outer.stage
            stages.add(stage)
            assert {m.stage for m in marks} == {stage}
            assert {m.peer for m in marks if m.is_p2p and m.peer is not None} == {1 - stage}
            assert sum(m.timer == sm.OPTIMIZER for m in marks) == 1
    assert stages == {0, 1}
    parallel = manifest(save, 0)["parallel"]
    assert (parallel["pipeline_model_parallel_size"], parallel["num_microbatches"],
            parallel["pipeline_schedule"]) == (2, 4, "1f1b")

    code, report = run_cli_json(capsys, "pipeline", save)
    assert code == 0
    assert (report["schedule"], report["stages"], report["microbatches"]) == ("1f1b", 2, 4)
    assert report["theory"] == pytest.approx(1 / 5)
    (replica,) = report["replicas"]
    assert [(s["stage"], s["rank"]) for s in replica["stages"]] == [(0, 0), (1, 1)]
    for stage in replica["stages"]:
        # a real step has a bubble: at least the schedule's warm-up/cool-down, split in two
        assert 0 < stage["bubble_ms"] < stage["span_ms"]
        assert stage["compute_ms"] > 0 and stage["warmup_cooldown_ms"] > 0
        assert stage["warmup_cooldown_ms"] + stage["stall_ms"] == pytest.approx(
            stage["bubble_ms"], abs=0.01)
        assert stage["theory"] == pytest.approx(1 / 5)

    code, whatif = run_cli_json(capsys, "whatif", save)
    assert code == 0
    assert (whatif["job"]["dp_size"], whatif["job"]["pp_size"]) == (1, 2)
    assert whatif["steps"] == [3, 4] and whatif["slowdown"] >= 1.0
    assert sorted(entry["name"] for entry in whatif["by_stage"]) == ["0", "1"]
