"""The capture flags' examples in --help, copied as they are onto the stand-in Megatron job
(gloo, two ranks, on a shared, oversubscribed host): an ordinary run takes no capture, a rank
slowed for good still is one."""

import re

import pytest

from harness.launch import default_args
from helpers.e2e import env_for, train
from helpers.traces import manifest, torch_traces
from mindspeed_prof.config.profiler_config import KNOBS

pytestmark = pytest.mark.e2e


def help_example(knob):
    """The FACTOR a flag's help suggests ('(e.g. 2)')."""
    return re.search(r"\(e\.g\. ([0-9.]+)", KNOBS[knob].metadata["help"])[1]


def straggler_flags(save, iterations):
    return default_args(train_iters=iterations) + [
        "--profile", "--profile-save-path", str(save), "--profile-backend", "torch",
        "--profile-ranks", "all", "--profile-capture-warmup", "5", "--profile-trigger-poll", "2",
        "--profile-max-captures", "5", "--profile-capture-cooldown", "2",
        "--profile-on-straggler", help_example("profile_on_straggler")]


def test_the_straggler_example_of_help_takes_no_capture_of_an_ordinary_two_rank_run(tmp_path):
    save = tmp_path / "prof"
    run = train(tmp_path, straggler_flags(save, 60), timeout=400).check()
    assert torch_traces(save) == [], run.describe()
    for rank in (0, 1):
        captures = manifest(save, rank)["captures"]
        assert captures["taken"] == [], captures
        assert captures["ratios_seen"]["straggler"]["judged"] >= 20


def test_the_straggler_example_of_help_still_captures_a_rank_slowed_for_good(tmp_path):
    save = tmp_path / "prof"
    run = train(tmp_path, straggler_flags(save, 24), timeout=400,
                env=env_for(tmp_path, HARNESS_BUSY_FROM_ITER="8:0.6@1")).check()
    taken = manifest(save, 0)["captures"]["taken"]
    assert taken and taken[0]["rule"] == "straggler" and taken[0]["ranks"] == [0, 1], \
        run.describe()
