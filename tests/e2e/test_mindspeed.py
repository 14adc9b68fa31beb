"""With MindSpeed or MindSpeed-LLM in the process (tests/fakes mirrors of their adaptors, patch
and feature managers, written from their code): flags are shared without conflict, our patches
stack with theirs, their own profilers never start beside ours, MindSpeed-LLM's replacement of
the feature list keeps our feature, its train is wrapped once, and a remove/re-apply cycle
(repatch) does not lose our hooks. tests/e2e/test_real_mindspeed.py runs the same on their real
code when the checkouts are given."""

import json

import pytest

from harness.launch import ENTRY_SCRIPT
from harness.real_mindspeed import REPATCH_IN_MODEL_PROVIDER, script_copy
from helpers.e2e import FAKES, env_for, profile_flags, train
from helpers.traces import step_ids, torch_traces

pytestmark = pytest.mark.e2e

ADAPTORS = {
    # MindSpeed's README: its adaptor right after torch.
    "mindspeed": [("import torch", "import mindspeed.megatron_adaptor  # noqa")],
    # MindSpeed-LLM's pretrain_gpt.py: its package import runs its adaptor.
    "mindspeed-llm": [("import torch", "from mindspeed_llm import megatron_adaptor  # noqa")],
    # A feature re-applying MindSpeed's patches after argument parsing.
    "mindspeed-repatch": [("import torch", "import mindspeed.megatron_adaptor  # noqa"),
                          ('if __name__ == "__main__":', REPATCH_IN_MODEL_PROVIDER)],
}


def events(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run_with(tmp_path, host):
    save, log = tmp_path / "prof", tmp_path / "mindspeed.jsonl"
    script = script_copy(str(tmp_path / "script"), str(ENTRY_SCRIPT), *ADAPTORS[host])
    env = env_for(tmp_path, pythonpath=(FAKES,), FAKE_MINDSPEED_LOG=log)
    # --profile-level comes from MindSpeed's feature, --profile-analyse from ours
    args = profile_flags(save) + ["--profile-level", "level1", "--profile-analyse", "sync"]
    run = train(tmp_path, args, env=env, script=script).check()
    return run, save, events(log)


@pytest.mark.parametrize("host", sorted(ADAPTORS))
def test_profiling_under_mindspeed_uses_one_profiler_and_keeps_our_hooks(tmp_path, host):
    run, save, seen = run_with(tmp_path, host)
    started = [e["event"] for e in seen if e["event"].endswith("own_profiler_started")]
    assert not started, run.describe()
    parse = [e for e in seen if e["event"] == "features_at_parse"]
    assert parse and all(e["names"][-1] == "mindspeed_prof" for e in parse)
    assert [p.split("/")[-1].split(".")[0] for p in torch_traces(save)] == ["rank1"]
    assert step_ids(torch_traces(save)[0]) == [3, 4], run.describe()
    if host == "mindspeed-repatch":
        assert [e for e in seen if e["event"] == "repatched"], run.describe()


def test_mindspeed_llm_train_carries_our_wrapper_once(tmp_path):
    run, _, seen = run_with(tmp_path, "mindspeed-llm")
    calls = [e["wrappers"] for e in seen if e["event"] == "llm_train"]
    assert len(calls) == 2, run.describe()  # one train() per rank
    assert all(len(wrappers) == 1 for wrappers in calls), calls
