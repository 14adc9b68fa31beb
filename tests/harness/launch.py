"""Launch stand-in Megatron trainings from tests and collect what each rank reported.

Every run is a fresh torchrun subprocess: Megatron's global state and the CPU shim are per
process, so one training per process is the only safe shape. Runs launch as users do
(``LAUNCH_FORMS``): by default Megatron-LM's own examples' form, ``torchrun --nnodes 1
--node-rank 0 --master-addr 127.0.0.1 --master-port P`` (no ``--standalone``: torchrun hands
its workers no run id), on a free port picked afresh, and again when another process took it
first. The other harnesses (the servers, the RL jobs, the real tiers) build their commands with
:func:`launcher` and relaunch through :func:`relaunched_while_port_taken` as well.
"""

import dataclasses
import json
import os
import pathlib
import random
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

# How a job is started: "master", Megatron-LM's examples (``torchrun --nnodes N --node-rank R
# --master-addr A --master-port P``; MindSpeed-LLM's train scripts the same); "launch",
# MindSpeed-LLM's generate scripts (``python -m torch.distributed.launch --nproc_per_node N
# --master_port P``: the script receives ``--local-rank``); "standalone", ``torchrun
# --standalone`` (torchrun's own run id).
LAUNCH_FORMS = ("master", "launch", "standalone")
DEFAULT_FORM = "master"
MASTER_ADDR = "127.0.0.1"
PORT_ATTEMPTS = 4  # launches on a fresh port when the one picked was taken before torchrun bound it


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


def free_port():
    """A port nobody listens on now, drawn at random below the kernel's ephemeral range (the
    ports it hands out to outgoing connections and to gloo's own listeners), so that jobs
    started side by side (pytest-xdist) rarely draw the same one; a run whose torchrun still
    finds it taken is launched again on another (``_launch``)."""
    low, _ = _ephemeral_range()
    for _ in range(200):
        port = _DRAW.randint(max(1024, low - 12000), low - 1)
        with socket.socket() as probe:
            try:
                probe.bind((MASTER_ADDR, port))
            except OSError:
                continue
            return port
    with socket.socket() as probe:  # everything below taken: let the kernel pick one
        probe.bind((MASTER_ADDR, 0))
        return probe.getsockname()[1]


def _ephemeral_range():
    try:
        low, high = map(int, pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range")
                        .read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


_free_port = free_port  # the older name
_DRAW = random.SystemRandom()  # a test that seeds ``random`` must not make every job draw alike


def launcher(form=DEFAULT_FORM, nproc=2, port=None, *, nnodes=1, node_rank=0):
    """The launcher's part of a command line in ``form`` (see ``LAUNCH_FORMS``); ``port`` is
    the master port (any free one when not given; unused by ``standalone``)."""
    port = free_port() if port is None else port
    if form == "master":
        return [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nnodes),
                "--node-rank", str(node_rank), "--master-addr", MASTER_ADDR,
                "--master-port", str(port), "--nproc-per-node", str(nproc)]
    if form == "launch":  # as MindSpeed-LLM's generate scripts spell it
        return [sys.executable, "-m", "torch.distributed.launch", "--nproc_per_node", str(nproc),
                "--nnodes", str(nnodes), "--node_rank", str(node_rank),
                "--master_addr", MASTER_ADDR, "--master_port", str(port)]
    if form == "standalone":
        return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc-per-node", str(nproc)]
    raise ValueError(f"launch form {form!r}: one of {', '.join(LAUNCH_FORMS)}")


def free_ports(count):
    """``count`` different free ports (see :func:`free_port`): a master port and a server's own."""
    ports = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def port_taken(returncode, stderr):
    """A job that ended because a port it was given was taken (torchrun's store, or a server's
    own listener): another process bound it between our probe and the job's bind."""
    text = (stderr or "").lower()
    return returncode not in (0, None) and ("eaddrinuse" in text
                                            or "address already in use" in text)


def relaunched_while_port_taken(launch_once, taken=None, attempts=PORT_ATTEMPTS):
    """``launch_once()`` (which draws its ports afresh each call), again while its result says a
    port was taken (``taken(result)``; by default :func:`port_taken` of its ``returncode`` and
    ``stderr``), at most ``attempts`` times; the last result."""
    taken = taken or (lambda result: port_taken(result.returncode, result.stderr))
    for attempt in range(attempts):
        result = launch_once()
        if attempt == attempts - 1 or not taken(result):
            return result
    raise ValueError("attempts must be at least 1")


