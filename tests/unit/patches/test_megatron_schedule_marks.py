"""The schedule patches' marks, through a real training driver: named as schedule_marks says,
only inside the window, on the device stream with torch_npu's double, and nothing at all
(not one call to the driver) while no window records."""

import glob
import json
import os
import sys

import torch

from helpers.npu import fake_npu  # noqa: F401  (fixture)
from mindspeed_prof import ProfilerConfig, profile
from mindspeed_prof.config import schedule_marks as sm
from mindspeed_prof.drivers.base import NULL_DRIVER
from mindspeed_prof.patches import megatron_schedule_1f1b as family
from mindspeed_prof.patches import megatron_schedule_marks as marks
from mindspeed_prof.patches.state import state

MODEL = torch.nn.Linear(8, 8)


def forward_step(*_, **kwargs):
    output = MODEL(torch.randn(2, 8)).sum()
    return output, 2


def backward_step(input_tensor, output_tensor, output_tensor_grad, model_type, config):
    output_tensor.backward()


MARKED_FORWARD = marks.mindspeed_prof_forward_step_wrapper(forward_step)
MARKED_BACKWARD = marks.mindspeed_prof_backward_step_wrapper(backward_step)
MARKED_SEND = marks._p2p_wrapper("send_forward")(lambda *a, **k: None)


def schedule(*, model, num_microbatches, forward_only=False, **_):
    """What a 1F1B schedule does with its pieces, reduced to one stage: every forward's output
    object goes to its own backward, the backwards in the forwards' order."""
    outputs = []
    for _ in range(num_microbatches):
        output, _tokens = MARKED_FORWARD(None, None, model, vp_stage=None)
        MARKED_SEND(output)
        outputs.append(output)
    for output in [] if forward_only else outputs:
        MARKED_BACKWARD(None, output, None, None, None)
    return {}


MARKED_SCHEDULE = family.WRAPPER(schedule)


def train(tmp_path, monkeypatch, **config):
    cfg = ProfilerConfig(profile=True, profile_step_start=3, profile_step_end=5,
                         profile_save_path=str(tmp_path / "prof"), **config)
    with profile(cfg, train_iters=6, rank=0, world_size=1) as prof:
        monkeypatch.setattr(state, "manager", prof.manager)
        for _ in range(6):
            MARKED_SCHEDULE(model=[MODEL], num_microbatches=3, forward_only=False)
            prof.step()
    monkeypatch.setattr(state, "manager", NULL_DRIVER)


def test_each_microbatch_is_marked_inside_the_window_and_nowhere_else(tmp_path, monkeypatch):
    train(tmp_path, monkeypatch, profile_backend="torch")
    (trace,) = glob.glob(str(tmp_path / "prof" / "*.pt.trace.json"))
    with open(trace) as handle:
        names = [e["name"] for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]
    found = [sm.parse(n) for n in names if sm.parse(n) is not None]
    outer = [m for m in found if m.timer == sm.FORWARD_BACKWARD]
    assert len(outer) == 2  # steps 3 and 4: the window
    # this module's schedule is not Megatron's own: marked as one that replaced it
    assert (outer[0].schedule, outer[0].chunks, outer[0].microbatches) == (sm.REPLACED, 1, 3)
    for timer in sm.COMPUTE:
        assert sorted(m.mb for m in found if m.timer == timer) == [0, 0, 1, 1, 2, 2]
        assert {m.chunk for m in found if m.timer == timer} == {0}
    assert sum(m.timer == sm.FORWARD_SEND for m in found) == 6


def test_outside_a_window_the_pieces_never_ask_the_driver_for_a_mark(monkeypatch):
    calls = []

    class Counting:  # a driver that records nothing, counting what is asked of it
        recording = False

        def mark(self, name):
            calls.append(name)
            return NULL_DRIVER.mark(name)

    monkeypatch.setattr(state, "manager", Counting())
    MARKED_SCHEDULE(model=[MODEL], num_microbatches=2)
    assert calls == []


