"""Opt-in tier: the real MindSpeed and MindSpeed-LLM on CPU (gloo, 2 ranks, torch backend).

Needs three checkouts, never vendored here: MINDSPEED_LLM_PATH (MindSpeed-LLM master),
MINDSPEED_PATH (MindSpeed master) and MEGATRON_LM_PATH (Megatron-LM core_v0.12.1), in a Python
environment with megatron-core==0.12.1 and the packages on their import path (README, "The real
MindSpeed tier"). torch_npu, torchair and acl are stubs (tests/harness/real_mindspeed); the stub's
profiler announces itself, so a host profiler starting beside ours shows in the output.
"""

import json
import os
import site
import subprocess
import sys

import pytest

from harness import real_mindspeed
from harness.real_megatron import TINY
from harness.real_mindspeed.npu_stubs import ANNOUNCE
from harness.real_mindspeed.run_script import REPORT_TAG
from helpers.traces import step_ids, torch_traces

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    bool(real_mindspeed.missing()),
    reason=f"{', '.join(real_mindspeed.missing())} not set (point them at MindSpeed-LLM, MindSpeed "
           f"and Megatron-LM core_v0.12.1 checkouts to run the real MindSpeed tier)")]

LAUNCHER = ("-m", "mindspeed_prof.launch")
TRAIN = "megatron.training.training.train"
TRAIN_STEP = "megatron.training.training.train_step"
LLM_TRAIN = "mindspeed_llm.training.training.train"


def llm_script():
    return os.path.join(os.environ["MINDSPEED_LLM_PATH"], "pretrain_gpt.py")


def megatron_script_with_mindspeed(folder, *edits):
    """Megatron-LM's pretrain_gpt.py edited as MindSpeed's README says: its adaptor after torch."""
    return real_mindspeed.script_copy(
        folder, os.path.join(os.environ["MEGATRON_LM_PATH"], "pretrain_gpt.py"),
        ("import torch", "import mindspeed.megatron_adaptor"), *edits)


def run(tmp_path, script, launcher=LAUNCHER, autoload=False, flags=None):
    """Train ``script`` on 2 ranks asking for rank 1 at iterations 3 and 4; the finished run."""
    save = tmp_path / "prof"
    wrapper = real_mindspeed.wrapper(str(tmp_path / "run"), script)
    env = dict(os.environ, PYTHONPATH=real_mindspeed.python_path(str(tmp_path)),
               CUDA_DEVICE_MAX_CONNECTIONS="1", TORCHDYNAMO_DISABLE="1", OMP_NUM_THREADS="1",
               MINDSPEED_PROF_AUTOLOAD="1" if autoload else "0")
    if flags is None:
        flags = ["--profile", "--profile-ranks", "1", "--profile-step-start", "3",
                 "--profile-step-end", "5", "--profile-save-path", str(save),
                 "--profile-backend", "torch"]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
               "2", *launcher, wrapper, *TINY, *flags]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    done.save = save
    return done


def reports(done):
    """Each rank's REAL_TIER_REPORT: MindSpeed's feature list and our wrappers per loop function."""
    lines = [line[line.index(REPORT_TAG) + len(REPORT_TAG):]
             for line in done.stderr.splitlines() if REPORT_TAG in line]
    return [json.loads(line) for line in lines]


def tail(done, size=8000):
    """The run's stderr without the upstream import warnings that bury a rank's error."""
    lines = [line for line in done.stderr.splitlines()
             if "Warning" not in line and "warn" not in line and REPORT_TAG not in line]
    return "\n".join(lines)[-size:]


