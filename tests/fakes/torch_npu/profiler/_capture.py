"""Fake of the native collector: a real torch CPU profiler records the ops of the window.

One CaptureSession serves one run directory. It is driven by _ProfInterface through
warmup/start/stop/finalize, like the native calls it replaces, and at finalize it
writes the raw FRAMEWORK/ and PROF_*/ data that the parser later turns into
ASCEND_PROFILER_OUTPUT/. torch's profiler always records shapes underneath, because
a real NPU knows kernel shapes even when the user did not ask for record_shapes.
"""

import json
import os
import random
import string
import time
from datetime import datetime, timezone

import torch
from torch_npu import npu
from torch_npu._C import _mstx
from torch_npu._C._profiler import ProfilerActivity
from . import _constants as C
from . import _device_model, _raw_format
from ._paths import make_dir
from .experimental_config import tx_enabled


def _cann_dir_name() -> str:
    stamp = datetime.now(tz=timezone.utc).astimezone().strftime("%Y%m%d%H%M%S%f")[:-3]
    letters = "".join(random.choice(string.ascii_uppercase) for _ in range(16))
    return f"PROF_000001_{stamp}_{letters}"


def _convert_trace(trace: dict) -> dict:
    """Kineto's chrome trace -> absolute-ns records the fake raw format stores."""
    base_ns = int(trace.get("baseTimeNanoseconds", 0))

    def to_ns(us):
        return base_ns + int(round(float(us) * 1000))

    ops, python_frames, memory = [], [], []
    for event in trace.get("traceEvents", []):
        cat, phase, args = event.get("cat"), event.get("ph"), event.get("args", {})
        if phase == "X" and cat in ("cpu_op", "user_annotation"):
            ops.append({
                "name": event["name"], "cat": cat, "tid": event["tid"],
                "ts_ns": to_ns(event["ts"]), "dur_ns": int(round(float(event.get("dur", 0)) * 1000)),
                "seq": args.get("Sequence number", -1), "fwd_tid": args.get("Fwd thread id", 0),
                "input_dims": args.get("Input Dims"), "input_types": args.get("Input type"),
            })
        elif phase == "X" and cat == "python_function":
            python_frames.append({"name": event["name"], "tid": event["tid"], "ts_ns": to_ns(event["ts"]),
                                  "dur_ns": int(round(float(event.get("dur", 0)) * 1000))})
        elif event.get("name") == "[memory]":
            memory.append({
                "ts_ns": to_ns(event["ts"]), "tid": event.get("tid"), "addr": args.get("Addr", 0),
                "bytes": args.get("Bytes", 0), "total_allocated": args.get("Total Allocated", 0),
                "total_reserved": args.get("Total Reserved", 0),
            })
    ops.sort(key=lambda op: (op["ts_ns"], -op["dur_ns"]))
    for cid, op in enumerate(ops, start=1):
        op["cid"] = cid
    return {"ops": ops, "python_frames": python_frames, "memory": memory}


