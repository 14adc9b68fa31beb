"""Test side: run ``run_train_rl.py`` (Megatron-LM's ``train_rl.py``) under torchrun and read
back what it left: stdout/stderr, the per-iteration training log, Megatron-RL's own rollout
records (``LANGRL_LOG_DIR``) and the inference processes' pids (``processes.py``).

Megatron-RL binds fixed ports (the front ends 0.0.0.0:8294, the coordinator 41521): one run at a
time per machine, serialised through a lock file, and a port someone else holds is named.
"""

import contextlib
import dataclasses
import fcntl
import glob
import json
import os
import re
import time

from harness.dynamic.launch import job_env, port_open, torchrun
from harness.launch import free_port, relaunched_while_port_taken, run_to_end
from harness.real_megatron import overlay

HERE = os.path.dirname(os.path.abspath(__file__))
PORTS = (8294, 41521)  # megatron/rl: rl_utils.get_inference_interface, inference/megatron.py
LOCK = os.path.join("/tmp", "mindspeed_prof-megatron-rl-ports.lock")
TIMEOUT_S = 600

# The tiny model (harness.dynamic.tiny_gpt's shape) in bf16, one rank, 4 GRPO iterations of
# 2 prompts x 2 rollouts (one global batch of 4 per collection), generating to seq-length 20.
TINY_RL = (
    "--num-layers", "2", "--hidden-size", "64", "--ffn-hidden-size", "128",
    "--num-attention-heads", "4", "--group-query-attention", "--num-query-groups", "2",
    "--seq-length", "20", "--max-position-embeddings", "64", "--position-embedding-type", "rope",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", "127", "--null-tokenizer-pad-id", "0",
    "--transformer-impl", "local", "--use-cpu-initialization",
    "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion", "--no-bias-gelu-fusion",
    "--no-bias-dropout-fusion", "--no-rope-fusion", "--no-persist-layer-norm",
    "--attention-dropout", "0.0", "--hidden-dropout", "0.0", "--init-method-std", "0.5",
    "--distributed-backend", "gloo", "--seed", "1234", "--bf16",
    "--micro-batch-size", "1", "--global-batch-size", "4", "--train-iters", "4", "--lr", "1e-4",
    "--lr-warmup-iters", "0", "--log-interval", "1", "--eval-iters", "0",
    "--eval-interval", "1000",
    "--perform-rl-step", "--langrl-env-config", os.path.join(HERE, "env_config.yaml"),
    "--grpo-prompts-per-step", "2", "--grpo-group-size", "2", "--grpo-iterations", "1",
    "--grpo-kl-beta", "0.0", "--inference-max-seq-length", "20", "--inference-max-requests", "8",
    "--inference-dynamic-batching-buffer-size-gb", "0.01",
    "--inference-dynamic-batching-block-size", "16",
    "--inference-dynamic-batching-max-tokens", "256",
    "--inference-dynamic-batching-max-requests", "8",
)
ITERATION = re.compile(r"iteration +(\d+)/ +\d+ \|(.*)$", re.M)
LOGGED = ("lm loss", "grad norm", "rl/entropy_term", "rl/pi_over_pi_old")


@dataclasses.dataclass
class RLRun:
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    report_dir: str

    def iterations(self):
        """{iteration: {name: value as logged}} from Megatron's training log lines."""
        found = {}
        for match in ITERATION.finditer(self.stdout):
            fields = dict(part.strip().split(": ", 1) for part in match.group(2).split("|")
                          if ": " in part)
            found[int(match.group(1))] = {k: fields[k] for k in LOGGED if k in fields}
        return found

    def rollouts(self):
        """Megatron-RL's own record of each collection: {collection: [[(reward, tokens)]]}."""
        found = {}
        for path in glob.glob(os.path.join(self.report_dir, "langrl", "rollouts_rank0_*.json")):
            index = int(re.search(r"_iteration(\d+)_", os.path.basename(path)).group(1))
            with open(path) as handle:
                found[index] = [[(r["reward"], r["trajectory"]) for r in group]
                                for group in json.load(handle)]
        return found

    def processes(self):
        with open(os.path.join(self.report_dir, "rl_processes_rank0.json")) as handle:
            return json.load(handle)


@contextlib.contextmanager
def ports_lock():
    with open(LOCK, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        busy = [port for port in PORTS if port_open(port)]
        if busy:
            raise RuntimeError(f"Megatron-RL binds fixed ports and {busy} is already in use on "
                               f"this machine: stop whatever listens there (ss -ltnp)")
        yield


def run_train_rl(work_dir, extra=(), launcher_prefix=()):
    """One ``train_rl.py`` job, 1 rank; ``launcher_prefix`` e.g. ``("-m",
    "mindspeed_prof.launch")``, ``extra`` more flags (``--profile*``)."""
    checkout = os.environ["MEGATRON_LM_PATH"]
    work_dir = str(work_dir)
    layer = os.path.join(work_dir, "overlay")
    if not os.path.isdir(layer):
        overlay.build(checkout, layer)
    report = os.path.join(work_dir, "report")
    os.makedirs(os.path.join(report, "langrl"), exist_ok=True)
    env = job_env(report, pythonpath=(layer,), LANGRL_LOG_DIR=os.path.join(report, "langrl"),
                  CUDA_DEVICE_MAX_CONNECTIONS=1, MINDSPEED_PROF_AUTOLOAD=0)
    script = os.path.join(HERE, "run_train_rl.py")

    def run_once():  # torchrun --nnodes 1 --node-rank 0 --master-addr 127.0.0.1 --master-port P
        command = [*torchrun(script, 1, launcher_prefix, free_port()), *TINY_RL, *extra]
        started = time.monotonic()
        # a rank that raised leaves the front ends' threads alive: it never ends by itself
        job = run_to_end(command, env, work_dir, TIMEOUT_S)
        stdout, stderr = job.stdout, job.stderr
        wall = time.monotonic() - started
        for _ in range(50):  # the front ends and the coordinator release the ports
            if not any(port_open(port) for port in PORTS):
                break
            time.sleep(0.1)
        return RLRun(job.returncode, stdout, stderr, round(wall, 1), report)

    with ports_lock():
        return relaunched_while_port_taken(run_once)
