"""The one flush-on-exit mechanism (mindspeed_prof.recording.exits): a signal that reaches the whole job, a
second signal or a closed console cannot abort the final flush, and SIGTERM flushes every live
recorder before the process ends the way it would have.

Signal tests run in a child interpreter: they install handlers and kill processes."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGCHLD"), reason="POSIX signals")


def run_child(*body, timeout=60):
    """Run the ``body`` parts in a fresh interpreter; its last stdout line is JSON.

    The child starts with Python's own SIGINT handler, as a script run from a terminal does: a
    shell that starts pytest in the background without job control hands its children SIGINT
    ignored, and a test that sends SIGINT would then test nothing (issue 31)."""
    code = textwrap.dedent("""
        import json, os, signal, subprocess, sys, time
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from mindspeed_prof import log
        from mindspeed_prof.recording import exits
    """) + "".join(textwrap.dedent(part) for part in body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout)
    return done


def last_json(done):
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stdout + done.stderr
    return json.loads(lines[-1])


# torch's DataLoader installs this kind of SIGCHLD handler: it raises in whatever code runs.
WORKER_WITH_TORCHS_SIGCHLD_HANDLER = """
    def torch_like(signum, frame):
        raise RuntimeError("DataLoader worker (pid N) is killed by signal: Terminated.")
    signal.signal(signal.SIGCHLD, torch_like)
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
"""


def test_a_child_killed_during_the_final_flush_is_noted_and_does_not_abort_it():
    done = run_child(WORKER_WITH_TORCHS_SIGCHLD_HANDLER, """
        with exits.final_flush() as events:
            worker.terminate()
            for _ in range(100):
                time.sleep(0.02)  # the flush goes on: stop, export, manifest
            flushed = True
        assert signal.getsignal(signal.SIGCHLD) is torch_like
        print(json.dumps({"flushed": flushed, "events": events.as_dict(), "pid": worker.pid}))
    """)
    out = last_json(done)
    assert out["flushed"] is True
    assert out["events"]["children_ended"] == [{"pid": out["pid"], "how": "killed by SIGTERM"}]


def test_the_same_child_death_without_the_guard_aborts_the_code_that_runs():
    # The failure the guard exists for, so the test above cannot pass by accident.
    done = run_child(WORKER_WITH_TORCHS_SIGCHLD_HANDLER, """
        try:
            worker.terminate()
            for _ in range(100):
                time.sleep(0.02)
            print(json.dumps({"aborted": False}))
        except RuntimeError:
            print(json.dumps({"aborted": True}))
    """)
    assert last_json(done) == {"aborted": True}


@pytest.mark.parametrize("second", ["SIGTERM", "SIGINT"])
def test_a_signal_during_the_final_flush_is_held_and_delivered_after_it(second):
    done = run_child(f"""
        with exits.final_flush() as events:
            os.kill(os.getpid(), signal.{second})
            time.sleep(0.2)
            print(json.dumps({{"events": events.as_dict()}}), flush=True)
        print("not reached", flush=True)
    """)
    assert last_json(done)["events"] == {"signals": [second]}
    assert "not reached" not in done.stdout
    assert done.returncode == -getattr(signal, second)
    if second == "SIGINT":
        assert "KeyboardInterrupt" in done.stderr


def test_a_flush_running_on_another_thread_does_not_leave_the_main_threads_flush_unguarded():
    # A server's request thread ends its window inside final_flush() while SIGTERM's flush runs
    # on the main thread: the main thread's block must still hold the signal.
    done = run_child("""
        import threading
        entered, leave = threading.Event(), threading.Event()
        def request_thread():
            with exits.final_flush():
                entered.set()
                leave.wait(10)
        thread = threading.Thread(target=request_thread)
        thread.start()
        entered.wait(10)
        with exits.final_flush() as events:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
            print(json.dumps({"events": events.as_dict()}), flush=True)
            leave.set()
            thread.join()
        print("not reached", flush=True)
    """)
    assert last_json(done)["events"] == {"signals": ["SIGTERM"]}
    assert "not reached" not in done.stdout
    assert done.returncode == -signal.SIGTERM


def test_a_closed_console_does_not_abort_the_final_flush():
    done = run_child("""
        sys.stdout.close()
        with exits.final_flush() as events:
            log.info("wrote the trace")
            log.error("something to say")
        sys.stderr.write(json.dumps({"events": events.as_dict()}))
    """)
    assert json.loads(done.stderr.splitlines()[-1]) == {"events": {"console_writes_lost": 1}}


def test_sigterm_flushes_every_registered_recorder_then_chains_to_the_earlier_handler():
    done = run_child("""
        calls = []
        def earlier(signum, frame):
            calls.append("earlier handler")
            print(json.dumps({"calls": calls}), flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, earlier)
        for name in ("training", "inference"):
            flush = exits.FlushOnExit(lambda reason, detail, wait_timeout=None, name=name:
                                      calls.append(f"{name} closed: {reason} {detail}"))
            flush.install()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    """)
    assert done.returncode == 3
    assert last_json(done)["calls"] == ["training closed: signal SIGTERM",
                                        "inference closed: signal SIGTERM", "earlier handler"]


def test_sigterm_with_the_default_handler_flushes_then_dies_of_sigterm():
    done = run_child("""
        flush = exits.FlushOnExit(lambda reason, detail, wait_timeout=None:
                                  print(json.dumps({"closed": [reason, detail]}), flush=True))
        flush.install()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        print("survived", flush=True)
    """)
    assert last_json(done) == {"closed": ["signal", "SIGTERM"]}
    assert done.returncode == -signal.SIGTERM and "survived" not in done.stdout


def test_the_handler_is_put_back_when_the_last_recorder_closes():
    done = run_child("""
        first = exits.FlushOnExit(lambda *a, **k: None)
        second = exits.FlushOnExit(lambda *a, **k: None)
        first.install(); second.install()
        first.uninstall()
        still = signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        second.uninstall()
        print(json.dumps({"while_one_is_live": still,
                          "after": signal.getsignal(signal.SIGTERM) is signal.SIG_DFL}))
    """)
    assert last_json(done) == {"while_one_is_live": True, "after": True}


def test_a_handler_installed_over_ours_keeps_sigterm_and_later_recorders_leave_it_alone():
    # Megatron's --exit-signal-handler replaces ours and ends training through sys.exit.
    done = run_child("""
        exits.install_signal_flush(pin=True)
        latch = lambda signum, frame: None
        signal.signal(signal.SIGTERM, latch)
        flush = exits.FlushOnExit(lambda *a, **k: None)
        flush.install()
        kept = signal.getsignal(signal.SIGTERM) is latch
        flush.uninstall()
        print(json.dumps({"kept": kept, "after": signal.getsignal(signal.SIGTERM) is latch}))
    """)
    assert last_json(done) == {"kept": True, "after": True}


def test_a_forked_child_passes_sigterm_on_without_flushing_its_parents_recorder():
    done = run_child("""
        parent = os.getpid()
        flush = exits.FlushOnExit(lambda *a, **k: print(
            "parent closed" if os.getpid() == parent else "child flushed", flush=True))
        flush.install()
        pid = os.fork()
        if pid == 0:  # a DataLoader worker forked while a recorder is live
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"child": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None}))
    """)
    assert last_json(done) == {"child": signal.SIGTERM}
    assert "child flushed" not in done.stdout and "parent closed" in done.stdout


def test_sigterm_after_close_waits_for_the_export_still_running_then_dies_of_sigterm(tmp_path):
    # Megatron's normal return closes without waiting (post-training collectives must not wait
    # for the export); a SIGTERM then must not kill the trace half-written.
    done = run_child(f"""
        import torch
        from mindspeed_prof import ProfilerConfig
        from mindspeed_prof.drivers.training import ProfilerManager
        real = torch.profiler.profile.export_chrome_trace
        def slow(self, path):
            time.sleep(2)  # a slow disk
            return real(self, path)
        torch.profiler.profile.export_chrome_trace = slow
        config = ProfilerConfig(profile=True, profile_step_start=2, profile_step_end=4,
                                profile_save_path={str(tmp_path)!r}, profile_backend="torch",
                                profile_ranks=[0])
        manager = ProfilerManager(config, rank=0, world_size=1)
        manager.arm(first_iteration=1, train_iters=4)
        for n in range(1, 5):
            manager.step_begin(n); torch.randn(4, 4).sum(); manager.step_end(n)
        manager.close("finished", wait=False)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
    """)
    assert done.returncode == -signal.SIGTERM, done.stderr
    data = json.loads((tmp_path / "profile_manifest_rank0.json").read_text())
    assert data["status"] == "complete", data
    assert [f for f in os.listdir(tmp_path) if f.endswith(".pt.trace.json")]


def test_ctrl_c_twice_during_the_final_flush_interrupts_it():
    # A flush that hangs (an export to a dead mount) can still be stopped by insisting.
    done = run_child("""
        try:
            with exits.final_flush():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
                print(json.dumps({"interrupted": False}), flush=True)
        except KeyboardInterrupt:
            print(json.dumps({"interrupted": True}), flush=True)
    """)
    assert last_json(done) == {"interrupted": True}


def test_sigterm_twice_during_the_final_flush_is_still_held():
    # SLURM and torchrun both forward SIGTERM: the second one must not cut the flush short.
    done = run_child("""
        with exits.final_flush() as events:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
            print(json.dumps({"flushed": events.as_dict()}), flush=True)
    """)
    assert last_json(done) == {"flushed": {"signals": ["SIGTERM", "SIGTERM"]}}
    assert done.returncode == -signal.SIGTERM


@pytest.mark.parametrize("unit", ["iteration", "request"])
def test_sigterm_while_the_last_step_of_a_window_saves_its_trace_keeps_the_trace(tmp_path, unit):
    # The torch profiler saves a window's trace inside the step() that ends its schedule, before
    # the session is stopped; a signal landing there (a job stopped right after a request or an
    # iteration) ran the flush mid-save: the trace was lost, the window 'incomplete'.
    done = run_child(f"""
        import torch
        from mindspeed_prof import ProfilerConfig
        from mindspeed_prof.drivers.inference import RequestDriver
        from mindspeed_prof.drivers.training import ProfilerManager
        real = torch.profiler.profile.export_chrome_trace
        def signalled(self, path):
            os.kill(os.getpid(), signal.SIGTERM)  # arrives while the trace is being saved
            time.sleep(0.2)
            return real(self, path)
        torch.profiler.profile.export_chrome_trace = signalled
        config = ProfilerConfig(profile=True, profile_step_start=2, profile_step_end=4,
                                profile_save_path={str(tmp_path)!r}, profile_backend="torch",
                                profile_ranks=[0])
        if {unit!r} == "iteration":
            driver = ProfilerManager(config, rank=0, world_size=1)
            driver.arm(first_iteration=1, train_iters=6)
            for n in range(1, 7):
                driver.step_begin(n); torch.randn(4, 4).sum(); driver.step_end(n)
        else:
            driver = RequestDriver(config)
            driver.arm()
            for n in range(1, 7):
                with driver.request():
                    torch.randn(4, 4).sum()
        time.sleep(30)
    """)
    assert done.returncode == -signal.SIGTERM, done.stderr
    data = json.loads((tmp_path / "profile_manifest_rank0.json").read_text())
    traces = [os.path.join(root, f) for root, _, files in os.walk(tmp_path) for f in files
              if f.endswith(".pt.trace.json")]
    assert traces, (data, done.stderr[-2000:])  # the trace being saved when the signal came
    window = data["windows"][0]  # iterations 2-3, or request 2's own session
    assert window["files"] and window["status"] == "complete", window
    assert data["exit"]["reason"] == "signal"
    if unit == "request":  # the job stopped after request 2 of the window 2-3: that is cut
        assert data["planned"][0]["status"] == "cut" and data["planned"][0]["recorded"] == [2]
