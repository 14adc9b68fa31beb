"""_KinetoProfile, profile, tensorboard_trace_handler and the offline analyse().

Every public entry point is wrapped in no_exception_func: failures are printed as
"[ERROR] ... Call <name> failed. Exception: ..." and the call returns None.
"""

import json
import os
from sys import getsizeof
from typing import Any, Callable, Iterable, Optional, Union

import torch.autograd.profiler as torch_autograd_profiler
from torch_npu import _faults, _version
from torch_npu._C._profiler import ProfilerActivity
from . import _constants as C
from ._action_controller import ProfActionController
from ._console import ErrCode, no_exception_func, print_warn_msg, prof_error
from ._paths import ProfPathCreator, check_input_path, realpath
from ._signatures import without_keywords
from .analysis import NpuProfiler
from .experimental_config import _ExperimentalConfig
from .profiler_interface import _ProfInterface, supported_activities
from .scheduler import ProfilerAction, _default_schedule_fn

__all__ = ["supported_activities", "analyse", "tensorboard_trace_handler", "profile"]

DEFAULT_PROCESS_NUMBER = (os.cpu_count() or 2) // 2
_MAX_META_SIZE = 50 * 1024
_MAX_STR_LEN = 4096


def _hidden(*pairs) -> set:
    return {name for name, present in pairs if not present}


class _KinetoProfile:
    def __init__(
        self,
        *,
        activities: Optional[Iterable[ProfilerActivity]] = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: Optional[_ExperimentalConfig] = None,
        custom_trace_id_callback: Optional[Callable[[], str]] = None,
    ):
        self.metadata = {}
        self.prof_if = _ProfInterface(
            activities=activities, record_shapes=record_shapes, profile_memory=profile_memory,
            with_stack=with_stack, with_flops=with_flops, with_modules=with_modules,
            experimental_config=experimental_config, metadata=self.metadata,
            custom_trace_id_callback=custom_trace_id_callback)
        self.max_meta_size = _MAX_META_SIZE
        self.max_str_len = _MAX_STR_LEN

    __init__ = without_keywords(__init__, _hidden(("custom_trace_id_callback", _version.HAS_CUSTOM_TRACE_ID)))

    @no_exception_func()
    def __del__(self):
        ProfPathCreator().delete_export_only_prof()

    @no_exception_func()
    def start(self):
        _faults.fail_if_armed("start", "Profiling start failed.")
        ProfPathCreator().init(export_only_mode=True)
        self.prof_if.init_trace()
        self.prof_if.start_trace()

    @no_exception_func()
    def stop(self):
        if _faults.is_armed("stop"):
            self.prof_if.discard_trace()
            _faults.fail_if_armed("stop", "Profiling stop failed.")
        self.prof_if.stop_trace()
        self.prof_if.finalize_trace()

    @no_exception_func()
    def export_chrome_trace(self, output_path: str):
        output_path = realpath(output_path)
        _check_input_file_path(output_path)
        if _version.CHROME_TRACE_NEEDS_JSON_SUFFIX and not os.path.basename(output_path).endswith(".json"):
            raise RuntimeError("Invalid parameter output_path, which must be a json file." + prof_error(ErrCode.VALUE))
        if not self.prof_if.prof_path:
            print_warn_msg("Invalid profiling path.")
            return
        self.prof_if.analyse(C.EXPORT_CHROME_TRACE, output_path)

    @no_exception_func()
    def add_metadata(self, key: str, value: str):
        if self._metadata_rejected(key, value):
            return
        if getsizeof(self.metadata) + getsizeof(key) + getsizeof(value) < self.max_meta_size:
            if key in self.metadata:
                print_warn_msg(f"{key} is already saved as metadata, override it.")
            self.metadata[key] = value
        else:
            print_warn_msg("Too many metadata added. Skip this metadata")

    @no_exception_func()
    def add_metadata_json(self, key: str, value: str):
        if self._metadata_rejected(key, value):
            return
        if getsizeof(self.metadata) + getsizeof(key) + getsizeof(value) < self.max_meta_size:
            try:
                if key in self.metadata:
                    print_warn_msg(f"{key} is already saved as metadata, override it.")
                self.metadata[key] = json.loads(value)
            except ValueError:
                print_warn_msg("The metadata value must be json format string. Skip this metadata")
        else:
            print_warn_msg("Too many metadata added. Skip this metadata")

    def _metadata_rejected(self, key, value) -> bool:
        if not isinstance(key, str) or not isinstance(value, str):
            print_warn_msg("The key and value of metadata must be string. Skip this metadata.")
            return True
        if len(key) > self.max_str_len or len(value) > self.max_str_len:
            print_warn_msg("Invalid input key or value. Skip this metadata.")
            return True
        return False

    @no_exception_func()
    def export_stacks(self, output_path: str, metric: str = C.METRIC_CPU_TIME):
        output_path = realpath(output_path)
        _check_input_file_path(output_path)
        if not self.prof_if.with_stack:
            print_warn_msg("Function export_stacks() requires with_stack=True.")
            return
        raise RuntimeError("export_stacks is not implemented by the fake torch_npu.")

    @no_exception_func()
    def export_memory_timeline(self, output_path: str, device: Optional[str] = None) -> None:
        raise RuntimeError("export_memory_timeline is not implemented by the fake torch_npu.")


