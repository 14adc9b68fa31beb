"""_ProfInterface: parameter checks, the native-call sequence, and the files written at finalize.

profile and _KinetoProfile both build one of these; profile builds it twice (once
through super().__init__), so warnings raised while a default config is built are
printed twice, exactly like the wheel.
"""

import os
import time
import uuid

import torch
from torch_npu import _faults, _version, npu
from torch_npu._C._profiler import ProfilerActivity, _supported_npu_activities
from . import _constants as C
from . import _raw_format
from ._capture import CaptureSession
from ._console import no_exception_func, print_warn_msg
from .analysis import NpuProfiler
from ._paths import ProfPathCreator
from .experimental_config import _ExperimentalConfig

__all__ = ["supported_activities"]

_ENV_VARIABLES = (
    "ASCEND_GLOBAL_LOG_LEVEL", "HCCL_RDMA_TC", "HCCL_RDMA_SL", "ACLNN_CACHE_LIMIT", "HOST_CACHE_CAPACITY",
    "ASCEND_ENHANCE_ENABLE", "PYTORCH_NPU_ALLOC_CONF", "ASCEND_LAUNCH_BLOCKING", "HCCL_ALGO",
)
_MSPROF_STATIC_ENV = "PROFILER_SAMPLECONFIG"
_MSPROF_DYNAMIC_ENV = "PROFILING_MODE"
_msprof_env_verdict = None


def _msprof_env_is_clear() -> bool:
    """From 2.11 the API does nothing while the msprof command-line tool drives profiling."""
    global _msprof_env_verdict
    if not _version.GUARDS_MSPROF_ENV:
        return True
    if _msprof_env_verdict is None:
        static_env, dynamic_env = os.getenv(_MSPROF_STATIC_ENV), os.getenv(_MSPROF_DYNAMIC_ENV)
        if static_env:
            print_warn_msg("If performance data is collected using the 'msprof' tool. "
                           "torch_npu profiler api is not effective.")
        if dynamic_env:
            print_warn_msg(f"Environment variable '{_MSPROF_DYNAMIC_ENV}' is set. torch_npu profiler api is "
                           f"not effective. Please execute 'unset {_MSPROF_DYNAMIC_ENV}'.")
        _msprof_env_verdict = not (static_env or dynamic_env)
    return _msprof_env_verdict


def collect_env_vars() -> dict:
    return {"ENV_VARIABLES": {name: os.environ.get(name, "") for name in _ENV_VARIABLES}}


def current_rank():
    """RANK from the environment stays a string; torch.distributed's rank is an int."""
    rank = os.environ.get("RANK")
    if rank is None and torch.distributed.is_available() and torch.distributed.is_initialized():
        rank = torch.distributed.get_rank()
    return rank


