"""Test-side helpers: run the offline engine script, start and stop the dynamic server.

Both run under torchrun as Megatron-LM's examples start it (``--nnodes 1 --node-rank 0
--master-addr 127.0.0.1 --master-port P``: no run id from torchrun; ``harness.launch``'s
launcher, on a free port drawn again when it was taken) with the test's interpreter (the Python
3.12 environment holding megatron-core >= 0.19), TP = ``nproc``, and read back the per-rank
reports of ``harness.dynamic.steps``.
"""

import dataclasses
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from harness.launch import (free_port, free_ports, launcher, port_taken,
                            relaunched_while_port_taken, run_to_end)

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(os.path.dirname(HERE))
REPO = os.path.dirname(TESTS)
# torchrun's wait between its SIGINT to the ranks and SIGKILL (its default is 30 s): a TP rank
# other than 0 blocked in the engine's model-parallel recv never sees the SIGINT (FACTS.md).
SHUTDOWN_TIMEOUT_S = 5


def job_env(report_dir, pythonpath=(), **extra):
    """The environment of a harness job: the repository and tests/ importable, reports in
    ``report_dir``, no profiling switches of the developer's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINDSPEED_PROF_")}
    env["PYTHONPATH"] = os.pathsep.join([*pythonpath, REPO, TESTS, env.get("PYTHONPATH", "")])
    env["HARNESS_REPORT_DIR"] = str(report_dir)
    env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] = str(SHUTDOWN_TIMEOUT_S)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def torchrun(script, nproc, launcher_prefix=(), port=None):
    """``torchrun --nnodes 1 --node-rank 0 --master-addr 127.0.0.1 --master-port PORT
    --nproc-per-node NPROC [prefix] SCRIPT`` (``port``: a free one when not given)."""
    return [*launcher("master", nproc, port), *launcher_prefix, script]


def _run_job(command_for, env, cwd, timeout):
    """``command_for(port)`` run to its end on a free master port, again on another when
    torchrun found it taken; a ``CompletedProcess`` whose ``returncode`` is None when it ran
    past ``timeout`` (killed whole: the ranks' stack dumps, offline_engine.py, are kept)."""
    return relaunched_while_port_taken(lambda: run_to_end(command_for(free_port()), env, cwd,
                                                          timeout))


def _serving(command_for, report_dir, nproc, env, ports=1):
    """A :class:`Server` of ``command_for(*ports)`` (the first a free master port, the others
    free ports for the tool), ready; launched again on other ports when one was taken."""
    def start_once():
        drawn = free_ports(ports)
        server = Server(command_for(*drawn), report_dir, nproc, env,
                        port=drawn[1] if ports > 1 else None)
        try:
            return server.wait_ready()
        except RuntimeError:  # it exited before serving
            if port_taken(server.proc.returncode, server.stderr()):
                return server
            raise
        except BaseException:
            server.kill_all()
            raise

    server = relaunched_while_port_taken(start_once, taken=lambda started: started.ready_s is None)
    if server.ready_s is None:
        raise RuntimeError(f"server exited {server.proc.returncode} before serving (its ports "
                           f"were taken every time):\n{server.stderr()[-6000:]}")
    return server


def read_reports(report_dir, nproc):
    reports = {}
    for rank in range(nproc):
        path = os.path.join(report_dir, f"dynamic_rank{rank}.json")
        if os.path.exists(path):
            with open(path) as handle:
                reports[rank] = json.load(handle)
    return reports


@dataclasses.dataclass
class Run:
    returncode: "int | None"  # None: killed past its timeout
    stdout: str
    stderr: str
    reports: dict
    wall_s: float

    def describe(self):
        ended = "killed past its timeout" if self.returncode is None else \
            f"exit {self.returncode}"
        return f"{ended} after {self.wall_s:.1f} s\n--- stderr tail ---\n" \
               f"{self.stderr[-12000:]}"


def run_offline(args, report_dir, nproc=1, timeout=240, env=None, launcher_prefix=()):
    """``offline_engine.py ARGS`` under torchrun (``launcher_prefix``: e.g. ``("-m",
    "mindspeed_prof.launch")``); returns a :class:`Run`."""
    os.makedirs(report_dir, exist_ok=True)
    started = time.time()
    script = os.path.join(HERE, "offline_engine.py")
    proc = _run_job(lambda port: [*torchrun(script, nproc, launcher_prefix, port), *args],
                    env=env or job_env(report_dir), cwd=str(report_dir), timeout=timeout)
    return Run(proc.returncode, proc.stdout, proc.stderr, read_reports(report_dir, nproc),
               time.time() - started)


def alive(pid):
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def port_open(port, host="127.0.0.1"):
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


class Server:
    """A running dynamic server job (``serve_dynamic.py`` or the opt-in real tool)."""

    def __init__(self, command, report_dir, nproc, env, port=None):
        self.report_dir, self.nproc = str(report_dir), nproc
        self.stdout_path = os.path.join(self.report_dir, "stdout.txt")
        self.stderr_path = os.path.join(self.report_dir, "stderr.txt")
        self.started = time.time()
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            # Its own session, as a terminal's foreground job: stop() signals the whole group.
            self.proc = subprocess.Popen(command, env=env, cwd=self.report_dir, stdout=out,
                                         stderr=err, start_new_session=True)
        self.port = port
        self.ready_s = None

    def reports(self):
        return read_reports(self.report_dir, self.nproc)

    def wait_ready(self, timeout=180):
        """Until every rank serves, rank 0 reports its port and ``GET /health`` answers 200."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode} before serving:\n"
                                   f"{self.stderr()[-6000:]}")
            reports = self.reports()
            if len(reports) == self.nproc and all(r.get("serving") for r in reports.values()):
                self.port = self.port or reports[0].get("port")
                if self.port and self.get("/health")[0] == 200:
                    self.ready_s = time.time() - self.started
                    return self
            time.sleep(0.3)
        raise TimeoutError(f"server not ready after {timeout} s:\n{self.stderr()[-6000:]}")

    def request(self, method, path, body=None, timeout=60):
        """One HTTP request; returns (status, parsed JSON or text, seconds)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                         method=method,
                                         headers={"Content-Type": "application/json"})
        started = time.time()
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, text = response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode()
        except (urllib.error.URLError, ConnectionError):
            return None, None, time.time() - started
        try:
            payload = json.loads(text)
        except ValueError:
            payload = text
        return status, payload, time.time() - started

    def get(self, path):
        return self.request("GET", path, timeout=5)

    def post(self, path, body=None, timeout=60):
        return self.request("POST", path, body if body is not None else {}, timeout)

    def completion(self, prompt, max_tokens, path="/v1/completions"):
        """Greedy, no stop at end of document."""
        return self.post(path, {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
                                "ignore_eos": True})

    def job_pids(self):
        """torchrun, every rank, rank 0's front ends and its coordinator, as reported."""
        reports = self.reports()
        pids = {"torchrun": [self.proc.pid], "ranks": [r["pid"] for r in reports.values()],
                "frontends": reports.get(0, {}).get("frontend_pids", []),
                "coordinator": [p for p in [reports.get(0, {}).get("coordinator_pid")] if p]}
        return pids

    def stop(self, sig=signal.SIGINT, timeout=90):
        """``sig`` to the job's process group (Ctrl-C in the terminal that started it); wait."""
        pids = self.job_pids()
        stop_sent = time.time()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_all()
        return ServerRun(self.proc.returncode, self._read(self.stdout_path), self.stderr(),
                         self.reports(), time.time() - self.started, pids,
                         time.time() - stop_sent, self.port)

    def kill_all(self):
        """SIGKILL the job: torchrun's group, each rank's group (torchrun starts every rank in
        a session of its own; rank 0's holds its front ends and coordinator), every pid."""
        pids = self.job_pids()
        for leader in [self.proc.pid, *pids["ranks"]]:
            try:
                os.killpg(leader, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in sum(pids.values(), []):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()

    def stderr(self):
        return self._read(self.stderr_path)

    def stdout(self):
        return self._read(self.stdout_path)

    @staticmethod
    def _read(path):
        with open(path, errors="replace") as handle:
            return handle.read()


@dataclasses.dataclass
class ServerRun(Run):
    pids: dict
    stop_s: float
    port: int

    def alive_pids(self):
        return {role: [p for p in pids if alive(p)] for role, pids in self.pids.items()
                if any(alive(p) for p in pids)}


def start_server(report_dir, nproc=2, args=(), env=None, launcher_prefix=()):
    """``serve_dynamic.py`` under torchrun on 127.0.0.1 and a free port; ready to serve."""
    os.makedirs(report_dir, exist_ok=True)
    script = os.path.join(HERE, "serve_dynamic.py")
    return _serving(lambda port: [*torchrun(script, nproc, launcher_prefix, port), "--port", "0",
                                  *args], report_dir, nproc, env or job_env(report_dir))


def real_tool_env(report_dir, checkout, overlay_dir):
    """The real tier's job environment: the checkout's packages over the installed wheel."""
    return job_env(report_dir, pythonpath=[str(overlay_dir)], MEGATRON_LM_PATH=checkout,
                   CUDA_DEVICE_MAX_CONNECTIONS=1)  # Megatron-LM insists on it under TP


def make_real_checkpoint(checkout, work_dir, nproc=2, timeout=300):
    """The overlay folder and a random-weight ``--ckpt-format torch`` checkpoint of the tiny
    model, saved by the checkout's own ``save_checkpoint`` (``real_server.py checkpoint``)."""
    from harness.real_megatron import overlay

    from . import real_server

    overlay_dir, save = os.path.join(work_dir, "overlay"), os.path.join(work_dir, "checkpoint")
    os.makedirs(overlay_dir, exist_ok=True)
    overlay.build(checkout, overlay_dir)
    script = os.path.join(HERE, "real_server.py")
    started = time.time()
    proc = _run_job(lambda port: torchrun(script, nproc, (), port) + [
        "checkpoint", "--tensor-model-parallel-size", str(nproc), *real_server.MODEL_ARGS,
        *real_server.ENGINE_ARGS, "--save", save, "--save-interval", "1"],
        env=real_tool_env(work_dir, checkout, overlay_dir), cwd=work_dir, timeout=timeout)
    if proc.returncode != 0:
        ended = "ran past its timeout" if proc.returncode is None else \
            f"exited {proc.returncode}"
        raise RuntimeError(f"checkpoint job {ended}:\n{proc.stderr[-6000:]}")
    return overlay_dir, save, time.time() - started


def start_real_server(report_dir, checkout, overlay_dir, checkpoint, nproc=2, extra=(),
                      launcher_prefix=()):
    """The checkout's ``tools/run_dynamic_text_generation_server.py`` (via ``real_server.py
    serve``) on 127.0.0.1 and a free port, with ``extra`` flags; ready to serve."""
    from . import real_server

    os.makedirs(report_dir, exist_ok=True)
    script = os.path.join(HERE, "real_server.py")
    return _serving(lambda master_port, port: torchrun(
        script, nproc, launcher_prefix, master_port) + [
        "serve", "--tensor-model-parallel-size", str(nproc), *real_server.MODEL_ARGS,
        *real_server.ENGINE_ARGS, "--load", checkpoint, "--host", "127.0.0.1",
        "--port", str(port), *extra], report_dir, nproc,
        real_tool_env(report_dir, checkout, overlay_dir), ports=2)