def _check_input_file_path(path: str) -> None:
    check_input_path(path)
    if os.path.isdir(path):
        raise RuntimeError("Invalid input path is a directory path: {path}")


@no_exception_func()
def tensorboard_trace_handler(dir_name: str = None, worker_name: str = None,
                              analyse_flag: bool = True, async_mode: bool = False):
    ProfPathCreator().init(worker_name=worker_name, dir_name=dir_name)
    if not isinstance(analyse_flag, bool):
        print_warn_msg("analyse_flag is not bool, set by default.")
        analyse_flag = True
    if not isinstance(async_mode, bool):
        print_warn_msg("async_mode is not bool, set by default.")
        async_mode = False

    def handler_fn(prof_inst) -> None:
        if analyse_flag:
            prof_inst.prof_if.analyse(async_mode=async_mode)

    return handler_fn


class profile(_KinetoProfile):
    def __init__(
        self,
        *,
        activities: Optional[Iterable[ProfilerActivity]] = None,
        schedule: Optional[Callable[[int], ProfilerAction]] = None,
        on_trace_ready: Optional[Callable[..., Any]] = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: Optional[_ExperimentalConfig] = None,
        execution_trace_observer=None,
        custom_trace_id_callback: Optional[Callable[[], str]] = None,
        # deprecated:
        use_cuda: Optional[bool] = None,
    ):
        # Built through the parent first, as the wheel does: default-config warnings print twice.
        super().__init__(activities=activities, record_shapes=record_shapes, profile_memory=profile_memory,
                         with_stack=with_stack, with_flops=with_flops, with_modules=with_modules,
                         experimental_config=experimental_config)
        activities_set = set(activities) if activities else supported_activities()
        if schedule and callable(schedule):
            self.schedule = schedule
            self.record_steps = True
        else:
            if schedule:
                print_warn_msg("schedule is not Callable, set by default.")
            self.schedule = _default_schedule_fn
            self.record_steps = False
        if on_trace_ready and not callable(on_trace_ready):
            print_warn_msg("on_trace_ready is not Callable, set by default.")
            on_trace_ready = None
        self.prof_if = _ProfInterface(
            activities=activities_set, record_shapes=record_shapes, profile_memory=profile_memory,
            with_stack=with_stack, with_flops=with_flops, with_modules=with_modules,
            experimental_config=experimental_config, schedule=self.schedule, metadata=self.metadata,
            custom_trace_id_callback=custom_trace_id_callback)
        self.execution_trace_observer = execution_trace_observer
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self._step_num_offset = 0
        self.step_rec_fn = None
        self._step_mstx_range_id = 0
        self._is_dynamic_prof = False
        if use_cuda is not None:
            print_warn_msg("This is npu environment, use_cuda is invalid")
        self.stopped = False
        self.action_controller = ProfActionController(self, self.prof_if, self.on_trace_ready)

    __init__ = without_keywords(__init__, _hidden(
        ("execution_trace_observer", _version.HAS_EXECUTION_TRACE_OBSERVER),
        ("custom_trace_id_callback", _version.HAS_CUSTOM_TRACE_ID)))

    @no_exception_func()
    def __enter__(self):
        self.start()
        return self

    @no_exception_func()
    def __exit__(self, exe_type, exe_val, exc_tb):
        self.stop()

    @no_exception_func()
    def __del__(self):
        if not self.stopped:
            self.stop()

    def _enter_step_marker(self) -> None:
        if self.record_steps:
            name = "ProfilerStep#" + str(self.step_num + self._step_num_offset)
            self.step_rec_fn = torch_autograd_profiler.record_function(name)
            self.step_rec_fn.__enter__()
            if _version.HAS_STEP_MSTX_RANGE:
                self._start_step_mstx_range(name)

    def _exit_step_marker(self) -> None:
        # Cleared after exit so a second stop() (e.g. from __del__) cannot close it twice.
        if self.record_steps and self.step_rec_fn:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None
            if _version.HAS_STEP_MSTX_RANGE:
                self._end_step_mstx_range()

    if _version.HAS_STEP_MSTX_RANGE:
        # >= 2.10: each step is an mstx range too (the real one passes current_stream(); the
        # fake's ranges are host-side only)
        def _start_step_mstx_range(self, message: str):
            if not self._is_dynamic_prof:
                from torch_npu.npu import mstx
                self._step_mstx_range_id = mstx.range_start(message)

        def _end_step_mstx_range(self):
            if self._is_dynamic_prof or not self._step_mstx_range_id:
                return
            from torch_npu.npu import mstx
            mstx.range_end(self._step_mstx_range_id)
            self._step_mstx_range_id = 0

    @no_exception_func()
    def start(self):
        _faults.fail_if_armed("start", "Profiling start failed.")
        self.stopped = False
        if not self.on_trace_ready:
            ProfPathCreator().init(export_only_mode=True)
        self.action_controller.transit_action(ProfilerAction.NONE, self.current_action)
        self._enter_step_marker()
        if self.execution_trace_observer:
            self.execution_trace_observer.start()

    @no_exception_func()
    def stop(self):
        self._exit_step_marker()
        if _faults.is_armed("stop"):
            # The fake's native layer "crashes": the window's data is lost and the profiler
            # goes inert, so a later __del__ does not replay the stop.
            self.prof_if.discard_trace()
            self.stopped = True
            _faults.fail_if_armed("stop", "Profiling stop failed.")
        self.action_controller.transit_action(self.current_action, None)
        self.stopped = True
        if self.execution_trace_observer:
            self.execution_trace_observer.stop()

    @no_exception_func()
    def step(self):
        _faults.fail_if_armed("step", "Profiling step failed.")
        if self.stopped:
            print_warn_msg("Profiler is stopped, step takes no effect!")
            return
        self._exit_step_marker()
        prev_action = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self.action_controller.transit_action(prev_action, self.current_action)
        self._enter_step_marker()

    if _version.HAS_CUSTOM_TRACE_ID:
        @no_exception_func()
        def set_custom_trace_id_callback(self, callback: Callable[[], str]) -> None:
            self.prof_if.custom_trace_id_callback = callback

        @no_exception_func()
        def get_trace_id(self) -> str:
            return self.prof_if.trace_id

    if _version.HAS_CHILD_THREAD_PROFILING:
        @classmethod
        @no_exception_func()
        def enable_profiler_in_child_thread(cls, record_shapes: bool = False, profile_memory: bool = False,
                                            with_stack: bool = False, with_flops: bool = False,
                                            with_modules: bool = False):
            for name, value in (("record_shapes", record_shapes), ("profile_memory", profile_memory),
                                ("with_stack", with_stack), ("with_flops", with_flops),
                                ("with_modules", with_modules)):
                if not isinstance(value, bool):
                    print_warn_msg(f"{name} in enable_profiler_in_child_thread is not bool, reset it to False.")

        @classmethod
        @no_exception_func()
        def disable_profiler_in_child_thread(cls):
            return None


@no_exception_func()
def analyse(profiler_path: str, max_process_number: int = DEFAULT_PROCESS_NUMBER,
            export_type: Union[str, list] = None):
    if not isinstance(max_process_number, int) or max_process_number <= 0:
        max_process_number = DEFAULT_PROCESS_NUMBER
        print_warn_msg("Invalid max_process_number, reset it to default!")
    if max_process_number > os.cpu_count():
        max_process_number = os.cpu_count()
        print_warn_msg("max_process_number exceeds the number of cpu cores, reset it to the number of cpu cores!")
    if export_type is not None:
        if isinstance(export_type, str):
            export_type = [export_type]
        elif isinstance(export_type, list):
            export_type = list(set(export_type))
        else:
            print_warn_msg(f"Invalid parameter export_type: {export_type}, reset it to None.")
            export_type = None
        if export_type is not None and (not export_type or not all(t in (C.TEXT, C.DB) for t in export_type)):
            print_warn_msg(f"Invalid parameter export_type: {export_type}, reset it to None.")
            export_type = None
    NpuProfiler.analyse(profiler_path, max_process_number=max_process_number, export_type=export_type)
