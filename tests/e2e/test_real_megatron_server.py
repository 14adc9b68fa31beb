"""Opt-in tier: a real Megatron-LM checkout's tools/run_text_generation_server.py on the CPU
(TP=2, gloo) under torchrun and our launcher, asked four requests over HTTP.

Set MEGATRON_LM_PATH to a checkout whose version matches the installed megatron-core (tag
core_v0.16.1 with megatron-core 0.16.1) and install its extra imports (six, regex, pydantic).
Skipped otherwise: Megatron-LM's tools are not on PyPI and are never vendored here.
"""

import os

import pytest

from harness.inference import launch as server_launch
from harness.real_megatron import overlay
from helpers.e2e import check, verdicts
from helpers.traces import step_ids, torch_traces

CHECKOUT = os.environ.get("MEGATRON_LM_PATH")
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    not CHECKOUT, reason="MEGATRON_LM_PATH is not set (point it at a Megatron-LM checkout "
                         "matching the installed megatron-core to run the real-Megatron tier)")]

REAL_SERVER = server_launch.SERVER_SCRIPT.parent / "real_server.py"
TINY = ("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
        "--max-position-embeddings 64 --micro-batch-size 1 --tokenizer-type NullTokenizer "
        "--vocab-size 4096 --transformer-impl local --use-cpu-initialization "
        "--distributed-backend gloo --tensor-model-parallel-size 2 --no-masked-softmax-fusion "
        "--no-bias-gelu-fusion --no-bias-dropout-fusion --no-gradient-accumulation-fusion "
        "--no-persist-layer-norm --inference-max-seq-length 256").split()


def test_real_text_generation_server_profiles_requests_2_and_3_on_both_ranks(tmp_path):
    overlay.build(CHECKOUT, str(tmp_path / "overlay"))
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "overlay"), CUDA_DEVICE_MAX_CONNECTIONS="1",
               TORCHDYNAMO_DISABLE="1", OMP_NUM_THREADS="1", MINDSPEED_PROF_AUTOLOAD="0",
               HARNESS_REPORT_DIR=str(tmp_path / "reports"))
    save = tmp_path / "prof"
    server = server_launch.start(
        ["--profile", "--profile-ranks", "-1", "--profile-step-start", "2",
         "--profile-step-end", "4", "--profile-save-path", str(save), "--profile-backend", "torch"],
        env=env, cwd=tmp_path, script=REAL_SERVER, model=TINY, ready_timeout=300)
    try:
        answers = [server.put(["1 2 3"], tokens_to_generate=4) for _ in range(4)]
    finally:
        run = server.stop()
    assert run.returncode == 0, run.describe()
    assert all(len(a["tokens"][0]) == 7 for a in answers)
    for rank in (0, 1):
        traces = [t for t in torch_traces(save) if os.path.basename(t).startswith(f"rank{rank}.")]
        assert [os.path.basename(os.path.dirname(t)) for t in traces] == ["req_2-2", "req_3-3"]
        assert [step_ids(t) for t in traces] == [[2], [3]]
    code, report = check(save)
    assert code == 0 and verdicts(report) == {0: "valid", 1: "valid"}
