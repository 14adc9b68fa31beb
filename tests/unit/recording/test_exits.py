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
import time

import pytest

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGCHLD"), reason="POSIX signals")


def run_child(*body, timeout=120):
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


@pytest.mark.slow  # child interpreters ended by signals
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


# A worker that died in the flush's last instants: its SIGCHLD is still pending when the block
# puts torch's handler back, which then raises at once, inside the block's own release (CI,
# stop 39: the rank ended on that RuntimeError instead of SIGTERM, its held signal lost).
SIGCHLD_PENDING_AT_RELEASE = """
    real_signal = signal.signal
    def signal_and_pending_sigchld(signum, handler):
        old = real_signal(signum, handler)
        if signum == signal.SIGCHLD and handler is torch_like:
            signal.raise_signal(signal.SIGCHLD)  # torch's handler runs as soon as it is back
        return old
    signal.signal = signal_and_pending_sigchld
"""


@pytest.mark.parametrize("earlier", ["default", "handler"])
def test_sigterm_chains_even_when_a_sigchld_pending_at_the_flushs_end_raises(earlier):
    done = run_child(WORKER_WITH_TORCHS_SIGCHLD_HANDLER, SIGCHLD_PENDING_AT_RELEASE, f"""
        if "{earlier}" == "handler":
            def earlier(signum, frame):
                print(json.dumps({{"earlier": "called"}}), flush=True)
                sys.exit(3)
            real_signal(signal.SIGTERM, earlier)
        def close(reason, detail, wait_timeout=None):
            worker.terminate()  # dies with the job, during the flush
            worker.wait()
            print(json.dumps({{"closed": reason}}), flush=True)
        flush = exits.FlushOnExit(close)
        flush.install()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        print("survived", flush=True)
    """)
    assert "closed" in done.stdout and "survived" not in done.stdout, done.stderr
    if earlier == "handler":
        assert done.returncode == 3 and last_json(done) == {"earlier": "called"}, done.stderr
    else:
        assert done.returncode == -signal.SIGTERM, done.stderr


def test_a_held_signal_is_delivered_even_when_a_sigchld_pending_at_the_flushs_end_raises():
    done = run_child(WORKER_WITH_TORCHS_SIGCHLD_HANDLER, SIGCHLD_PENDING_AT_RELEASE, """
        try:
            with exits.final_flush():
                os.kill(os.getpid(), signal.SIGTERM)  # held until the block ends
                worker.terminate()
                worker.wait()
        except RuntimeError:
            print("torch's error came first", flush=True)
        time.sleep(5)
        print("survived", flush=True)
    """)
    assert done.returncode == -signal.SIGTERM, done.stdout + done.stderr
    assert "torch's error came first" not in done.stdout and "survived" not in done.stdout


# The same death a moment earlier: a job-wide SIGTERM starts our handler while the workers are
# still dying, and one's SIGCHLD lands in the handler's first instructions, before the flush holds
# anything (CI, stop 39: the rank died of SIGTERM with a manifest that never said how it ended,
# no flush having run; stop 38: it died of torch's RuntimeError). A trace function makes it land
# there every time: at the handler's entry, or where the flush block begins to hold.
SIGCHLD_WHEN_THE_HANDLER_STARTS = """
    def land_sigchld_at(code_name, in_file=".py"):
        def tracer(frame, event, arg):
            if event == "call" and frame.f_code.co_name == code_name \
                    and frame.f_code.co_filename.endswith(in_file):
                sys.settrace(None)
                worker.terminate()  # its SIGCHLD is handled here, inside our handler; left
                os.waitid(os.P_PID, worker.pid, os.WEXITED | os.WNOWAIT)  # unreaped, as torch's
            return None
        sys.settrace(tracer)
"""


@pytest.mark.parametrize("where", ["mindspeed_prof_flush_on_sigterm", "final_flush"])
def test_a_workers_sigchld_landing_as_the_sigterm_handler_starts_does_not_stop_the_flush(where):
    done = run_child(WORKER_WITH_TORCHS_SIGCHLD_HANDLER, SIGCHLD_WHEN_THE_HANDLER_STARTS, f"""
        def close(reason, detail, wait_timeout=None):
            print(json.dumps({{"closed": [reason, detail]}}), flush=True)
        flush = exits.FlushOnExit(close)
        flush.install()
        land_sigchld_at({where!r})
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        print("survived", flush=True)
    """)
    assert last_json(done) == {"closed": ["signal", "SIGTERM"]}, done.stderr
    assert done.returncode == -signal.SIGTERM and "RuntimeError" not in done.stderr, done.stderr


