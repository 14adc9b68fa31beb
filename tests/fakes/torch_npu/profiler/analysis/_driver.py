"""Parse orchestration: find run directories, run the view "parsers", clean up, report on stdout.

Mirrors torch_npu's sequence: ASCEND_PROFILER_OUTPUT is recreated, CANN data is
exported, each view runs as a task whose failure is only logged (then reported as
"Task [<Parser>] run failed."), raw CANN exports are pruned per data_simplification,
and analyse.done is written (>=2.10) even when a task failed. async_mode parses in a
background thread instead of the real fork-based process pool.
"""

import json
import multiprocessing
import os
import shutil
import threading
import time
from datetime import datetime, timezone

from torch_npu import _faults, _version
from .. import _constants as C
from .. import _raw_format
from .._console import no_exception_func, print_error_msg, print_info_msg, print_warn_msg
from .._paths import check_directory_writeable, check_input_directory_path, make_dir, realpath
from . import _cann_export, _db_export, _device_views, _host_views
from ._parser_log import ParserLog
from ._run_data import RunConfig, RunData
from ._trace_view import build_trace_events

_async_threads = []
_async_lock = threading.Lock()


def wait_for_async_parses(timeout: float = None) -> bool:
    """Fake-only helper for tests: join async parses; True when all of them finished."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with _async_lock:
        threads = list(_async_threads)
    for thread in threads:
        thread.join(None if deadline is None else max(deadline - time.monotonic(), 0))
    with _async_lock:
        _async_threads[:] = [t for t in _async_threads if t.is_alive()]
        return not _async_threads


def _now():
    return datetime.now(tz=timezone.utc).astimezone()


def _profiler_path_list(input_path: str) -> list:
    if not os.path.isdir(input_path):
        return []
    if _raw_format.is_run_dir(input_path):
        return [input_path]
    return [os.path.join(input_path, name) for name in sorted(os.listdir(input_path))
            if _raw_format.is_run_dir(os.path.join(input_path, name))]


class NpuProfiler:
    @classmethod
    def analyse(cls, input_path: str, analysis_type: str = C.TENSORBOARD_TRACE_HANDLER, output_path: str = None,
                **kwargs) -> None:
        input_path = realpath(input_path)
        check_input_directory_path(input_path)
        if not os.path.exists(input_path):
            raise RuntimeError(f"The path does not exist: {input_path}")
        runs = _profiler_path_list(input_path)
        if not runs:
            return
        if multiprocessing.current_process().daemon:
            print_error_msg(
                "The profiling data cannot be parsed during the daemon process, it is recommended that you use "
                "an offline parsing interface to parse the collected data. \nFor example: \nfrom "
                "torch_npu.profiler.profiler import analyse\nanalyse(\"profiling_data_path\")")
            return
        for run in runs:
            check_directory_writeable(run)
            parser = RunParser(run, analysis_type, output_path, kwargs)
            if kwargs.get("async_mode", False):
                cls._start_async(parser)
            else:
                parser.analyse_profiling_data()

    @staticmethod
    def _start_async(parser: "RunParser") -> None:
        def target():
            try:
                parser.analyse_profiling_data()
            except Exception as err:  # 2.6.0 does not guard the entry point itself
                print_warn_msg(f"Profiling data parsing failed, error: {err}")

        # Not a daemon: like the real atexit pool shutdown, interpreter exit waits for the parse.
        thread = threading.Thread(target=target, name=f"fake-npu-parse-{os.path.basename(parser.run_dir)}")
        with _async_lock:
            _async_threads.append(thread)
        thread.start()


class RunParser:
    def __init__(self, run_dir: str, analysis_type: str, output_path: str, kwargs: dict) -> None:
        self.run_dir = run_dir
        self.analysis_type = analysis_type
        self.output_path = output_path
        self.kwargs = kwargs
        self.start_time = _now()
        if analysis_type == C.TENSORBOARD_TRACE_HANDLER:
            # Re-parsing is destructive but repeatable: the output folder always starts empty.
            self.output_path = os.path.join(run_dir, C.OUTPUT_DIR)
            shutil.rmtree(self.output_path, ignore_errors=True)
            make_dir(self.output_path)

    def _announce_start(self) -> None:
        if _version.ANNOUNCES_PARSE_MODE:
            mode = "async" if self.kwargs.get("async_mode") else "sync"
            print_info_msg(f"Start parsing profiling data in {mode} mode at: {self.run_dir}")
        else:
            print_info_msg(f"Start parsing profiling data: {self.run_dir}")

    def analyse_profiling_data(self) -> None:
        log = ParserLog(self.run_dir, "ProfilingParser")
        self._announce_start()
        _faults.sleep_for_parse_delay()
        config = RunConfig.load(self.run_dir, self.kwargs.get("export_type"))
        try:
            self._run_parsers(config)
        except Exception as err:
            if _version.PRINTS_PARSE_FAILURE:
                print_error_msg(f"Failed to parsing profiling data. {err}")
            log.error("Failed to parsing profiling data, error: %s", str(err), exc_info=True)
        if self.analysis_type == C.TENSORBOARD_TRACE_HANDLER:
            _cann_export.simplify(self.run_dir, _raw_format.find_cann_dir(self.run_dir), config.data_simplification)
            if _version.WRITES_ANALYSE_DONE:
                open(os.path.join(self.output_path, C.ANALYSE_DONE), "w").close()
        print_info_msg(f"All profiling data parsed in a total time of {_now() - self.start_time}")

    if _version.PARSER_ENTRY_SWALLOWS_ERRORS:
        analyse_profiling_data = no_exception_func()(analyse_profiling_data)

    def _run_parsers(self, config: RunConfig) -> None:
        data = RunData.load(self.run_dir, config)
        exported = {}
        if data.cann_dir and config.npu:
            started = _now()
            exported = _cann_export.export(data)
            print_info_msg(f"CANN profiling data parsed in a total time of {_now() - started}")
        failed = []
        for name, failure_message, work in self._tasks(data, exported):
            log = ParserLog(self.run_dir, name)
            log.info("%s start.", name)
            try:
                work()
            except Exception as err:
                log.error("%s, error: %s", failure_message, str(err), exc_info=True)
                failed.append(name)
                continue
            log.info("%s finish.", name)
        for name in failed:
            print_error_msg(f"Task [{name}] run failed.")

    def _tasks(self, data: RunData, exported: dict) -> list:
        config, out = data.config, self.output_path
        if self.analysis_type == C.EXPORT_CHROME_TRACE:
            return [("TraceViewParser", "Failed to generate trace_view.json",
                     lambda: _write_trace(data, out))]
        tasks = []
        device_views = config.npu and config.level != C.LEVEL_NONE
        if C.TEXT in config.export_type:
            tasks.append(("TraceViewParser", "Failed to generate trace_view.json",
                          lambda: _write_trace(data, os.path.join(out, "trace_view.json"))))
            if config.cpu:
                tasks.append(("OperatorViewParser", "Failed to generate operator_details.csv",
                              lambda: _host_views.write_operator_details(data, out)))
            if device_views:
                tasks.append(("KernelViewParser", "Failed to generate kernel_details.csv",
                              lambda: _kernel_view(data, exported, out)))
                tasks.append(("TraceStepTimeParser", "Failed to generate step_trace_time.csv",
                              lambda: _device_views.write_step_trace_time(data, out)))
            if config.profile_memory:
                tasks.append(("MemoryViewParser", "Failed to generate memory view",
                              lambda: _host_views.write_memory_views(data, out)))
            if config.npu:
                tasks.append(("IntegrateParser", "Failed to integrate CANN summaries",
                              lambda: _device_views.copy_cann_summaries(data, exported, out)))
        if C.DB in config.export_type:
            tasks.append(("DbParser", "Failed to generate ascend_pytorch_profiler db",
                          lambda: _db_export.write_profiler_db(data, out)))
        return tasks


def _kernel_view(data: RunData, exported: dict, output_dir: str) -> None:
    _faults.fail_if_armed("parse", "KernelViewParser failed to read op_summary.")
    _device_views.write_kernel_details(data, exported.get("op_summary", ""), output_dir)


def _write_trace(data: RunData, path: str) -> None:
    events = build_trace_events(data)
    if not events:
        return
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640), "w", encoding="utf-8") as handle:
        json.dump(events, handle)
