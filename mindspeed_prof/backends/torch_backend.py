"""torch.profiler backend (CPU, plus CUDA on a real GPU): one chrome trace per rank and window.

Where the window-end step goes (torch 2.13 CPU, 6 steps with shapes + stack, a 100 MB trace;
``python -m benchmarks.window_end_breakdown --stack``, BENCHMARKS.md figure 7): torch's stop
builds kineto's result objects (``_disable_profiler``: ~10-20 ms of CPU per MB of trace, about a
third of it the kernel zeroing fresh pages), kineto's ``save`` writes the JSON (~4-5 ms per MB),
and freeing the result costs ~4 ms per MB more; our file list and manifest take 5-15 ms. All of
the torch part holds the GIL, kineto's save even through its file I/O (a save into a slowly read
FIFO stalled the main thread for the whole 2 s), so the export thread (``--profile-analyse
async``) takes almost nothing off the training loop.

``MINDSPEED_PROF_EXPORT_FORK=1`` (Linux, CPU traces) writes async traces from a forked child
instead: slow or stalled storage then never holds the rank. It is not the default because on CPU
training it saves nothing over the three iterations around the window end (measured, figure 7):
the rank still frees the result (~0.4 s for 100 MB, under the GIL), the fork copies page tables
(25-75 ms) and the next step pays copy-on-write (parameters, gradients, optimizer state). A
thread waits for the child and reports as the in-process export does (``wait()``, ``on_saved``,
the manifest's ``parsing``/``complete``); the child blocks SIGTERM/SIGINT (torchrun signals the
whole group; the parent decides how long to wait) and writes a byte-identical trace. The stop
itself cannot leave the training thread: torch has no way to end a session without building its
results, and it must run on the thread that started it.

CUDA: the stop also synchronises the device and drains CUPTI's buffers; the fork is not offered
with CUDA activity (kineto may query the device while saving, which a forked child must not do;
not verified on a GPU). NPU: see ``npu.py``; torch_npu's stop flushes raw data, and with
``async`` its parse runs in torch_npu's own child process.
"""

import os
import signal
import sys
import threading
import time
import warnings

import torch

from .. import layout
from . import trace_steps
from .base import Backend, not_applicable

# Knobs that only mean something to torch_npu.
NPU_ONLY = ("profile_level", "profile_export_type", "profile_data_simplification",
            "profile_aic_metrics", "profile_l2_cache", "profile_op_attr", "profile_mstx",
            "profile_host_sys", "profile_sys_io", "profile_sys_interconnection",
            "profile_gc_detect_threshold")


def ignored_flags(config):
    flags = not_applicable(config, NPU_ONLY)
    if config.profile_analyse == "offline":
        flags.append("--profile-analyse offline")
    return flags


def _activities():
    activities = [torch.profiler.ProfilerActivity.CPU]
    # A CPU build of torch cannot trace CUDA even when a shim makes torch.cuda look available.
    gpu_build = torch.version.cuda is not None or getattr(torch.version, "hip", None) is not None
    if gpu_build and _driver_device_count() > 0:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return activities


def _driver_device_count():
    """The CUDA devices CUPTI can trace, as the driver counts them.

    ``torch.cuda.is_available()`` / ``device_count()`` are Python functions that a CPU shim
    rebinds to run CUDA-minded code without a GPU (Megatron's ``initialize_megatron`` insists
    on CUDA); with a CUDA build of torch and no driver, CUDA activity then floods stderr with
    kineto's "Failed to record CUDA event". The C binding asks the driver itself (honouring
    CUDA_VISIBLE_DEVICES, as device_count does), so a real GPU host gets CUDA activity as before."""
    count = getattr(torch._C, "_cuda_getDeviceCount", None)
    if count is None:  # a build without the binding: the public answer
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    try:
        return int(count())
    except RuntimeError:  # no driver, or a broken one
        return 0


# 1: async traces are written by a forked child (for slow storage, see above); else by a thread.
EXPORT_FORK_ENV = "MINDSPEED_PROF_EXPORT_FORK"


def _may_fork_export(activities):
    """Whether the trace of a window recording ``activities`` may be written by a forked child.

    Linux only (fork with threads is unsafe on macOS; Windows has none), and CPU traces only:
    with CUDA activity kineto may still query the device while saving, which a forked child
    must not do (unverified on a GPU, so not done)."""
    return (sys.platform.startswith("linux") and hasattr(os, "fork")
            and os.environ.get(EXPORT_FORK_ENV) == "1"
            and list(activities) == [torch.profiler.ProfilerActivity.CPU])


def _export_and_exit(prof, path, read_end, write_end):
    """The forked child: save the trace, tell the parent what failed, never return."""
    code = 1
    try:
        os.close(read_end)
        # torchrun signals the whole process group: the parent decides how long to wait for us.
        # Blocked (never delivered, dropped at _exit) rather than ignored: works on any thread.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        prof.export_chrome_trace(path)
        code = 0
    except BaseException as exc:  # noqa: BLE001 - reported by the parent
        try:
            os.write(write_end, (str(exc) or type(exc).__name__).encode()[:4096])
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(code)  # no atexit, no flush of buffers copied from the parent


