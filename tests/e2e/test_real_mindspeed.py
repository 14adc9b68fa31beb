"""Opt-in tier: the real MindSpeed and MindSpeed-LLM on CPU (gloo, 2 ranks, torch backend):
training through every route, and MindSpeed-LLM's inference.py answering requests.

Needs three checkouts, never vendored here: MINDSPEED_LLM_PATH (MindSpeed-LLM master),
MINDSPEED_PATH (MindSpeed master) and MEGATRON_LM_PATH (Megatron-LM core_v0.12.1), in a Python
environment with megatron-core==0.12.1 and the packages on their import path (docs/development.md, "The real
MindSpeed tier"). torch_npu, torchair and acl are stubs (tests/harness/real_mindspeed); the stub's
profiler announces itself, so a host profiler starting beside ours shows in the output.
"""

import json
import os
import subprocess
import sys

import pytest

from harness import real_mindspeed
from harness.launch import launcher as torchrun_launcher
from harness.real_megatron import TINY
from harness.real_mindspeed.npu_stubs import ANNOUNCE
from harness.real_mindspeed import llama
from harness.real_mindspeed.run_script import REPORT_TAG
from helpers.autoload import needs_autoload_pth
from helpers.traces import manifest, step_ids, torch_traces

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


def tier_env(folder, autoload=False):
    return dict(os.environ, PYTHONPATH=real_mindspeed.python_path(str(folder)),
                CUDA_DEVICE_MAX_CONNECTIONS="1", TORCHDYNAMO_DISABLE="1", OMP_NUM_THREADS="1",
                MINDSPEED_PROF_AUTOLOAD="1" if autoload else "0")


def run(tmp_path, script, launcher=LAUNCHER, autoload=False, flags=None):
    """Train ``script`` on 2 ranks asking for rank 1 at iterations 3 and 4; the finished run."""
    save = tmp_path / "prof"
    wrapper = real_mindspeed.wrapper(str(tmp_path / "run"), script)
    env = tier_env(tmp_path, autoload)
    if flags is None:
        flags = ["--profile", "--profile-ranks", "1", "--profile-step-start", "3",
                 "--profile-step-end", "5", "--profile-save-path", str(save),
                 "--profile-backend", "torch"]
    command = [*torchrun_launcher("master", 2),  # Megatron-LM's examples: --master-addr
               *launcher, wrapper, *TINY, *flags]
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
    assert "ran no loop mindspeed_prof hooks" not in output, tail(done)
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


@needs_autoload_pth
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


# -- MindSpeed-LLM's inference.py: requests ------------------------------------------------------
# The tiny LLaMA of harness.real_mindspeed.llama, its checkpoint written by MindSpeed-LLM's own
# pretrain_gpt.py. Window: request 2 (requests 2-3 with TP=2); `--task greedy greedy greedy` runs
# three non-streamed generates, `--task chat` streams each answer from a generator read on stdin.

class TinyLlama:
    def __init__(self, folder):
        self.folder = folder
        self.tokenizer = llama.build_tokenizer(os.path.join(folder, "tokenizer"))
        self._checkpoints = {}

    def checkpoint(self, tp=1):
        if tp not in self._checkpoints:
            wrapper = real_mindspeed.wrapper(os.path.join(self.folder, "run"), llm_script())
            self._checkpoints[tp] = llama.save_checkpoint(wrapper, self.folder, self.tokenizer,
                                                          tier_env(self.folder), tp)
        return self._checkpoints[tp]


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    return TinyLlama(str(tmp_path_factory.mktemp("tiny_llama")))


def infer(tmp_path, model, *, tp=1, tasks=("greedy",) * 3, runner=None, launcher=LAUNCHER,
          autoload=False, script=None, stdin=None, window=(2, 3)):
    """MindSpeed-LLM's inference.py on ``tp`` ranks (TP=tp), every rank asked for ``window``."""
    save = tmp_path / "prof"
    script = script or os.path.join(os.environ["MINDSPEED_LLM_PATH"], "inference.py")
    wrapper = real_mindspeed.wrapper(str(tmp_path / "run"), script)
    # as MindSpeed-LLM's generate scripts start it: torch.distributed.launch --master_port P
    runner = runner or llama.generate_runner(tp)
    flags = [*llama.inference_flags(model.checkpoint(tp), model.tokenizer, tp, tasks),
             "--profile", "--profile-step-start", str(window[0]), "--profile-step-end",
             str(window[1]), "--profile-ranks", "-1", "--profile-save-path", str(save),
             "--profile-backend", "torch"]
    done = subprocess.run([sys.executable, *runner, *launcher, wrapper, *flags],
                          env=tier_env(tmp_path, autoload), cwd=tmp_path, input=stdin,
                          capture_output=True, text=True, timeout=600)
    done.save = save
    return done


def cli(*args):
    return subprocess.run([sys.executable, "-m", "mindspeed_prof.cli", *args],
                          capture_output=True, text=True)


