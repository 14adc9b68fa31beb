"""torch.profiler backend (CPU, plus CUDA on a real GPU): one chrome trace per rank and window.

Where the window-end step goes (torch 2.13 CPU, 6 steps with shapes + stack, a 100 MB trace;
``python -m benchmarks.window_end_breakdown --stack``, BENCHMARKS.md figure 7): torch's stop
builds kineto's result objects (``_disable_profiler``: ~10-20 ms of CPU per MB of trace, about a
third of it the kernel zeroing fresh pages), kineto's ``save`` writes the JSON (~4-5 ms per MB),
and freeing the result costs ~4 ms per MB more; our file list and manifest take 5-15 ms. All of
the torch part holds the GIL, kineto's save even through its file I/O (a save into a slowly read
FIFO stalled the main thread for the whole 2 s), so the export thread (``--profile-analyse
async``) takes almost nothing off the training loop.

A forked-child export (for slow storage) was tried and removed: on CPU training it saved
nothing over the iterations around the window end (BENCHMARKS.md figure 7: the rank still frees
the result under the GIL, the fork copies page tables, the next step pays copy-on-write), and it
was never measured on a GPU. The stop itself cannot leave the training thread: torch has no way
to end a session without building its results, and it must run on the thread that started it.

CUDA: the stop also synchronises the device and drains CUPTI's buffers. NPU: see ``npu.py``; torch_npu's stop flushes raw data, and with
``async`` its parse runs in torch_npu's own child process.
"""

import os
import threading
import time
import warnings

import torch

from .. import layout
from ..config.profiler_config import NPU_KEYWORDS
from . import trace_steps
from .base import Backend, not_applicable

# Knobs that only mean something to torch_npu: those that set a torch_npu keyword.
NPU_ONLY = tuple(NPU_KEYWORDS)


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


class TorchBackend(Backend):
    name = "torch"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._prof = None
        self._started = False
        self._stopped = False
        self._paths = []
        self._threads = []
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
        self._prof = torch.profiler.profile(
            activities=_activities(), schedule=schedule, on_trace_ready=self._on_trace_ready,
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
        thread = threading.Thread(target=self._export, args=(prof, path),
                                  name=f"mindspeed_prof-export-rank{self.rank}", daemon=False)
        self._threads.append(thread)
        thread.start()

    def _export(self, prof, path):
        error = None
        began = time.perf_counter()
        try:
            prof.export_chrome_trace(path)
        except Exception as exc:  # noqa: BLE001 - a failed export must not end the training
            error = str(exc)
        if self.config.profile_analyse == "sync":
            self.export_s = (self.export_s or 0.0) + time.perf_counter() - began
        self._finish_export(path, error, prof)

    def _finish_export(self, path, error, prof=None):
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
                _release(prof)
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


def _release(prof):
    """Drop what a failed export holds: kineto keeps the trace's ``{path}.tmp`` open in the
    profiler's result after a failed write, so the file we then delete kept its blocks and a
    full disk stayed full (every later manifest write failed) for as long as the backend lived."""
    inner = getattr(prof, "profiler", None)
    if inner is not None and getattr(inner, "kineto_results", None) is not None:
        inner.kineto_results = None