class CaptureSession:
    def __init__(self, prof_path: str, activities: set, record_shapes: bool, profile_memory: bool,
                 with_stack: bool, with_flops: bool, with_modules: bool, experimental_config) -> None:
        self.prof_path = prof_path
        self.activities = set(activities)
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.config = experimental_config
        self.device_id = npu.current_device()
        self._torch_profiler = None
        self._recording = False
        self._captured = None
        self._cann_dir = ""
        self._start_ns = 0
        self._mstx = []  # the mstx marks and ranges this capture collected
        make_dir(_raw_format.framework_dir(prof_path))

    def take_mstx(self, event: dict) -> None:
        """An mstx mark or finished range while this capture records (from _C._mstx)."""
        include = self.config._mstx_domain_include
        if include and event["domain"] not in include:
            return
        if not include and event["domain"] in self.config._mstx_domain_exclude:
            return
        self._mstx.append(event)

    @property
    def _collects_device_data(self) -> bool:
        return ProfilerActivity.NPU in self.activities

    def warmup(self) -> None:
        if self._torch_profiler is None:
            self._torch_profiler = torch.profiler._KinetoProfile(
                activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                profile_memory=self.profile_memory, with_stack=self.with_stack,
                with_flops=self.with_flops, with_modules=self.with_modules)
            self._torch_profiler.prepare_trace()

    def start(self) -> None:
        self.warmup()
        if self._recording:
            return
        if self._collects_device_data and not self._cann_dir:
            self._cann_dir = os.path.join(self.prof_path, _cann_dir_name())
            make_dir(os.path.join(self._cann_dir, f"device_{self.device_id}", "data"))
            make_dir(os.path.join(self._cann_dir, "host", "data"))
        self._start_ns = time.time_ns()
        self._torch_profiler.start_trace()
        self._recording = True
        if tx_enabled(self.config) and self._collects_device_data:
            _mstx.add_collector(self)  # msproftx data comes with the CANN collection

    def stop(self) -> None:
        profiler, was_recording = self._torch_profiler, self._recording
        self._torch_profiler, self._recording = None, False
        _mstx.remove_collector(self)
        if profiler is None:
            return
        profiler.stop_trace()
        if not was_recording:
            return
        scratch = os.path.join(_raw_format.framework_dir(self.prof_path), ".torch_trace.json")
        profiler.export_chrome_trace(scratch)
        try:
            with open(scratch, encoding="utf-8") as handle:
                self._captured = _convert_trace(json.load(handle))
        finally:
            os.remove(scratch)

    def discard(self) -> None:
        """Tear the torch profiler down without keeping data, so no profiler leaks out of a failure."""
        profiler, self._torch_profiler, self._recording = self._torch_profiler, None, False
        _mstx.remove_collector(self)
        if profiler is not None:
            try:
                profiler.stop_trace()
            except Exception:
                pass

    def finalize(self) -> None:
        if self._torch_profiler is not None:
            # Stopping during WARMUP finalizes a profiler that was prepared but never stopped.
            self.stop()
        captured = self._captured or {"ops": [], "python_frames": [], "memory": []}
        if ProfilerActivity.CPU in self.activities:
            self._write_framework(captured)
        if self._cann_dir:
            self._write_cann(captured)

    def _write_framework(self, captured: dict) -> None:
        fwk = _raw_format.framework_dir(self.prof_path)
        ops = captured["ops"]
        if not self.record_shapes:
            ops = [dict(op, input_dims=None, input_types=None) for op in ops]
        _raw_format.write_blob(os.path.join(fwk, _raw_format.OP_RANGE), {"pid": os.getpid(), "ops": ops})
        _raw_format.write_blob(os.path.join(fwk, _raw_format.OP_MARK), {"pid": os.getpid(), "marks": []})
        if self.profile_memory:
            _raw_format.write_blob(os.path.join(fwk, _raw_format.MEMORY_USAGE), captured["memory"])
        if self.with_stack:
            frames = captured["python_frames"]
            _raw_format.write_blob(os.path.join(fwk, _raw_format.PYTHON_TRACER_FUNC), frames)
            names = sorted({frame["name"] for frame in frames})
            _raw_format.write_blob(os.path.join(fwk, _raw_format.PYTHON_TRACER_HASH), names)

    def _write_cann(self, captured: dict) -> None:
        level = self.config._profiler_level
        kernels = [] if level == C.LEVEL_NONE else _device_model.build_kernels(captured["ops"])
        device_dir = os.path.join(self._cann_dir, f"device_{self.device_id}")
        _raw_format.write_blob(
            os.path.join(device_dir, "data", _raw_format.DEVICE_TASKS.format(device=self.device_id)), kernels)
        _raw_format.write_json(os.path.join(device_dir, f"info.json.{self.device_id}"),
                               {"devices": str(self.device_id), "platform": npu.DEVICE_NAME,
                                "collection_start_ns": self._start_ns, "collection_end_ns": time.time_ns()})
        apis = _device_model.build_api_events(captured["ops"], kernels, level)
        host_dir = os.path.join(self._cann_dir, "host")
        _raw_format.write_blob(os.path.join(host_dir, "data", _raw_format.HOST_APIS), apis)
        if self._mstx:
            _raw_format.write_blob(os.path.join(host_dir, "data", _raw_format.HOST_MSTX),
                                   {"pid": os.getpid(), "events": self._mstx})
        _raw_format.write_json(os.path.join(host_dir, "info.json"),
                               {"pid": os.getpid(), "hostname": os.uname().nodename})
