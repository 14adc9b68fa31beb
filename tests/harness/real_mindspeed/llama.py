"""A tiny random LLaMA-shaped model for MindSpeed-LLM's real ``inference.py`` on the CPU.

Two layers, hidden 64, RMSNorm, SwiGLU, RoPE, untied embeddings, no linear biases: the shape of
MindSpeed-LLM's ``examples/mcore/llama2`` scripts. Its checkpoint is written by MindSpeed-LLM's
own ``pretrain_gpt.py --save`` (one iteration on mock data), so ``inference.py --load`` reads what
MindSpeed-LLM writes. The tokenizer is a Hugging Face one built offline with ``tokenizers`` (a
word-level vocabulary of 4096, what Megatron's mock dataset draws token ids from): the
NullTokenizer path of ``inference.py`` fails (``load_tokenizer`` joins ``None`` with a path).
``--no-bias-swiglu-fusion``: MindSpeed's fused SwiGLU calls a torch_npu op the stubs lack.
"""

import json
import os
import subprocess

from harness.launch import launcher, relaunched_while_port_taken

VOCAB = 4096
WORDS = ("how", "are", "you", "?", "hello", "tell", "me", "a", "story", "the", "of", "and")
SPECIAL = ("<unk>", "<s>", "</s>")
POSITIONS = 64  # --max-position-embeddings: a prompt + --max-new-tokens beyond it is refused
NEW_TOKENS = 8


def build_tokenizer(folder):
    """``tokenizer.json`` + ``tokenizer_config.json`` in ``folder`` (AutoTokenizer loads them)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    names = list(SPECIAL) + list(WORDS)
    names += [f"w{i}" for i in range(VOCAB - len(names))]
    tokenizer = Tokenizer(models.WordLevel(vocab={n: i for i, n in enumerate(names)},
                                           unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.decoder = decoders.WordPiece()  # joins words with spaces
    os.makedirs(folder, exist_ok=True)
    tokenizer.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as handle:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
                   "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "</s>",
                   "model_max_length": POSITIONS}, handle)
    return folder


def model_flags(tokenizer, tp=1):
    """The model, as both pretrain_gpt.py and inference.py are told it."""
    return (f"--num-layers 2 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 4 "
            f"--seq-length {POSITIONS} --max-position-embeddings {POSITIONS} "
            f"--position-embedding-type rope --swiglu --normalization RMSNorm "
            f"--untie-embeddings-and-output-weights --disable-bias-linear "
            f"--no-bias-swiglu-fusion --tokenizer-type PretrainedFromHF "
            f"--tokenizer-name-or-path {tokenizer} --make-vocab-size-divisible-by 1 "
            f"--tensor-model-parallel-size {tp} --micro-batch-size 1 --global-batch-size 1 "
            f"--transformer-impl local --use-cpu-initialization --distributed-backend gloo "
            f"--no-persist-layer-norm --no-masked-softmax-fusion --no-bias-dropout-fusion "
            f"--no-gradient-accumulation-fusion --use-mcore-models --ckpt-format torch").split()


def generate_runner(tp=1, port=None):
    """How MindSpeed-LLM's generate scripts (``examples/mcore/*/generate_*.sh``) start
    ``inference.py``: ``-m torch.distributed.launch --nproc_per_node TP ... --master_port P``
    (the script receives ``--local-rank``), as arguments after the interpreter."""
    return tuple(launcher("launch", tp, port)[1:])


def inference_flags(checkpoint, tokenizer, tp=1, tasks=("greedy", "greedy", "greedy")):
    return [*model_flags(tokenizer, tp), "--load", checkpoint, "--no-load-optim",
            "--no-load-rng", "--exit-on-missing-checkpoint", "--max-new-tokens", str(NEW_TOKENS),
            "--task", *tasks]


def save_checkpoint(wrapper, folder, tokenizer, env, tp=1):
    """Run MindSpeed-LLM's pretrain_gpt.py (its ``wrapper``) one iteration with ``--save``."""
    checkpoint = os.path.join(folder, f"checkpoint_tp{tp}")
    flags = [*model_flags(tokenizer, tp), "--train-iters", "1", "--lr", "1e-3", "--mock-data",
             "--eval-iters", "0", "--eval-interval", "1000", "--split", "100,0,0",
             "--save", checkpoint, "--save-interval", "1"]
    # as MindSpeed-LLM's pretrain scripts: torchrun --nnodes --node_rank --master_addr ...
    done = relaunched_while_port_taken(lambda: subprocess.run(
        [*launcher("master", tp), wrapper, *flags], env=env, cwd=folder, capture_output=True,
        text=True, timeout=600))
    if done.returncode != 0 or not os.path.isfile(
            os.path.join(checkpoint, "latest_checkpointed_iteration.txt")):
        raise RuntimeError(f"pretrain_gpt.py --save failed ({done.returncode}):\n"
                           f"{done.stderr[-4000:]}")
    return checkpoint