class TorchBackend(Backend):
    name = "torch"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._prof = None
        self._started = False
        self._stopped = False
        self._paths = []
        self._threads = []
        self._fork_export = False
        self.never_ran = None  # a ProfilerStep opened for a unit that did not run: left out

    @property
    def step_num(self):
        return self._prof.step_num

    def start(self, iteration):
        s = self.schedule
        with warnings.catch_warnings():
            # A session per request or RL step, or a window right after another, has no warm-up
            # unit by design (the planner decided it); torch's "won't be using warmup" would
            # repeat that decision as a warning in every user's log.
            warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
            schedule = torch.profiler.schedule(wait=s.wait, warmup=s.warmup, active=s.active,
                                               repeat=s.repeat, skip_first=s.skip_first)
        config = self.config
        activities = _activities()
        self._fork_export = _may_fork_export(activities)
        self._prof = torch.profiler.profile(
            activities=activities, schedule=schedule, on_trace_ready=self._on_trace_ready,
            record_shapes=config.profile_record_shapes, profile_memory=config.profile_with_memory,
            with_stack=config.profile_with_stack, with_flops=config.profile_with_flops,
            with_modules=config.profile_with_modules)
        # Number the profiler's steps as the training log numbers iterations, so the trace's
        # ProfilerStep#N is iteration N (torchtitan does the same after a resume).
        self._prof.step_num = iteration
        self._prof.current_action = schedule(iteration)
        self._prof.start()
        self._started = True

    def step(self):
        self._prof.step()

    def stop(self):
        if self._prof is None or self._stopped:
            return
        self._stopped = True
        if self._started:
            self._prof.stop()
        else:
            # start() failed (already reported): tear down whatever it left enabled, but a
            # profiler that never started also fails to stop, and that second error says nothing.
            try:
                self._prof.stop()
            except Exception:  # noqa: BLE001
                pass
        if not self._threads and not self._paths:
            self._mark_saved()  # stopped before any recorded step: nothing to write

    def _on_trace_ready(self, prof):
        os.makedirs(self.save_dir, exist_ok=True)
        path = os.path.join(self.save_dir, layout.TORCH_TRACE_TEMPLATE.format(
            rank=self.rank, time_ns=time.time_ns()))
        self._paths.append(path)
        if self.config.profile_analyse == "sync":
            self._export(prof, path)
            return
        if self._fork_export and self._export_in_child(prof, path):
            return
        thread = threading.Thread(target=self._export, args=(prof, path),
                                  name=f"mindspeed_prof-export-rank{self.rank}", daemon=False)
        self._threads.append(thread)
        thread.start()

    def _export(self, prof, path):
        error = None
        try:
            prof.export_chrome_trace(path)
        except Exception as exc:  # noqa: BLE001 - a failed export must not end the training
            error = str(exc)
        self._finish_export(path, error)

    def _export_in_child(self, prof, path):
        """Write the trace from a forked copy of this process; False when it cannot fork.

        The child owns the only work left (kineto's JSON save, which holds the GIL and so
        stalls every thread here); this process goes on at once and a thread waits for it."""
        read_end, write_end = os.pipe()
        try:
            with warnings.catch_warnings():  # Python 3.12+: "multi-threaded, fork() may deadlock"
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError as exc:
            os.close(read_end)
            os.close(write_end)
            self.report("warning", "export", f"could not start the export process ({exc}); "
                                             f"writing the trace from this process instead")
            return False
        if pid == 0:
            _export_and_exit(prof, path, read_end, write_end)
        os.close(write_end)
        thread = threading.Thread(target=self._reap, args=(pid, read_end, path),
                                  name=f"mindspeed_prof-export-rank{self.rank}", daemon=False)
        self._threads.append(thread)
        thread.start()
        return True

    def _reap(self, pid, read_end, path):
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # reaped by someone else (SIGCHLD ignored): it has ended
            status = None
        # Read only once the child has ended: a process another thread forked meanwhile may
        # hold the pipe's write end open for its whole life.
        os.set_blocking(read_end, False)
        try:
            said = os.read(read_end, 4096).decode(errors="replace")  # the child's error, if any
        except OSError:
            said = ""
        finally:
            os.close(read_end)
        if status is None:
            self._finish_export(path, said or None)  # judged by the file
            return
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            said = f"the export process died of signal {-code}"
        elif code and not said:
            said = f"the export process exited with status {code}"
        self._finish_export(path, said if code else None)

    def _finish_export(self, path, error):
        try:
            if error is None and self.never_ran is not None and os.path.isfile(path):
                try:
                    trace_steps.remove_step(path, self.never_ran)
                except OSError as exc:
                    error = f"leaving out ProfilerStep#{self.never_ran} failed: {exc}"
            if error is None and (not os.path.isfile(path) or not os.path.getsize(path)):
                # kineto reports a failed write (full disk, lost mount) only as "Failed to write
                # to log file!" on stderr, and returns normally.
                error = "torch.profiler returned without writing it"
            if error is not None:
                self.failed = True
                self.report("error", "export", f"writing {path} failed: {error}; check free "
                                               f"space and permissions of --profile-save-path")
                for partial in (path, path + ".tmp"):  # kineto writes {path}.tmp, then renames
                    try:
                        os.unlink(partial)
                    except OSError:
                        pass
        finally:
            self._mark_saved()

    def outputs(self):
        return [p for p in self._paths if os.path.exists(p)]

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(remaining)
        return not any(t.is_alive() for t in self._threads)
