"""The training computes exactly the same thing with or without mindspeed_prof.

One deterministic 2-rank job, three times: without the extension, under the launcher with
profiling off, and profiling every rank for nearly every iteration (with memory and shapes
recorded). Per-iteration losses are bit-identical. After training, the entry script reports
whether Megatron's functions are still the original objects: with profiling off nothing was
installed; with profiling on the same probe sees our wrappers (so it can tell).
"""

import json

import pytest

from harness.launch import ENTRY_SCRIPT
from helpers.e2e import profile_flags, train
from helpers.traces import step_ids, torch_traces

pytestmark = pytest.mark.e2e

# Appended to a copy of the entry script: runs on every rank once pretrain() has returned.
PROBE = '''
import json as _json, os as _os, signal as _signal
import megatron.training.arguments as _arguments
import megatron.training.initialize as _initialize
import megatron.training.training as _training


def _is_original(func):
    code = getattr(func, "__code__", None)
    return (not hasattr(func, "__wrapped__") and not hasattr(func, "_mindspeed_prof_patch")
            and code is not None and "megatron_standin" in code.co_filename)


_probe = {f"{module.__name__}.{name}": _is_original(getattr(module, name))
          for module in (_training, _arguments, _initialize)
          for name in ("train", "train_step", "parse_args", "validate_args")
          if hasattr(module, name)}
_probe["SIGTERM handler is not ours"] = "mindspeed_prof" not in getattr(
    _signal.getsignal(_signal.SIGTERM), "__name__", "")
with open(_os.path.join(_os.environ["HARNESS_REPORT_DIR"], f"probe{_os.environ['RANK']}.json"),
          "w") as _handle:
    _json.dump(_probe, _handle)
'''


@pytest.fixture(scope="module")
def probed_script(tmp_path_factory):
    script = tmp_path_factory.mktemp("script") / "pretrain_gpt_probed.py"
    script.write_text(ENTRY_SCRIPT.read_text() + PROBE)
    return script


def run_and_probe(tmp_path, script, args=(), launcher=None):
    kwargs = {} if launcher is None else {"launcher": launcher}
    run = train(tmp_path, list(args), script=script, **kwargs).check()
    probes = [json.loads((tmp_path / "reports" / f"probe{rank}.json").read_text())
              for rank in (0, 1)]
    return run, probes


def test_losses_are_bit_identical_without_the_extension_with_it_off_and_while_profiling(
        tmp_path, probed_script):
    plain, plain_probes = run_and_probe(tmp_path / "plain", probed_script, launcher=())
    off, off_probes = run_and_probe(tmp_path / "off", probed_script)
    save = tmp_path / "on" / "prof"
    on, on_probes = run_and_probe(tmp_path / "on", probed_script, profile_flags(
        save, ("-1",), 2, 7, "--profile-with-memory", "--profile-record-shapes"))

    losses = plain.losses(0)
    assert sorted(losses) == [1, 2, 3, 4, 5, 6]
    for run in (plain, off, on):
        for rank in (0, 1):
            assert run.losses(rank) == losses  # == on floats: bit for bit
    # the profiled run did profile, every rank, iterations 2-6
    assert sorted(step_ids(trace) == [2, 3, 4, 5, 6] for trace in torch_traces(save)) == [True] * 2

    # nothing of ours is installed unless profiling is on, and the probe can tell the difference
    for probe in plain_probes + off_probes:
        assert all(probe.values()), probe
    for probe in on_probes:
        assert not probe["megatron.training.training.train"]
        assert not probe["megatron.training.training.train_step"]
        assert not probe["SIGTERM handler is not ours"]
