"""The plain-loop API used the wrong way round: a clear error, and nothing on disk overwritten."""

import functools

import pytest
import torch

from helpers import loop
from helpers.traces import manifest, step_ids, torch_traces
from mindspeed_prof import profile


config = functools.partial(loop.config, profile_step_start=2, profile_step_end=3)


def run(prof, iterations):
    with prof:
        for _ in range(iterations):
            torch.ones(4).sum()
            prof.step()


def test_step_before_entering_the_with_block_says_how_to_use_it(tmp_path):
    prof = profile(config(tmp_path), train_iters=4)
    with pytest.raises(RuntimeError, match=r"profile.step\(\) was called outside its `with` block"):
        prof.step()
    assert not (tmp_path / "prof").exists()


def test_step_after_the_with_block_ended_is_refused(tmp_path):
    prof = profile(config(tmp_path), train_iters=4)
    run(prof, 4)
    with pytest.raises(RuntimeError, match="outside its `with` block"):
        prof.step()


def test_re_entering_a_finished_profile_is_refused_and_keeps_the_first_run(tmp_path):
    prof = profile(config(tmp_path), train_iters=4)
    run(prof, 4)
    first = manifest(tmp_path / "prof", 0)
    traces = torch_traces(tmp_path / "prof")
    with pytest.raises(RuntimeError, match="has already run; create a new mindspeed_prof.profile"):
        run(prof, 4)
    assert manifest(tmp_path / "prof", 0) == first
    assert torch_traces(tmp_path / "prof") == traces and step_ids(traces[0]) == [2]