def recorded_requests(save):
    """{rank: [request n of each req_n-n folder holding that rank's trace]}, step ids checked."""
    found = {}
    for trace in torch_traces(save):
        rank = int(os.path.basename(trace).split(".")[0][len("rank"):])
        folder = os.path.basename(os.path.dirname(trace))
        n = int(folder.split("_")[1].split("-")[0])
        assert folder == f"req_{n}-{n}" and step_ids(trace) == [n], trace
        found.setdefault(rank, []).append(n)
    return {rank: sorted(ns) for rank, ns in found.items()}


def assert_profiled_requests(done, expected):
    """Exactly ``expected`` ({rank: [requests]}) recorded, `check` valid, every recorded
    request's forwards labelled: one prefill, then decodes (`summary`'s request lines)."""
    assert done.returncode == 0, tail(done)
    assert ANNOUNCE not in done.stdout + done.stderr, "a host profiler started"
    assert recorded_requests(done.save) == expected, tail(done)
    check = cli("check", str(done.save))
    assert check.returncode == 0, check.stdout
    summary = json.loads(cli("summary", str(done.save), "--json").stdout)
    for rank in summary["ranks"]:
        requests = rank["requests"]
        assert [r["request"] for r in requests] == expected[rank["rank"]]
        for r in requests:
            assert (r["prefill"], r["forwards"]) == (1, 1 + r["decode"]) and r["decode"] >= 1, r


def test_inference_py_through_the_launcher_profiles_request_2_with_its_forwards(tmp_path,
                                                                                tiny_llama):
    done = infer(tmp_path, tiny_llama)
    assert_profiled_requests(done, {0: [2]})
    data = manifest(done.save, 0)
    assert (data["unit"], data["requests_served"], data["exit"]["reason"]) == (
        "request", 3, "finished")
    for name, variable in (("mindspeed", "MINDSPEED_PATH"), ("mindspeed_llm",
                                                             "MINDSPEED_LLM_PATH")):
        tree = os.path.abspath(os.environ[variable])
        assert data["versions"][name].endswith(f" (source tree {tree})"), data["versions"]


@needs_autoload_pth
def test_inference_py_through_autoload_with_plain_torchrun(tmp_path, tiny_llama):
    done = infer(tmp_path, tiny_llama, launcher=(), autoload=True)
    assert_profiled_requests(done, {0: [2]})


def test_inference_py_copy_importing_mindspeed_prof_auto(tmp_path, tiny_llama):
    copy = real_mindspeed.script_copy(
        str(tmp_path / "script"), os.path.join(os.environ["MINDSPEED_LLM_PATH"], "inference.py"),
        ("from mindspeed_llm import megatron_adaptor", "import mindspeed_prof.auto"))
    done = infer(tmp_path, tiny_llama, launcher=(), script=copy)
    assert_profiled_requests(done, {0: [2]})


def test_chat_through_torch_distributed_launch_records_the_streamed_tokens_of_request_2(
        tmp_path, tiny_llama):
    # What adapt-script writes for chat_*.sh: python -m torch.distributed.launch ... -m
    # mindspeed_prof.launch inference.py ... --task chat. Each answer is a generator the chat
    # loop iterates: the request spans it, so its forwards and matmuls are in req_2-2.
    done = infer(tmp_path, tiny_llama, tasks=("chat",), runner=llama.generate_runner(1),
                 stdin="hello\nhow are you ?\ntell me a story\nq\n")
    assert_profiled_requests(done, {0: [2]})
    (trace,) = torch_traces(done.save)
    with open(trace) as handle:
        names = [e.get("name") for e in json.load(handle)["traceEvents"]]
    assert names.count("aten::mm") >= 2 * llama.NEW_TOKENS, "the tokens were not computed inside"


def test_tensor_parallel_inference_py_profiles_requests_2_and_3_on_both_ranks(tmp_path,
                                                                              tiny_llama):
    done = infer(tmp_path, tiny_llama, tp=2, tasks=("greedy",) * 4, window=(2, 4))
    assert_profiled_requests(done, {0: [2, 3], 1: [2, 3]})


def test_a_chat_prompt_beyond_the_position_limit_cuts_its_request(tmp_path, tiny_llama):
    # Request 2's prompt + --max-new-tokens exceed --max-position-embeddings: MindSpeed-LLM's
    # generation raises ValueError as the chat loop starts reading the answer.
    too_long = " ".join(["the"] * llama.POSITIONS)
    done = infer(tmp_path, tiny_llama, tasks=("chat",), stdin=f"hello\n{too_long}\nq\n")
    assert done.returncode != 0 and "ValueError: Length of prompt" in done.stderr, tail(done)
    data = manifest(done.save, 0)
    assert data["status"] == "cut" and data["exit"]["reason"] == "exception", data
    assert "the inference process stopped (exception) after request 2" in done.stderr
    assert "the server" not in done.stderr
    check = cli("check", str(done.save), "--json")
    assert check.returncode == 1, check.stdout
    assert [r["verdict"] for r in json.loads(check.stdout)["ranks"]] == ["cut"]