def test_a_workers_death_noted_in_the_sigterm_handler_reaches_torch_when_the_host_lives_on():
    # The host's SIGTERM handler returns (the loop goes on): torch then learns of the death, in the
    # code the signals interrupted, as it would have right after that handler without us.
    done = run_child(WORKER_WITH_TORCHS_SIGCHLD_HANDLER, SIGCHLD_WHEN_THE_HANDLER_STARTS, """
        signal.signal(signal.SIGTERM, lambda signum, frame: print("host handler", flush=True))
        flush = exits.FlushOnExit(lambda reason, detail, wait_timeout=None:
                                  print("closed", reason, flush=True))
        flush.install()
        land_sigchld_at("mindspeed_prof_flush_on_sigterm")
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        except RuntimeError as exc:
            print(json.dumps({"torch": str(exc)}), flush=True)
    """)
    assert done.stdout.splitlines()[:2] == ["closed signal", "host handler"], done.stderr
    assert "killed by signal" in last_json(done)["torch"]


def test_torchs_handler_installed_after_the_recorder_armed_is_guarded_from_the_next_unit(
        tmp_path):
    # torch installs its SIGCHLD handler with the first DataLoader iterator, in the first step.
    done = run_child(f"""
        sys.path.insert(0, {os.path.join(os.path.dirname(__file__), "..", "..")!r})
        import pathlib
        from helpers.inference import config
        from mindspeed_prof.recording.recorder import WindowRecorder
        recorder = WindowRecorder(config(pathlib.Path({str(tmp_path)!r})))
        recorder.arm(first=1)
    """, WORKER_WITH_TORCHS_SIGCHLD_HANDLER, SIGCHLD_WHEN_THE_HANDLER_STARTS, """
        recorder.begin(1)
        land_sigchld_at("mindspeed_prof_flush_on_sigterm")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    """)
    assert done.returncode == -signal.SIGTERM and "RuntimeError" not in done.stderr, done.stderr
    data = json.loads((tmp_path / "prof" / "profile_manifest_rank0.json").read_text())
    assert data["exit"] == {"reason": "signal", "detail": "SIGTERM"}
    assert data["exit_events"]["children_ended"][0]["how"] == "killed by SIGTERM"


def test_a_workers_death_as_a_recorders_close_begins_leaves_the_manifest_whole(tmp_path):
    # The loop ends (here normally) as a worker dies: the close, begun, runs whole, and torch
    # learns of the death once it is done, in the code that called it.
    done = run_child(f"""
        sys.path.insert(0, {os.path.join(os.path.dirname(__file__), "..", "..")!r})
        import pathlib
        from helpers.inference import config
        from mindspeed_prof.recording.recorder import WindowRecorder
        recorder = WindowRecorder(config(pathlib.Path({str(tmp_path)!r})))
        recorder.arm(first=1)
    """, WORKER_WITH_TORCHS_SIGCHLD_HANDLER, SIGCHLD_WHEN_THE_HANDLER_STARTS, """
        recorder.begin(1); recorder.end(1)
        land_sigchld_at("close", in_file="shutdown.py")
        try:
            recorder.close()
        except RuntimeError as exc:
            print(json.dumps({"torch": str(exc)}), flush=True)
    """)
    assert "killed by signal" in last_json(done)["torch"], done.stderr
    data = json.loads((tmp_path / "prof" / "profile_manifest_rank0.json").read_text())
    assert data["exit"] == {"reason": "finished", "detail": None}


def test_the_guard_leaves_with_the_last_recorder():
    done = run_child(WORKER_WITH_TORCHS_SIGCHLD_HANDLER, """
        flush = exits.FlushOnExit(lambda *a, **k: None)
        flush.install()
        guarded = type(signal.getsignal(signal.SIGCHLD)).__name__
        flush.uninstall()
        print(json.dumps({"guarded": guarded,
                          "after": signal.getsignal(signal.SIGCHLD) is torch_like}))
        worker.kill()
    """)
    assert last_json(done) == {"guarded": "ChildGuard", "after": True}


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


