"""Launch stand-in Megatron trainings from tests and collect what each rank reported.

Every run is a fresh ``torchrun --standalone`` subprocess: Megatron's global state and the CPU
shim are per process, so one training per process is the only safe shape.
"""

import dataclasses
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HARNESS_DIR = pathlib.Path(__file__).resolve().parent
STANDIN_DIR = HARNESS_DIR / "megatron_standin"
ENTRY_SCRIPT = HARNESS_DIR / "pretrain_gpt.py"
LAUNCH_SCRIPT = HARNESS_DIR / "pretrain_gpt.sh"

# Knobs that must not leak from the calling environment into a run.
_HARNESS_ENV_PREFIXES = ("HARNESS_", "MEGATRON_STANDIN_VERSION")


def standin_default_version():
    """The Megatron-LM version a run emulates when MEGATRON_STANDIN_VERSION is not given
    (harness_env never passes the caller's on)."""
    from .standin_versions import default_version
    return default_version()


def default_args(train_iters=6, tp=1, pp=1, micro_batch_size=1, global_batch_size=4, seq_length=32):
    """The tiny GPT every harness run trains, as Megatron command-line arguments."""
    args = {
        "--num-layers": 2,
        "--hidden-size": 64,
        "--num-attention-heads": 4,
        "--seq-length": seq_length,
        "--max-position-embeddings": seq_length,
        "--micro-batch-size": micro_batch_size,
        "--global-batch-size": global_batch_size,
        "--train-iters": train_iters,
        "--lr": 1.0e-3,
        "--lr-decay-style": "constant",
        "--hidden-dropout": 0,
        "--attention-dropout": 0,
        "--tensor-model-parallel-size": tp,
        "--pipeline-model-parallel-size": pp,
        "--transformer-impl": "local",
        "--distributed-backend": "gloo",
        "--vocab-size": 128,
        "--tokenizer-type": "NullTokenizer",
        "--log-interval": 1,
        "--eval-iters": 0,
    }
    flags = [
        "--mock-data",
        "--use-cpu-initialization",
        "--no-masked-softmax-fusion",
        "--no-bias-gelu-fusion",
        "--no-bias-dropout-fusion",
        "--no-gradient-accumulation-fusion",
        "--no-persist-layer-norm",
    ]
    return [str(item) for pair in args.items() for item in pair] + flags


