"""Window plans checked against what Megatron knows only at train start, on the stand-in loop."""

import pytest

from harness.launch import default_args
from helpers.e2e import profile_flags, tracebacks_from_training, train

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