@pytest.mark.slow  # child interpreters ended by signals
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


@pytest.mark.slow  # child interpreters ended by signals
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


# -- a signal lands where the interrupted code holds what the flush needs (issue 29 §0) --------

HANG_S = 120  # a child that has not ended by then hangs (a few seconds on a quiet machine)

# A plain loop with a window at iterations 2-3 in a child; the injection makes the signal land
# at one chosen point, where the old handler waited for a lock its own thread held, for good.
LOOP_WITH_A_SIGNAL_AT = """
    import torch
    from mindspeed_prof import ProfilerConfig, profile
    from mindspeed_prof.recording import manifest as manifest_module, session as session_module
    def signal_now():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # the handler has run by now, wherever it was going to run
    where = {where!r}
    if where == "a manifest write":  # the manifest's lock held, its temporary file half written
        real_write = manifest_module.Manifest._write
        def write(self):
            if self.data["status"] == "running" and not self.data["windows"][0]["files"]:
                signal_now()
            return real_write(self)
        manifest_module.Manifest._write = write
    elif where == "the session slot":  # the process's one-session slot held
        class Holder:
            @property
            def closed(self):
                signal_now()
                return True
            def describe(self):
                return "a closed recorder"
        session_module.PROCESS._holder = Holder()
    config = ProfilerConfig(profile=True, profile_step_start=2, profile_step_end=4,
                            profile_save_path={save!r}, profile_backend="torch",
                            profile_ranks=[0])
    with profile(config, train_iters=6, rank=0, world_size=1) as prof:
        for n in range(1, 7):
            torch.randn(4, 4).sum()
            prof.step()
    print("not reached", flush=True)
"""


@pytest.mark.slow  # child interpreters ended by signals
@pytest.mark.parametrize("where", ["a manifest write", "the session slot"])
def test_sigterm_landing_where_the_loop_holds_a_lock_the_flush_takes_still_ends_the_process(
        tmp_path, where):
    # Before: the handler's flush waited for the manifest's (or the slot's) lock, which the
    # code it interrupted held on the same thread: the process never ended (SLURM killed it).
    try:
        done = run_child(LOOP_WITH_A_SIGNAL_AT.format(where=where, save=str(tmp_path)),
                         timeout=HANG_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"SIGTERM landing in {where} hung the process")
    assert done.returncode == -signal.SIGTERM, done.stderr[-2000:]
    assert "not reached" not in done.stdout
    data = json.loads((tmp_path / "profile_manifest_rank0.json").read_text())
    assert data["exit"] == {"reason": "signal", "detail": "SIGTERM"}
    window = data["windows"][0]  # opened at iteration 1 (its warm-up), then cut by the signal
    assert window["cut"]["reason"] == "signal" and window["status"] != "running", window
    assert not [f for f in os.listdir(tmp_path) if ".tmp." in f]


@pytest.mark.slow  # child interpreters ended by signals
def test_sigterm_landing_while_a_second_role_claims_its_manifest_ends_the_process(tmp_path):
    # Two roles in one process: the first records, the second claims its manifest path (a
    # process-wide lock) when the signal lands; the first one's flush releases its own claim.
    done = run_child(f"""
        import torch
        from mindspeed_prof import ProfilerConfig, role_profiler
        from mindspeed_prof.recording import manifest as manifest_module
        class SignallingSet(set):
            def add(self, key):
                if key.endswith(os.path.join("critic", "profile_manifest_rank0.json")):
                    os.kill(os.getpid(), signal.SIGTERM)
                    time.sleep(0.2)
                super().add(key)
        manifest_module._LIVE = SignallingSet()
        config = ProfilerConfig(profile=True, profile_step_start=1, profile_step_end=-1,
                                profile_save_path={str(tmp_path)!r}, profile_backend="torch",
                                profile_ranks=[0])
        actor = role_profiler("actor", config, rank=0, world_size=1)
        with actor.step(1):
            torch.randn(4, 4).sum()
        critic = role_profiler("critic", config, rank=0, world_size=1)
        print("not reached", flush=True)
    """, timeout=HANG_S)
    assert done.returncode == -signal.SIGTERM, done.stderr[-2000:]
    actor = json.loads((tmp_path / "actor" / "profile_manifest_rank0.json").read_text())
    assert actor["exit"] == {"reason": "signal", "detail": "SIGTERM"}


