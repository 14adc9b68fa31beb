"""torch.profiler backend (CPU, plus CUDA on a real GPU): one chrome trace per rank and window.

The trace is exported by a background thread by default (``--profile-analyse async``), so a slow
write (network storage, a full disk's retries) does not hold the profiled rank back. What stays on
the training thread either way: torch's ``stop_trace`` at the window's last step, and most of
kineto's ``save``, which holds the GIL (torch 2.13 CPU, measured: ``Thread.start`` returned after
54 of the export's 60 ms). Together about 12 ms per MB of trace (a 29 MB trace: 240 ms
stop_trace + 120 ms export, async and sync alike), far below any collective timeout.
"""

import os
import threading
import time

import torch

from .. import layout
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
    if gpu_build and torch.cuda.is_available() and torch.cuda.device_count() > 0:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return activities


class TorchBackend(Backend):
    name = "torch"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._prof = None
        self._started = False
        self._stopped = False
        self._paths = []
        self._threads = []

    @property
    def step_num(self):
        return self._prof.step_num

    def start(self, iteration):
        s = self.schedule
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
        try:
            prof.export_chrome_trace(path)
            if not os.path.isfile(path) or not os.path.getsize(path):
                # kineto reports a failed write (full disk, lost mount) only as "Failed to write
                # to log file!" on stderr, and returns normally.
                raise OSError("torch.profiler returned without writing it")
        except Exception as exc:  # noqa: BLE001 - a failed export must not end the training
            self.failed = True
            self.report("error", "export", f"writing {path} failed: {exc}; check free space and "
                                           f"permissions of --profile-save-path")
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