def test_an_evaluation_s_forward_only_schedule_is_not_marked(tmp_path, monkeypatch):
    cfg = ProfilerConfig(profile=True, profile_step_start=1, profile_step_end=2,
                         profile_save_path=str(tmp_path / "prof"), profile_backend="torch")
    with profile(cfg, train_iters=2, rank=0, world_size=1) as prof:
        monkeypatch.setattr(state, "manager", prof.manager)
        with torch.no_grad():
            MARKED_SCHEDULE(model=[MODEL], num_microbatches=2, forward_only=True)
        prof.step()
    monkeypatch.setattr(state, "manager", NULL_DRIVER)
    (trace,) = glob.glob(str(tmp_path / "prof" / "*.pt.trace.json"))
    with open(trace) as handle:
        names = [e.get("name") for e in json.load(handle)["traceEvents"]]
    assert not any(sm.parse(n) for n in names if isinstance(n, str))


def test_on_npu_with_mstx_the_marks_are_ranges_on_the_device_stream(tmp_path, monkeypatch,
                                                                   fake_npu):  # noqa: F811
    train(tmp_path, monkeypatch, profile_backend="npu", profile_analyse="sync",
          profile_level="level_none", profile_mstx=True, profile_with_cpu=False)
    on_stream = [m for m, _stream, _device in sys.modules["torch_npu._C._mstx"].ON_STREAM]
    parsed = [sm.parse(m) for m in on_stream]
    # 3 microbatches x 3 steps: the window's session starts with its warm-up step 2 (torch_npu
    # collects from step 3 on)
    assert sum(m.timer == sm.FORWARD_COMPUTE for m in parsed) == 9
    assert sum(m.timer == sm.BACKWARD_COMPUTE for m in parsed) == 9
    # only compute goes on the device stream: msprof-analyze's pp_chart takes every device
    # range whose name says forward or backward for a microbatch
    assert {m.timer for m in parsed} == set(sm.COMPUTE)
    host = [c[1] for c in sys.modules["torch_npu._C._mstx"].CALLS if c[0] == "range_start"]
    assert sum(m.startswith("forward-backward ") for m in host) == 3
    (capture,) = glob.glob(str(tmp_path / "prof" / "rank0_*_ascend_pt"))
    with open(os.path.join(capture, "ASCEND_PROFILER_OUTPUT", "trace_view.json")) as handle:
        names = {e["name"] for e in json.load(handle) if e.get("ph") == "X"}
    assert "forward-compute stage=0 chunk=0 mb=2" in names


def test_megatron_s_own_schedules_are_named_by_family_and_a_replacement_is_not():
    from megatron.core.pipeline_parallel import schedules

    assert marks.family_of(sm.ONE_F_ONE_B,
                           schedules.forward_backward_pipelining_without_interleaving) == "1f1b"
    assert marks.family_of(sm.INTERLEAVED,
                           schedules.forward_backward_pipelining_with_interleaving) == "interleaved"
    assert marks.family_of(sm.ONE_F_ONE_B, schedule) == sm.REPLACED  # e.g. MindSpeed's DualPipeV


def test_every_piece_the_marks_wrap_is_in_the_installed_megatron_core():
    # A target the installed megatron-core lacks is skipped without a word when the patches are
    # applied (a host without that module), so a release that moved one would lose its marks
    # silently: both CI legs (0.16 and 0.19) hold every piece to its place here.
    import importlib

    from mindspeed_prof.patches.megatron_schedules import FAMILIES

    targets = [target for target, _ in marks.shared_targets()]
    expected = [marks.FORWARD_STEP, marks.BACKWARD_STEP,
                *(f"{marks.P2P}.P2PCommunicator.{method}" for method in marks.P2P_CALLS),
                f"{marks.DDP}.finish_grad_sync", f"{marks.DDP}.start_param_sync"]
    assert [t for t in expected if t not in targets] == []
    assert any(t.startswith(f"{marks.OPTIMIZERS}.") and t.endswith(".step") for t in targets)
    for family in FAMILIES:
        module, name = family.TARGET.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), name, None)), family.TARGET