def test_a_recorder_armed_after_another_one_closed_chains_sigterm_to_the_hosts_handler():
    # Before: a close (inside its final flush) left our handler installed in place of the
    # host's; the next recorder then chained to itself and SIGTERM ended in RecursionError,
    # the process going on.
    done = run_child("""
        calls = []
        def host(signum, frame):
            calls.append("host")
            print(json.dumps({"calls": calls}), flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, host)
        put_back = []
        for _ in range(2):
            flush = exits.FlushOnExit(lambda *a, **k: None)
            flush.install()
            with exits.final_flush():  # how a recorder closes
                flush.uninstall()
            put_back.append(signal.getsignal(signal.SIGTERM) is host)
        calls.append(put_back)
        exits.FlushOnExit(lambda reason, detail, wait_timeout=None:
                          calls.append(f"closed: {detail}")).install()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    """)
    assert done.returncode == 3, done.stderr[-2000:]
    assert last_json(done)["calls"] == [[True, True], "closed: SIGTERM", "host"]


@pytest.mark.slow  # child interpreters ended by signals
def test_a_sigterm_whose_host_handler_returns_lets_the_plain_loop_run_on(tmp_path):
    # A host that shuts down by itself notes SIGTERM and ends its loop later: the profile is
    # flushed at the signal, and the loop's next prof.step() must not fail the loop.
    done = run_child(f"""
        import torch
        from mindspeed_prof import ProfilerConfig, profile
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        config = ProfilerConfig(profile=True, profile_step_start=2, profile_step_end=5,
                                profile_save_path={str(tmp_path)!r}, profile_backend="torch",
                                profile_ranks=[0])
        with profile(config, train_iters=6, rank=0, world_size=1) as prof:
            for n in range(1, 7):
                torch.randn(4, 4).sum()
                if n == 3:
                    os.kill(os.getpid(), signal.SIGTERM)
                prof.step()
        print(json.dumps({{"loop": "ran on"}}), flush=True)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert last_json(done) == {"loop": "ran on"}
    data = json.loads((tmp_path / "profile_manifest_rank0.json").read_text())
    assert data["exit"] == {"reason": "signal", "detail": "SIGTERM"}


# -- a signal the host ignores stays ignored (issue 31 §3) --------------------------------------

@pytest.mark.slow  # child interpreters ended by signals
def test_a_process_that_ignores_sigterm_keeps_profiling_through_one(tmp_path):
    # Before: our handler replaced the ignored SIGTERM, flushed (the window cut, profiling over)
    # and chained to "ignore": the job went on, unprofiled, for a signal it had chosen to ignore.
    done = run_child(f"""
        import torch
        from mindspeed_prof import ProfilerConfig, profile
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        config = ProfilerConfig(profile=True, profile_step_start=2, profile_step_end=5,
                                profile_save_path={str(tmp_path)!r}, profile_backend="torch",
                                profile_ranks=[0])
        with profile(config, train_iters=6, rank=0, world_size=1) as prof:
            for n in range(1, 7):
                torch.randn(4, 4).sum()
                if n == 3:
                    os.kill(os.getpid(), signal.SIGTERM)
                prof.step()
        print(json.dumps({{"ignored": signal.getsignal(signal.SIGTERM) == signal.SIG_IGN}}))
    """)
    assert last_json(done) == {"ignored": True}
    data = json.loads((tmp_path / "profile_manifest_rank0.json").read_text())
    assert data["exit"]["reason"] == "finished" and data["status"] == "complete", data
    assert data["windows"][0]["iterations_recorded"] == [2, 3, 4]


def test_an_ignored_sigint_stays_ignored_during_the_final_flush():
    # A job started in the background by a shell without job control ignores SIGINT: the flush
    # neither takes it over nor reports it as held and delivered.
    done = run_child("""
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        exits.FlushOnExit(lambda *a, **k: None).install()
        with exits.final_flush() as events:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)
        print(json.dumps({"events": events.as_dict(),
                          "ignored": signal.getsignal(signal.SIGINT) == signal.SIG_IGN}))
    """)
    assert last_json(done) == {"events": {}, "ignored": True}


def test_ctrl_c_twice_interrupts_a_final_flush_inside_a_units_boundary():
    # The unit's boundary defers our handlers; a person insisting still interrupts a flush that
    # hangs there (the window's last step saving its trace to a dead mount).
    done = run_child("""
        exits.install_signal_flush(pin=True)
        try:
            with exits.signal_safe:
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


