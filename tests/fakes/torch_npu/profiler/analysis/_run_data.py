"""Everything the views need from one run directory, loaded once: config, ops, kernels, steps."""

import json
import os
import re
from dataclasses import dataclass, field

from .. import _constants as C
from .. import _raw_format
from .._console import print_error_msg

_STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass(frozen=True)
class RunConfig:
    activities: tuple = ()
    level: str = C.LEVEL0
    aic_metrics: str = C.AIC_NONE
    export_type: tuple = (C.TEXT,)
    data_simplification: object = True
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    rank: object = None
    found: bool = False

    @property
    def cpu(self) -> bool:
        return C.CPU_ACTIVITY in self.activities

    @property
    def npu(self) -> bool:
        return C.NPU_ACTIVITY in self.activities

    @classmethod
    def load(cls, run_dir: str, export_type_override=None) -> "RunConfig":
        path = _raw_format.find_info_file(run_dir)
        info = {}
        if path:
            with open(path, encoding="utf-8") as handle:
                info = json.load(handle)
        common = info.get("config", {}).get("common_config", {})
        experimental = info.get("config", {}).get("experimental_config", {}) or {}
        activities = list(common.get("activities", []))
        if C.CPU_ACTIVITY in activities and not os.path.isdir(_raw_format.framework_dir(run_dir)):
            print_error_msg("ProfilerActivity.CPU is set in activities, but FWK Profiling data does not exist.")
            activities.remove(C.CPU_ACTIVITY)
        if C.NPU_ACTIVITY in activities and not _raw_format.find_cann_dir(run_dir):
            print_error_msg("ProfilerActivity.NPU is set in activities, but CANN Profiling data does not exist.")
            activities.remove(C.NPU_ACTIVITY)
        export_type = export_type_override or experimental.get("_export_type") or [C.TEXT]
        return cls(
            activities=tuple(activities),
            level=experimental.get("_profiler_level", C.LEVEL0),
            aic_metrics=experimental.get("_aic_metrics", C.AIC_NONE),
            export_type=tuple(export_type),
            data_simplification=experimental.get("_data_simplification", True),
            record_shapes=bool(common.get("record_shapes", False)),
            profile_memory=bool(common.get("profile_memory", False)),
            with_stack=bool(common.get("with_stack", False)),
            rank=info.get("rank_id"),
            found=bool(path),
        )


@dataclass
class RunData:
    run_dir: str
    config: RunConfig
    pid: int = 0
    ops: list = field(default_factory=list)
    python_frames: list = field(default_factory=list)
    memory: list = field(default_factory=list)
    kernels: list = field(default_factory=list)
    apis: list = field(default_factory=list)
    mstx: list = field(default_factory=list)  # host mstx marks and ranges (msproftx)
    mstx_pid: int = 0
    device_id: int = -1
    cann_dir: str = ""

    @property
    def steps(self) -> list:
        """[(step id, start ns, end ns)] from the ProfilerStep#N markers, in time order."""
        found = []
        for op in self.ops:
            match = _STEP_NAME.match(op["name"])
            if match:
                found.append((int(match.group(1)), op["ts_ns"], op["ts_ns"] + op["dur_ns"]))
        return sorted(found, key=lambda step: step[1])

    def step_of(self, ts_ns: int):
        for step_id, start, end in self.steps:
            if start <= ts_ns <= end:
                return step_id
        return None

    @classmethod
    def load(cls, run_dir: str, config: RunConfig) -> "RunData":
        data = cls(run_dir=run_dir, config=config)
        op_file = os.path.join(_raw_format.framework_dir(run_dir), _raw_format.OP_RANGE)
        if config.cpu and os.path.isfile(op_file):
            payload = _raw_format.read_blob(op_file)
            data.pid, data.ops = payload.get("pid", 0), payload.get("ops", [])
            stack_file = os.path.join(_raw_format.framework_dir(run_dir), _raw_format.PYTHON_TRACER_FUNC)
            if os.path.isfile(stack_file):
                data.python_frames = _raw_format.read_blob(stack_file)
            memory_file = os.path.join(_raw_format.framework_dir(run_dir), _raw_format.MEMORY_USAGE)
            if os.path.isfile(memory_file):
                data.memory = _raw_format.read_blob(memory_file)
        data.cann_dir = _raw_format.find_cann_dir(run_dir)
        if config.npu:
            for device_id, device_dir in _raw_format.find_device_dirs(data.cann_dir):
                task_file = os.path.join(device_dir, "data", _raw_format.DEVICE_TASKS.format(device=device_id))
                if os.path.isfile(task_file):
                    data.device_id = device_id
                    data.kernels.extend(_raw_format.read_blob(task_file))
            host = _raw_format.host_dir(data.cann_dir)
            api_file = os.path.join(host, "data", _raw_format.HOST_APIS) if host else ""
            if api_file and os.path.isfile(api_file):
                data.apis = _raw_format.read_blob(api_file)
            tx_file = os.path.join(host, "data", _raw_format.HOST_MSTX) if host else ""
            if tx_file and os.path.isfile(tx_file):
                payload = _raw_format.read_blob(tx_file)
                data.mstx, data.mstx_pid = payload.get("events", []), payload.get("pid", 0)
        return data


def ns_to_us_str(ns: int) -> str:
    """Exact µs with 3 decimals, as torch_npu writes timestamps (no float rounding)."""
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def us_str_to_ns(text: str) -> int:
    text = str(text).strip()
    whole, _, frac = text.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3] or 0)


def ns_to_us(ns: int) -> float:
    return round(ns / 1000, 3)
