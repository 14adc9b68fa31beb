"""Window plans checked against what Megatron knows only at train start, on the stand-in loop."""

import pytest

from harness.launch import default_args
from helpers.e2e import profile_flags, tracebacks_from_training, train
from helpers.traces import step_ids, torch_traces

pytestmark = pytest.mark.e2e


def test_a_window_past_a_train_samples_run_names_train_samples(tmp_path):
    args = default_args()
    at = args.index("--train-iters")
    args[at:at + 2] = ["--train-samples", "16"]  # 4 iterations at global batch size 4
    run = train(tmp_path, args + profile_flags(tmp_path / "prof", ranks=("0",), start=3, end=8),
                nproc=1, with_default_args=False)
    assert run.returncode != 0
    assert ("--profile-step-end 8 needs iterations up to 7, but --train-samples stops training "
            "after iteration 4") in run.stderr, run.stderr[-2000:]
    assert "raise --train-samples" in run.stderr and "--train-iters" not in run.stderr
    assert tracebacks_from_training(run) == []


def test_a_resumed_run_skips_the_profile_steps_windows_already_passed(tmp_path):
    checkpoint = tmp_path / "ckpt"
    first = default_args(train_iters=4) + ["--save", str(checkpoint), "--save-interval", "4"]
    train(tmp_path / "first", first, launcher=(), nproc=1, with_default_args=False).check()
    save = tmp_path / "prof"
    resumed = default_args(train_iters=8) + ["--load", str(checkpoint)] + profile_flags(
        save, ranks=("0",)) + ["--profile-steps", "2-3,6-7"]
    run = train(tmp_path / "second", resumed, nproc=1, with_default_args=False).check()
    assert sorted(p.name for p in save.iterdir() if p.name.startswith("iter_")) == ["iter_6-7"]
    assert step_ids(torch_traces(save / "iter_6-7")[0]) == [6, 7], run.describe()