def harness_env(tmp_path, *, pythonpath=(), **overrides):
    """Environment for a run whose reports land in ``tmp_path/reports``.

    ``pythonpath`` entries go after the stand-in. ``overrides`` set variables (``None``
    removes one), e.g. ``MEGATRON_STANDIN_VERSION="0.12.3"`` or ``HARNESS_RAISE_AT_ITER=2``.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(_HARNESS_ENV_PREFIXES)}
    inherited = [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []
    env.update(
        PYTHONPATH=os.pathsep.join([str(STANDIN_DIR), *map(str, pythonpath), *inherited]),
        # torchrun and bash must find this interpreter's environment even when not activated.
        PATH=os.pathsep.join([str(pathlib.Path(sys.executable).parent), env.get("PATH", "")]),
        HARNESS_REPORT_DIR=str(pathlib.Path(tmp_path) / "reports"),
        MEGATRON_PATH=str(HARNESS_DIR),
        TORCHDYNAMO_DISABLE="1",
        CUDA_DEVICE_MAX_CONNECTIONS="1",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        # The harness is plain Megatron: an installed mindspeed_prof autoload hook would take
        # over every --profile run. Tests of the extension pick their activation route.
        MINDSPEED_PROF_AUTOLOAD="0",
    )
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


@dataclasses.dataclass
class TrainingRun:
    """A finished (or timed-out) launch and the per-rank reports it left."""

    command: list
    returncode: int  # None when the run was killed for exceeding its timeout
    stdout: str
    stderr: str
    reports: dict  # global rank -> parsed rank{R}.json
    duration_s: float
    timed_out: bool = False

    def report(self, rank=0):
        if rank not in self.reports:
            raise AssertionError(f"rank {rank} wrote no report\n{self.describe()}")
        return self.reports[rank]

    def losses(self, rank=0):
        """Logged iteration -> lm loss, as that rank saw it."""
        return {int(k): v for k, v in self.report(rank)["losses"].items()}

    def describe(self, tail=3000):
        """Command, exit status and output tails, for assertion messages."""
        return (f"command: {' '.join(self.command)}\n"
                f"returncode: {self.returncode} timed_out: {self.timed_out}\n"
                f"--- stdout (tail) ---\n{self.stdout[-tail:]}\n"
                f"--- stderr (tail) ---\n{self.stderr[-tail:]}")

    def check(self):
        """Raise with the output tails unless the run exited 0."""
        if self.returncode != 0:
            raise AssertionError(f"training run failed\n{self.describe()}")
        return self


def _read_reports(report_dir):
    reports = {}
    for path in pathlib.Path(report_dir).glob("rank*.json"):
        reports[int(path.stem.removeprefix("rank"))] = json.loads(path.read_text())
    return reports


def _clear_reports(report_dir):
    # A crashed rank must show up as missing, not as last run's report.
    for path in pathlib.Path(report_dir).glob("rank*.json"):
        path.unlink()


def _all_ranks_reached(report_dir, nproc, iteration):
    try:
        reports = _read_reports(report_dir)
    except (OSError, ValueError):  # a report being replaced right now
        return False
    return len(reports) >= nproc and all(
        iteration in report.get("train_step_iterations", []) for report in reports.values())


def _signal_job_when(process, report_dir, nproc, signal_job, deadline):
    """Send ``signum`` to the job's whole process group (what a terminal's Ctrl-C, ``timeout``
    or a container stop does) once every rank has begun logged iteration ``iteration``."""
    signum, iteration = signal_job
    while time.monotonic() < deadline and process.poll() is None:
        if _all_ranks_reached(report_dir, nproc, iteration):
            time.sleep(0.5)  # well inside the iteration (the test makes it sleep)
            os.killpg(process.pid, signum)
            return
        time.sleep(0.1)


def _run(command, env, cwd, timeout, signal_job=None, nproc=1):
    report_dir = env.get("HARNESS_REPORT_DIR")
    if report_dir:
        _clear_reports(report_dir)
    start = time.monotonic()
    # A session of its own, so a timeout can take torchrun's workers down with it.
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    timed_out = False
    if signal_job is not None:
        # torchrun sends each worker's process group (the rank and its DataLoader workers)
        # the signal it received, as SLURM's scancel reaches every process of the job.
        watcher = threading.Thread(target=_signal_job_when, daemon=True, args=(
            process, report_dir, nproc, signal_job, start + timeout))
        watcher.start()
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
    return TrainingRun(
        command=[str(part) for part in command],
        returncode=None if timed_out else process.returncode,
        stdout=stdout,
        stderr=stderr,
        reports=_read_reports(report_dir) if report_dir else {},
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
    )


def run_training(
    args=(),
    *,
    tmp_path=None,
    nproc=2,
    env=None,
    cwd=None,
    timeout=240,
    launcher_prefix=(),
    script=ENTRY_SCRIPT,
    with_default_args=True,
    signal_job=None,
):
    """``torchrun --standalone --nproc-per-node N [prefix] pretrain_gpt.py <tiny args> <args>``.

    Later flags win in argparse, so ``args`` may override the defaults. ``launcher_prefix``
    goes between torchrun's options and the script, e.g. ``["-m", "mindspeed_prof.launch"]``.
    Give ``env`` (see :func:`harness_env`) or ``tmp_path`` to get one built. ``signal_job=
    (signal.SIGTERM, N)`` sends that signal to the whole job's process group once every rank has
    begun logged iteration N (pair it with ``HARNESS_SLEEP_AT_ITER=N:S``).
    """
    if env is None:
        if tmp_path is None:
            raise ValueError("run_training needs env= or tmp_path= to know where reports go")
        env = harness_env(tmp_path)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(nproc),
        *launcher_prefix,
        str(script),
        *(default_args() if with_default_args else []),
        *map(str, args),
    ]
    return _run(command, env, cwd or tmp_path, timeout, signal_job, nproc)


def run_script(script_path=LAUNCH_SCRIPT, args=(), *, tmp_path=None, nproc=2, env=None, cwd=None,
               timeout=240):
    """``bash script_path <args>`` with ``NPROC`` set, for launch scripts shaped like ours."""
    if env is None:
        if tmp_path is None:
            raise ValueError("run_script needs env= or tmp_path= to know where reports go")
        env = harness_env(tmp_path)
    env = {**env, "NPROC": str(nproc)}
    return _run(["bash", str(script_path), *map(str, args)], env, cwd or tmp_path, timeout)


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_nodes(args=(), *, tmp_path=None, nnodes=2, nproc=2, env=None, cwd=None, timeout=240,
              launcher_prefix=(), script=ENTRY_SCRIPT):
    """A multi-node job on this machine: ``nnodes`` torchrun agents, ``nproc`` workers each,
    joined by c10d rendezvous on 127.0.0.1 (global ranks, ``GROUP_RANK``, ``LOCAL_RANK`` as on
    separate nodes). One ``TrainingRun``: the first non-zero agent status, outputs in agent order.
    """
    if env is None:
        if tmp_path is None:
            raise ValueError("run_nodes needs env= or tmp_path= to know where reports go")
        env = harness_env(tmp_path)
    cwd = cwd or tmp_path
    port = _free_port()
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nnodes),
               "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
               "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", f"harness-{port}",
               *launcher_prefix, str(script), *default_args(), *map(str, args)]
    report_dir = env.get("HARNESS_REPORT_DIR")
    if report_dir:
        _clear_reports(report_dir)
    start, agents = time.monotonic(), []
    for _ in range(nnodes):
        out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        agents.append((subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=err,
                                        text=True, start_new_session=True), out, err))
    timed_out, codes = False, []
    for process, _, _ in agents:
        try:
            codes.append(process.wait(timeout=max(1.0, timeout - (time.monotonic() - start))))
        except subprocess.TimeoutExpired:
            timed_out = True
            for other, _, _ in agents:
                if other.poll() is None:
                    os.killpg(other.pid, signal.SIGKILL)
                    other.wait()
            break
    outputs = []
    for _, out, err in agents:
        out.seek(0)
        err.seek(0)
        outputs.append((out.read(), err.read()))
        out.close()
        err.close()
    return TrainingRun(
        command=[str(part) for part in command],
        returncode=None if timed_out else next((code for code in codes if code), 0),
        stdout="".join(o for o, _ in outputs),
        stderr="".join(e for _, e in outputs),
        reports=_read_reports(report_dir) if report_dir else {},
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
    )