def assert_profiled_rank_1_at_3_and_4_only(done):
    output = done.stdout + done.stderr
    assert done.returncode == 0, tail(done)
    assert ANNOUNCE not in output, "a host profiler (torch_npu.profiler.profile) started"
    assert "chain was not connected" not in output, tail(done)
    traces = torch_traces(done.save)
    assert [os.path.basename(t).split(".")[0] for t in traces] == ["rank1"], tail(done)
    assert step_ids(traces[0]) == [3, 4]
    check = subprocess.run([sys.executable, "-m", "mindspeed_prof.cli", "check", str(done.save)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout


def assert_our_feature_last_and_loop_wrapped_once(done, loop=(TRAIN, TRAIN_STEP)):
    seen = reports(done)
    assert len(seen) == 2, tail(done)
    for rank in seen:
        assert rank["features"][-1] == "mindspeed_prof", rank["features"][-5:]
        for target in loop:
            ours = [m for m in rank["chains"][target] if m.endswith("_wrapper")]
            assert len(ours) == 1, (target, rank["chains"][target])


def test_mindspeed_llm_pretrain_gpt_through_the_launcher_profiles_rank_1_at_3_and_4(tmp_path):
    done = run(tmp_path, llm_script())
    assert_profiled_rank_1_at_3_and_4_only(done)
    assert_our_feature_last_and_loop_wrapped_once(done, loop=(TRAIN, TRAIN_STEP, LLM_TRAIN))


def _autoload_installed():
    places = site.getsitepackages() + [site.getusersitepackages()]
    return any(os.path.exists(os.path.join(p, "mindspeed_prof_autoload.pth")) for p in places)


@pytest.mark.skipif(not _autoload_installed(),
                    reason="autoload .pth not in this interpreter's site-packages (editable "
                           "install): `pip install .`, or copy mindspeed_prof/autoload/"
                           "mindspeed_prof_autoload.pth into site-packages")
def test_mindspeed_llm_pretrain_gpt_through_autoload_with_plain_torchrun(tmp_path):
    done = run(tmp_path, llm_script(), launcher=(), autoload=True)
    assert_profiled_rank_1_at_3_and_4_only(done)
    assert_our_feature_last_and_loop_wrapped_once(done, loop=(TRAIN, TRAIN_STEP, LLM_TRAIN))


def test_mindspeed_llm_pretrain_gpt_copy_importing_mindspeed_prof_auto(tmp_path):
    copy = real_mindspeed.script_copy(str(tmp_path / "script"), llm_script(),
                                      ("from mindspeed_llm import megatron_adaptor",
                                       "import mindspeed_prof.auto  # profiling hooks"))
    done = run(tmp_path, copy, launcher=())
    assert_profiled_rank_1_at_3_and_4_only(done)
    assert_our_feature_last_and_loop_wrapped_once(done, loop=(TRAIN, TRAIN_STEP, LLM_TRAIN))


def test_megatron_pretrain_gpt_after_mindspeed_megatron_adaptor(tmp_path):
    done = run(tmp_path, megatron_script_with_mindspeed(str(tmp_path / "script")))
    assert_profiled_rank_1_at_3_and_4_only(done)
    assert_our_feature_last_and_loop_wrapped_once(done)
    assert all(LLM_TRAIN not in rank["chains"] for rank in reports(done)), \
        "mindspeed_prof imported MindSpeed-LLM into a plain MindSpeed job"


def test_mindspeed_repatch_after_argument_parsing_keeps_our_wrappers(tmp_path):
    script = megatron_script_with_mindspeed(str(tmp_path / "script"),
                                            ('if __name__ == "__main__":',
                                             real_mindspeed.REPATCH_IN_MODEL_PROVIDER))
    done = run(tmp_path, script)
    assert_profiled_rank_1_at_3_and_4_only(done)
    assert_our_feature_last_and_loop_wrapped_once(done)


def test_the_stub_shows_mindspeed_llm_own_profiler_when_we_are_not_there(tmp_path):
    # The control for "own profiler never started": without mindspeed_prof, --profile starts
    # MindSpeed-LLM's loop profiler on the ranks it names, and the stub says so.
    done = run(tmp_path, llm_script(), launcher=(),
               flags=["--profile", "--profile-ranks", "1", "--profile-step-start", "3",
                      "--profile-step-end", "5", "--profile-save-path",
                      str(tmp_path / "host_prof")])
    assert done.returncode == 0, tail(done)
    assert (done.stdout + done.stderr).count(ANNOUNCE) == 1