class _ProfInterface:
    TRACE_ID_KEY = "trace_id"
    MAX_TRACE_ID_LEN = 1024

    def __init__(self, activities=None, record_shapes=False, profile_memory=False, with_stack=False,
                 with_flops=False, with_modules=False, schedule=None, metadata=None,
                 experimental_config=None, custom_trace_id_callback=None) -> None:
        self._is_env_valid = _msprof_env_is_clear()
        self.prof_path = ""
        self.syscnt_enable = False
        self.freq = 100
        self.start_cnt = 0
        self.start_monotonic = 0
        self.activities = set(activities) if activities else supported_activities()
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.experimental_config = experimental_config if experimental_config is not None else _ExperimentalConfig()
        self.schedule = schedule
        self.metadata = metadata
        self.custom_trace_id_callback = custom_trace_id_callback
        self.trace_id = ""
        self._session = None
        self._check_params()
        if self._is_env_valid:
            npu._lazy_init()

    # -- the native-call sequence driven by the action controller --------------------------

    def init_trace(self) -> None:
        if not self._is_env_valid:
            return
        ProfPathCreator().create_prof_dir()
        self.prof_path = ProfPathCreator().get_prof_dir()
        self._session = CaptureSession(
            self.prof_path, self.activities, self.record_shapes, self.profile_memory, self.with_stack,
            self.with_flops, self.with_modules, self.experimental_config)
        if _version.HAS_CUSTOM_TRACE_ID:
            self.trace_id = self._create_trace_id()

    def warmup_trace(self) -> None:
        if self._is_env_valid and self._session is not None:
            self._session.warmup()

    def start_trace(self) -> None:
        if not self._is_env_valid or self._session is None:
            return
        self.start_monotonic = time.monotonic_ns()
        self._session.start()

    def stop_trace(self) -> None:
        if not self._is_env_valid or self._session is None:
            return
        if _version.SYNCHRONIZES_ON_STOP and ProfilerActivity.NPU in self.activities:
            npu.synchronize()
        self._session.stop()

    def finalize_trace(self) -> None:
        if not self._is_env_valid:
            return
        _faults.fail_if_armed("finalize", "Profiler finalize failed.")
        if self._session is not None:
            self._session.finalize()
            self._dump_profiler_info()
            self._dump_metadata()
        ProfPathCreator().is_prof_inited = False

    def discard_trace(self) -> None:
        if self._session is not None:
            self._session.discard()

    def delete_prof_dir(self) -> None:
        ProfPathCreator().delete_prof_dir()

    def analyse(self, analysis_type: str = C.TENSORBOARD_TRACE_HANDLER, output_path: str = None, **kwargs):
        if not self._is_env_valid:
            return
        try:
            NpuProfiler.analyse(self.prof_path, analysis_type, output_path, **kwargs)
        except Exception as err:
            print_warn_msg(f"Profiling data parsing failed, error: {err}")

    # -- checks ------------------------------------------------------------------------------

    def _check_params(self) -> None:
        supported = supported_activities()
        if any(activity not in supported for activity in self.activities):
            print_warn_msg("Invalid activities, only CPU and NPU are supported, reset it to default.")
            self.activities = supported
        for name in ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules"):
            if not isinstance(getattr(self, name), bool):
                print_warn_msg(f"Parameter {name} is of boolean type, reset it to False.")
                setattr(self, name, False)
        if not isinstance(self.experimental_config, _ExperimentalConfig):
            print_warn_msg("Parameter experimental_config is an instance of _ExperimentalConfig, "
                           "reset it to default.")
            self.experimental_config = _ExperimentalConfig()
        if ProfilerActivity.NPU not in self.activities and self.experimental_config is not None:
            print_warn_msg(f"Experimental config will not be {_version.NPU_NOT_SET_TYPO} "
                           "while ProfilerActivity.NPU is not set.")
        if ProfilerActivity.CPU not in self.activities and self.experimental_config.with_gc:
            print_warn_msg("GC detect will not take effect while ProfilerActivity.CPU is not set.")

    def _create_trace_id(self) -> str:
        callback = self.custom_trace_id_callback
        if not callback:
            return f"{uuid.uuid4().int:032X}"
        if not callable(callback):
            print_warn_msg("Parameter custom_trace_id_callback is not callable, reset it to default.")
            return f"{uuid.uuid4().int:032X}"
        try:
            trace_id = callback()
            if isinstance(trace_id, str) and len(trace_id) <= self.MAX_TRACE_ID_LEN:
                return trace_id
            print_warn_msg("Parameter custom_trace_id_callback should return "
                           f"str(max length: {self.MAX_TRACE_ID_LEN}), reset it to default.")
        except Exception as err:
            print_warn_msg(f"Parameter custom_trace_id_callback raised an exception: {err}, reset it to default.")
        return f"{uuid.uuid4().int:032X}"

    # -- files written at finalize -----------------------------------------------------------

    def _dump_profiler_info(self) -> None:
        def as_config(obj):
            return getattr(obj, "__dict__", {}) if obj else None

        info = {
            "config": {
                "common_config": {
                    "activities": [str(activity) for activity in self.activities],
                    "schedule": as_config(self.schedule),
                    "record_shapes": self.record_shapes,
                    "profile_memory": self.profile_memory,
                    "with_stack": self.with_stack,
                    "with_flops": self.with_flops,
                    "with_modules": self.with_modules,
                },
                "experimental_config": as_config(self.experimental_config),
            },
            "start_info": {"syscnt_enable": self.syscnt_enable, "freq": self.freq,
                           "start_cnt": self.start_cnt, "start_monotonic": self.start_monotonic},
            "end_info": {"collectionTimeEnd": time.time_ns(), "MonotonicTimeEnd": time.monotonic_ns()},
            "torch_npu_version": _version.__version__,
            "cann_version": _version.CANN_VERSION,
        }
        rank = current_rank()
        name = "profiler_info.json" if rank is None else f"profiler_info_{rank}.json"
        if rank is not None:
            info["rank_id"] = rank
        _raw_format.write_json(os.path.join(os.path.realpath(self.prof_path), name), info, indent=4)

    def _dump_metadata(self) -> None:
        if C.TEXT in self.experimental_config.export_type:
            self.metadata.update(collect_env_vars())
        if _version.HAS_CUSTOM_TRACE_ID:
            self.metadata[self.TRACE_ID_KEY] = self.trace_id
        if not self.metadata:
            return
        if not ProfPathCreator().is_prof_inited:
            print_warn_msg("Profiler is not initialized. Skip this metadata.")
            return
        _raw_format.write_json(os.path.join(self.prof_path, C.PROFILER_METADATA), self.metadata)
        # Cleared after every window: metadata added before start() lands in the first run dir only.
        self.metadata.clear()


@no_exception_func(set())
def supported_activities():
    return _supported_npu_activities()
