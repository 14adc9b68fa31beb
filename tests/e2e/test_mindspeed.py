"""With MindSpeed in the process (a mirror of its adaptor, patch manager and profile feature):
flags are shared without conflict, our patches stack with MindSpeed's, MindSpeed's own profiler
never starts beside ours, and MindSpeed-LLM's remove-and-reapply does not lose our hooks."""

import json

import pytest

from harness.launch import ENTRY_SCRIPT
from helpers.e2e import FAKES, env_for, profile_flags, train
from helpers.traces import step_ids, torch_traces

pytestmark = pytest.mark.e2e


def mindspeed_script(tmp_path):
    """The entry script as MindSpeed's README says to edit it: its adaptor right after torch."""
    lines = ENTRY_SCRIPT.read_text().splitlines(keepends=True)
    at = lines.index("import torch\n") + 1
    script = tmp_path / "pretrain_gpt_mindspeed.py"
    script.write_text("".join(lines[:at] + ["import mindspeed.megatron_adaptor  # noqa\n"]
                              + lines[at:]))
    return script


def events(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("repatch", ["0", "1"], ids=["mindspeed", "mindspeed-llm-repatch"])
def test_profiling_under_mindspeed_uses_one_profiler_and_keeps_our_hooks(tmp_path, repatch):
    save, log = tmp_path / "prof", tmp_path / "mindspeed.jsonl"
    env = env_for(tmp_path, pythonpath=(FAKES,), FAKE_MINDSPEED_LOG=log,
                  FAKE_MINDSPEED_REPATCH=repatch)
    # --profile-level comes from MindSpeed's feature, --profile-analyse from ours
    args = profile_flags(save) + ["--profile-level", "level1", "--profile-analyse", "sync"]
    run = train(tmp_path, args, env=env, script=mindspeed_script(tmp_path)).check()
    seen = events(log)
    assert not [e for e in seen if e["event"] == "own_profiler_started"], run.describe()
    parse = [e for e in seen if e["event"] == "features_at_parse"]
    assert parse and all(e["names"][-1] == "mindspeed_prof" for e in parse)
    assert step_ids(torch_traces(save)[0]) == [3, 4]
    assert [p.split("/")[-1].split(".")[0] for p in torch_traces(save)] == ["rank1"]
