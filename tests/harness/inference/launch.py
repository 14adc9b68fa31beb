"""Start the CPU text-generation server under torchrun, send it requests, stop it.

``start(args, env=..., cwd=...)`` returns a running :class:`Server` once rank 0 accepts
connections; ``server.put(prompts)`` is one ``PUT /api`` request; ``server.stop()`` interrupts
rank 0 (Ctrl-C: Flask returns, rank 0 broadcasts "stop" and every rank leaves its loop) and
returns a :class:`ServerRun` with the output and the per-rank ``server_rank{R}.json`` reports.
"""

import dataclasses
import http.client
import json
import os
import pathlib
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from harness import launch

SERVER_SCRIPT = pathlib.Path(__file__).resolve().parent / "run_text_generation_server.py"


def model_args(tp=2):
    """The tiny GPT the server loads (random weights), as Megatron flags."""
    return ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
            "--seq-length", "64", "--max-position-embeddings", "64",
            "--tensor-model-parallel-size", str(tp), "--transformer-impl", "local",
            "--distributed-backend", "gloo", "--vocab-size", "128",
            "--tokenizer-type", "NullTokenizer", "--use-cpu-initialization",
            "--hidden-dropout", "0", "--attention-dropout", "0", "--no-masked-softmax-fusion",
            "--no-bias-gelu-fusion", "--no-bias-dropout-fusion",
            "--no-gradient-accumulation-fusion", "--no-persist-layer-norm"]


free_port = launch.free_port  # one place draws ports for every harness


@dataclasses.dataclass
class ServerRun:
    """A stopped server: torchrun's exit status, its output, and what each rank reported."""

    returncode: int  # None when it had to be killed
    stdout: str
    stderr: str
    reports: dict  # global rank -> server_rank{R}.json
    duration_s: float
    command: list = dataclasses.field(default_factory=list)

    def describe(self, tail=3000):
        return (f"command: {' '.join(self.command)}\nreturncode: {self.returncode}\n--- stdout (tail) ---\n{self.stdout[-tail:]}\n"
                f"--- stderr (tail) ---\n{self.stderr[-tail:]}")


class Server:
    def __init__(self, process, port, report_dir, out, err, started, command=()):
        self.process, self.port, self.report_dir = process, port, report_dir
        self._out, self._err, self._started = out, err, started
        self.command = [str(part) for part in command]  # as launched

    def report(self, rank):
        path = os.path.join(self.report_dir, f"server_rank{rank}.json")
        with open(path) as handle:
            return json.load(handle)

    def put(self, prompts=("1 2 3",), tokens_to_generate=4, timeout=60):
        """One ``PUT /api`` request; the decoded JSON answer."""
        body = json.dumps({"prompts": list(prompts), "tokens_to_generate": tokens_to_generate})
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/api", data=body.encode(),
                                         method="PUT",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return json.loads(answer.read())

    def post(self, path, body=None, timeout=30):
        """``POST path`` with a JSON body: (status, decoded JSON answer, seconds)."""
        data = json.dumps(body if body is not None else {}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                         method="POST",
                                         headers={"Content-Type": "application/json"})
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                status, text = answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode()
        try:
            payload = json.loads(text)
        except ValueError:
            payload = text
        return status, payload, time.monotonic() - started

    def signal_rank(self, rank, signum):
        os.kill(self.report(rank)["pid"], signum)

    def stop(self, timeout=60, signum=signal.SIGINT, rank=0):
        """Send ``signum`` to ``rank`` (Ctrl-C on rank 0 is upstream's way to stop the server)
        and wait for the job to end; killed after ``timeout``."""
        try:
            self.signal_rank(rank, signum)
        except (OSError, ValueError):
            pass  # already gone: wait() shows how it ended
        return self.wait(timeout)

    def wait(self, timeout=60):
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            launch.kill_job(self.process)
            self.process.wait()
            code = None
        outputs = []
        for handle in (self._out, self._err):
            handle.seek(0)
            outputs.append(handle.read())
            handle.close()
        reports = {}
        for path in pathlib.Path(self.report_dir).glob("server_rank*.json"):
            reports[int(path.stem.removeprefix("server_rank"))] = json.loads(path.read_text())
        return ServerRun(code, outputs[0], outputs[1], reports,
                         time.monotonic() - self._started, self.command)


def start(args=(), *, env, cwd, nproc=2, tp=2, launcher_prefix=("-m", "mindspeed_prof.launch"),
          ready_timeout=120, script=SERVER_SCRIPT, model=None, form=launch.DEFAULT_FORM):
    """``torchrun --nnodes 1 --node-rank 0 --master-addr 127.0.0.1 --master-port P
    --nproc-per-node N [prefix] SCRIPT <model> --port Q <args>`` in a session of its own (``form``:
    another of ``harness.launch.LAUNCH_FORMS``, e.g. ``launch``, MindSpeed-LLM's generate
    scripts' ``torch.distributed.launch``); returns once rank 0 listens, launched again on other
    ports when torchrun's store or the server found its port taken. ``env`` comes from
    ``harness.launch.harness_env`` (its ``HARNESS_REPORT_DIR`` receives the server reports);
    ``model`` defaults to the tiny GPT's flags (``model_args(tp)``)."""
    report_dir = env["HARNESS_REPORT_DIR"]
    os.makedirs(report_dir, exist_ok=True)
    tail = [*launcher_prefix, str(script), *(model_args(tp) if model is None else model)]

    def start_once():
        for stale in pathlib.Path(report_dir).glob("server_rank*.json"):
            stale.unlink()
        port, master_port = launch.free_ports(2)
        command = [*launch.launcher(form, nproc, master_port), *tail, "--port", str(port),
                   *map(str, args)]
        return _start(command, port, env, cwd, report_dir, ready_timeout)

    server = launch.relaunched_while_port_taken(
        start_once, taken=lambda started: isinstance(started, ServerRun)
        and launch.port_taken(started.returncode, started.stderr))
    if isinstance(server, ServerRun):
        raise RuntimeError(f"the server exited before listening\n{server.describe()}")
    return server


def _start(command, port, env, cwd, report_dir, ready_timeout):
    """The running :class:`Server`, or the :class:`ServerRun` of one that ended first."""
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=err, text=True,
                               start_new_session=True)
    server = Server(process, port, report_dir, out, err, started, command)
    deadline = started + ready_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return server.wait()
        if _answers_http(port):
            return server
        time.sleep(0.2)
    raise RuntimeError(f"the server did not listen within {ready_timeout} s\n"
                       f"{server.wait(timeout=1).describe()}")


def _answers_http(port):
    """True once an HTTP server answers on ``port`` (any status). A bare TCP connect is not
    enough: the port was free when chosen, and torchrun's own store may take it meanwhile."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/")
        connection.getresponse().read()
        return True
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()