class _ReenteredStream:
    """What sys.stderr raises when a signal handler writes to it while the code it interrupted
    is inside that stream's own write (CPython's BufferedWriter: "reentrant call")."""

    def __init__(self, fd):
        self.fd = fd

    def write(self, text):
        raise RuntimeError("reentrant call inside <_io.BufferedWriter name='<stderr>'>")

    def flush(self):
        pass

    def fileno(self):
        return self.fd


def test_a_flush_message_written_inside_the_consoles_own_write_still_reaches_it(
        monkeypatch, capfd):
    # Before: the RuntimeError escaped the log and ended the signal's flush half way.
    from mindspeed_prof import log

    monkeypatch.setattr(sys, "stderr", _ReenteredStream(sys.__stderr__.fileno()))
    log.error("the trace was still being written", rank=0)
    assert capfd.readouterr().err == \
        "[mindspeed_prof rank 0] ERROR: the trace was still being written\n"


def test_a_profiler_message_printed_inside_the_consoles_own_write_still_reaches_it(capfd):
    # torch_npu prints while a signal's flush stops it; stdout is our error-capturing tee. The
    # code the signal interrupted may be inside stdout's own write (a full pipe to the
    # launcher): before, the RuntimeError failed the profiler's stop and lost its trace.
    from mindspeed_prof.backends.errorcapture import _Tee

    tee = _Tee(_ReenteredStream(sys.__stdout__.fileno()))
    assert tee.write("[INFO] profiler stopped\n") == len("[INFO] profiler stopped\n")
    assert capfd.readouterr().out == "[INFO] profiler stopped\n"


# -- a SIGTERM has a deadline (issue 35 §2) ----------------------------------------------------

BLOCKED_MANIFEST_WRITE = """
    import json, os, signal, sys, torch
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from mindspeed_prof import ProfilerConfig, profile
    from mindspeed_prof.recording import sections
    sections.SIGNAL_FLUSH_TIMEOUT_S = 1  # the flush bound, short for the test
    save = sys.argv[1]
    config = ProfilerConfig(profile=True, profile_step_start=3, profile_step_end=5,
                            profile_save_path=save, profile_backend="torch", profile_ranks=[0])
    with profile(config, train_iters=6, rank=0, world_size=1) as prof:
        for n in range(1, 7):
            if n == 2:
                # A stalled mount of the save path: the next manifest write never returns.
                os.mkfifo(os.path.join(save, f"profile_manifest_rank0.json.tmp.{os.getpid()}"))
                print("blocking", flush=True)
            torch.randn(4, 4).sum()
            prof.step()
    print("not reached", flush=True)
"""


@pytest.mark.slow  # child interpreters ended by signals
def test_sigterm_behind_a_manifest_write_that_never_returns_ends_the_process_at_its_deadline(
        tmp_path):
    # Before: the write runs in a section that defers SIGTERM; blocked in open() on the FIFO,
    # it never ended, and SIGTERM twice left the process alive (killed here after 30 s).
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(BLOCKED_MANIFEST_WRITE),
                              str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        while child.stdout.readline().strip() != "blocking":
            assert child.poll() is None, child.communicate()
        time.sleep(1.0)  # inside the blocked write now
        child.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        child.send_signal(signal.SIGTERM)
        began = time.monotonic()
        try:
            out, err = child.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("SIGTERM twice did not end a process blocked in a manifest write")
        took = time.monotonic() - began
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert took < 1 + 3.0 + 5, took  # the flush bound and the grace, from the first SIGTERM
    assert "not reached" not in out
    manifest = tmp_path / "profile_manifest_rank0.json"
    assert f"writing {manifest} did not finish" in err, err[-2000:]
    assert "SIGTERM arrived 4 s ago" in err and "exit code 143" in err