def descendants(pid):
    """Every living process below ``pid`` (from /proc's parent links), children first."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop(0)
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def kill_job(process):
    """SIGKILL a launcher and everything below it. torchrun starts each rank in a session of its
    own, so a kill of torchrun's group alone leaves the ranks running, orphaned, holding the
    pipes a ``communicate()`` then waits on for ever (and the CPU the next tests need)."""
    below = descendants(process.pid)  # before the kill: orphans lose the link to torchrun
    for pid in [process.pid, *below]:
        for kill, target in ((os.killpg, pid), (os.kill, pid)):
            try:
                kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def run_to_end(command, env, cwd, timeout):
    """``command`` run to its end, what it printed kept; past ``timeout`` it is killed whole
    (:func:`kill_job`) and its ``returncode`` is None."""
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_job(process)
        stdout, stderr = process.communicate()
        return subprocess.CompletedProcess(command, None, stdout, stderr)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _launch(command_for, env, cwd, timeout, signal_job=None, nproc=1):
    """``_run(command_for(port))`` on a free port, again on another when it was taken."""
    return relaunched_while_port_taken(
        lambda: _run(command_for(free_port()), env, cwd, timeout, signal_job, nproc))


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
        kill_job(process)
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
    form=DEFAULT_FORM,
):
    """``torchrun --nnodes 1 --node-rank 0 --master-addr 127.0.0.1 --master-port P
    --nproc-per-node N [prefix] pretrain_gpt.py <tiny args> <args>`` (``form``: another of
    ``LAUNCH_FORMS``).

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
    tail = [*launcher_prefix, str(script), *(default_args() if with_default_args else []),
            *map(str, args)]
    return _launch(lambda port: [*launcher(form, nproc, port), *tail], env, cwd or tmp_path,
                   timeout, signal_job, nproc)


def run_script(script_path=LAUNCH_SCRIPT, args=(), *, tmp_path=None, nproc=2, env=None, cwd=None,
               timeout=240):
    """``bash script_path <args>`` with ``NPROC`` and a free ``MASTER_PORT`` set, for launch
    scripts shaped like ours (Megatron-LM's examples read both)."""
    if env is None:
        if tmp_path is None:
            raise ValueError("run_script needs env= or tmp_path= to know where reports go")
        env = harness_env(tmp_path)
    command = ["bash", str(script_path), *map(str, args)]
    return relaunched_while_port_taken(lambda: _run(
        command, {**env, "NPROC": str(nproc), "MASTER_PORT": str(free_port())},
        cwd or tmp_path, timeout))


def run_nodes(args=(), *, tmp_path=None, nnodes=2, nproc=2, env=None, cwd=None, timeout=240,
              launcher_prefix=(), script=ENTRY_SCRIPT, node_args=None, node_env=None,
              rendezvous="static"):
    """A multi-node job on this machine: ``nnodes`` torchrun agents, ``nproc`` workers each
    (global ranks, ``GROUP_RANK``, ``LOCAL_RANK`` as on separate nodes). ``rendezvous``:
    "static", as Megatron-LM's multi-node examples (``--nnodes N --node-rank I --master-addr
    127.0.0.1 --master-port P``: no run id from torchrun), or "c10d" (``--rdzv-backend c10d
    --rdzv-id``). ``node_args(i)`` / ``node_env(i)``: what node ``i`` adds to its command line
    / environment (a node-local save path). One ``TrainingRun``: the first non-zero agent
    status, outputs in agent order.
    """
    if env is None:
        if tmp_path is None:
            raise ValueError("run_nodes needs env= or tmp_path= to know where reports go")
        env = harness_env(tmp_path)
    if rendezvous not in ("static", "c10d"):
        raise ValueError(f"rendezvous {rendezvous!r}: static or c10d")
    cwd = cwd or tmp_path

    def commands(port):
        for node in range(nnodes):
            if rendezvous == "static":
                head = launcher("master", nproc, port, nnodes=nnodes, node_rank=node)
            else:
                head = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nnodes),
                        "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
                        "--rdzv-endpoint", f"{MASTER_ADDR}:{port}", "--rdzv-id",
                        f"harness-{port}"]
            yield [*head, *launcher_prefix, str(script), *default_args(), *map(str, args),
                   *map(str, node_args(node) if node_args else ())]

    envs = [{**env, **(node_env(node) if node_env else {})} for node in range(nnodes)]
    return relaunched_while_port_taken(
        lambda: _run_agents(list(commands(free_port())), envs, cwd, timeout))


def _store_not_bound(agents):
    process, _, err = agents[0]
    if process.poll() in (0, None):
        return False
    err.flush()
    err.seek(0)
    text = err.read().lower()
    err.seek(0, os.SEEK_END)
    return "eaddrinuse" in text or "address already in use" in text


def _run_agents(commands, envs, cwd, timeout):
    report_dir = envs[0].get("HARNESS_REPORT_DIR")
    if report_dir:
        _clear_reports(report_dir)
    start, agents = time.monotonic(), []
    for command, env in zip(commands, envs):
        out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        agents.append((subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=err,
                                        text=True, start_new_session=True), out, err))
    timed_out = False
    while any(process.poll() is None for process, _, _ in agents):
        if time.monotonic() - start > timeout or _store_not_bound(agents):
            # node 0 could not bind the master port: the other nodes would wait for it
            timed_out = time.monotonic() - start > timeout
            for process, _, _ in agents:
                if process.poll() is None:
                    kill_job(process)
                    process.wait()
            break
        time.sleep(0.2)
    codes = [process.returncode for process, _, _ in agents]
    outputs = []
    for _, out, err in agents:
        out.flush()
        err.flush()
        out.seek(0)
        err.seek(0)
        outputs.append((out.read(), err.read()))
        out.close()
        err.close()
    return TrainingRun(
        command=[str(part) for part in commands[0]],
        returncode=None if timed_out else next((code for code in codes if code), 0),
        stdout="".join(o for o, _ in outputs),
        stderr="".join(e for _, e in outputs),
        reports=_read_reports(report_dir) if report_dir else {},
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
    )
