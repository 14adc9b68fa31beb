"""torch_npu.profiler backend: torch_npu's own ``*_ascend_pt`` layout, one run folder per window.

torch_npu never raises from start/step/stop/parse: it prints ``[ERROR]`` lines and returns. Every
call therefore runs under ``capture_error_lines``, and after the data is saved the run folder is
checked (profiler_info written, parse output present, parser logs free of errors).
"""

import glob
import importlib
import json
import multiprocessing
import os
import signal
import threading

from .. import layout
from .errorcapture import capture_error_lines
from ..errors import BackendUnavailable
from . import npu_mstx, npu_options
from .base import Backend


def import_torch_npu():
    """torch_npu, or BackendUnavailable saying what is missing."""
    try:
        import torch_npu  # noqa: F401 - imported for its side effects and version
        import torch_npu.profiler  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - ImportError, or RuntimeError from a broken CANN
        raise BackendUnavailable(
            f"--profile-backend npu needs a working torch_npu, but `import torch_npu` failed: "
            f"{type(exc).__name__}: {exc}. Install torch_npu matching your torch and source the "
            f"CANN set_env.sh, or use --profile-backend torch.") from None
    return torch_npu


def usable():
    """(True, version) when torch_npu imports and sees an NPU, else (False, reason)."""
    try:
        torch_npu = import_torch_npu()
    except BackendUnavailable as exc:
        return False, str(exc)
    try:
        if not torch_npu.npu.is_available():
            return False, "torch_npu imports but reports no NPU (torch_npu.npu.is_available() is False)"
    except Exception as exc:  # noqa: BLE001
        return False, f"torch_npu.npu.is_available() failed: {exc}"
    return True, getattr(torch_npu, "__version__", "unknown")


def memory_api():
    """torch_npu's caching-allocator module and its out-of-memory observer hook (the memory
    mechanism, ``backends/memory.py``, goes through here: only this module imports torch_npu)."""
    torch_npu = import_torch_npu()
    return (importlib.import_module("torch_npu.npu.memory"),
            torch_npu._C._npu_attach_out_of_memory_observer)


def device_initialized():
    """Whether this process has set up its NPU yet (``torch_npu.npu.is_initialized()``)."""
    return bool(import_torch_npu().npu.is_initialized())


class NpuBackend(Backend):
    name = "npu"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._torch_npu = import_torch_npu()
        self._tp = self._torch_npu.profiler
        self._prof = None
        self._stopped = False
        self._before = set()
        self._async = self.config.profile_analyse == "async"
        self._lock = threading.Lock()
        self._parsers = []  # the processes torch_npu started for an async parse
        self._parsers_owner = os.getpid()  # only their parent can wait on them
        self._parse_loss_said = False
        self._mstx = npu_mstx.NO_MSTX  # our labels as mstx ranges while mstx collects

    @property
    def version(self):
        return getattr(self._torch_npu, "__version__", None)

    @property
    def step_num(self):
        return self._prof.step_num

    def _call(self, phase, func, *args, **kwargs):
        with capture_error_lines(lambda line: self._error(phase, line + _FIX.get(phase, ""))):
            return func(*args, **kwargs)

    def _error(self, phase, message):
        self.failed = True
        self.report("error", phase, message)

    def start(self, iteration):
        config, tp, s = self.config, self._tp, self.schedule
        exp_kwargs, dropped = npu_options.experimental_kwargs(config, tp)
        for flag in dropped:
            self.report("warning", "start", f"torch_npu {self.version} does not support {flag}; "
                                            f"it is ignored (upgrade torch_npu to use it).")
        for note in npu_options.behaviour_notes(config, self.version):
            self.report("warning", "start", note)
        experimental = tp._ExperimentalConfig(**exp_kwargs)
        self._mstx = npu_mstx.MstxLabels.for_window(self._torch_npu, tp, experimental)
        # Keywords, not positions: torch_npu's schedule takes (wait, active, warmup, ...).
        schedule = tp.schedule(wait=s.wait, active=s.active, warmup=s.warmup, repeat=s.repeat,
                               skip_first=s.skip_first)
        os.makedirs(self.save_dir, exist_ok=True)
        self._before = set(self._run_dirs())
        parse = config.profile_analyse != "offline"
        handler = self._call("start", tp.tensorboard_trace_handler, self.save_dir,
                             worker_name=self.worker, analyse_flag=parse,
                             async_mode=self._async)
        if handler is None:
            self._error("start", "torch_npu refused the trace handler (see the [ERROR] line "
                                 "above); data would go to ./export_only_prof_dir instead")

        def on_trace_ready(prof):
            self.saving_thread = threading.get_ident()  # a sync parse runs right here
            try:
                if handler is not None:
                    before = _child_processes() if self._async else []
                    handler(prof)
                    if self._async:  # torch_npu parses in a forked process: know if it dies
                        self._parsers += [p for p in _child_processes() if p not in before]
                self._after_save()
            finally:
                self.saving_thread = None

        kwargs = npu_options.profile_kwargs(config, tp, experimental, schedule, on_trace_ready)
        self._prof = self._call("start", tp.profile, **kwargs)
        if self.metadata:
            self._call("start", self._prof.add_metadata_json, "distributed_args",
                       json.dumps(self.metadata))
        # Number the steps as the training log does: kernel_details' Step Id = iteration.
        self._prof.step_num = iteration
        self._prof.current_action = schedule(iteration)
        self._call("start", self._prof.start)
        self._mstx.step_began(self._prof.step_num)

    def step(self):
        self._mstx.step_ended()
        self._call("step", self._prof.step)
        self._mstx.step_began(self._prof.step_num)

    def range(self, name):
        return self._mstx.range(name) or super().range(name)

    def mark(self, name, device=False):
        """A schedule mark. With ``device`` (the microbatches' compute) an mstx range on the
        current device stream where mstx collects, so the NPU's own time is measured, not only
        the host's; else a host range. Only compute goes on the device: msprof-analyze's
        pp_chart takes every device-side range whose name holds "forward" or "backward" for a
        microbatch, so a send or the whole schedule there would break its chart."""
        if not device:
            return self.range(name)
        current_stream = getattr(self._torch_npu.npu, "current_stream", None)
        stream = current_stream() if callable(current_stream) else None
        return self._mstx.device_range(name, stream) or super().range(name)

    def stop(self):
        if self._prof is None or self._stopped:
            return
        self._stopped = True
        self._mstx.step_ended()
        self._call("stop", self._prof.stop)
        if not self.saved.is_set() and not self.outputs():
            self._mark_saved()  # stopped in warm-up: torch_npu deletes the folder, nothing to wait for

    def _run_dirs(self):
        pattern = os.path.join(self.save_dir, f"{self.worker}_{os.getpid()}_*"
                                              f"{layout.ASCEND_PT_SUFFIX}")
        return glob.glob(pattern)

    def outputs(self):
        return sorted(set(self._run_dirs()) - self._before)

    def _after_save(self):
        runs = self.outputs()
        if not runs:
            self._error("save", f"torch_npu wrote no run folder under {self.save_dir}")
        for run in runs:
            if not glob.glob(os.path.join(run, "profiler_info*.json")):
                self._error("save", f"{run} has no profiler_info*.json: torch_npu did not finish "
                                    f"writing this window")
        if self.config.profile_analyse == "sync":
            self.check_parsed()
        self._mark_saved()

    def check_parsed(self):
        """After a parse: output folder present and parser logs without errors."""
        complete = True
        for run in self.outputs():
            out = os.path.join(run, layout.ASCEND_OUTPUT_DIR)
            if not os.path.isdir(out):
                complete = False
                if self.config.profile_analyse == "sync":
                    self._error("parse", f"{run} has no {layout.ASCEND_OUTPUT_DIR}: parsing failed; "
                                         f"see the [ERROR] lines above and run `mindspeed-prof "
                                         f"analyse {run}`")
            for log_file in glob.glob(os.path.join(run, "logs", "*.log")):
                for line in _error_lines(log_file):
                    self._error("parse", f"{os.path.basename(log_file)}: {line}")
        return complete

    def pending_note(self):
        if self.config.profile_analyse == "offline":
            return "raw data only (--profile-analyse offline): run `mindspeed-prof analyse`"
        if self._async and not all(self._parsed(run) for run in self.outputs()):
            return "torch_npu is parsing in a child process (--profile-analyse async)"
        return None

    def status(self):
        status = super().status()
        if status == "parsing" and self._parse_killed():
            return "unparsed"  # nothing will finish the parse: raw data, `analyse` parses it
        return status

    def _parse_killed(self):
        """True when the parse is unfinished and no process is left to finish it (a signal
        sent to the whole job kills torch_npu's parse process with the rank); said once, with
        the fix, in the manifest."""
        if not self._parsers or self._parsers_owner != os.getpid():
            return False  # a forked child (a DataLoader worker) cannot wait on its parent's
        if any(p.exitcode is None for p in self._parsers):
            return False
        ended = self._parsers
        if not self._parse_loss_said:
            self._parse_loss_said = True
            runs = [run for run in self.outputs() if not self._parsed(run)]
            for process in ended:
                self.report("error", "parse", f"torch_npu's parse process (pid {process.pid}, "
                                              f"--profile-analyse async) {_how(process.exitcode)} "
                                              f"before it finished: {', '.join(runs)} not parsed "
                                              f"(its raw data is kept); parse it with "
                                              f"`mindspeed-prof analyse "
                                              f"{runs[0] if len(runs) == 1 else self.save_dir}`")
        return bool(ended)

    def _parsed(self, run):
        """torch_npu >= 2.10 marks a finished parse with analyse.done; older ones leave no marker,
        so the output folder is the best sign there (``mindspeed-prof check`` verifies it)."""
        output = os.path.join(run, layout.ASCEND_OUTPUT_DIR)
        marker_known = (npu_options.version_tuple(self.version) or (0, 0)) >= (2, 10)
        if marker_known:
            return os.path.exists(os.path.join(output, "analyse.done"))
        return os.path.isdir(output)


def _child_processes():
    """This process's live multiprocessing children (torch_npu's parse runs in one)."""
    return multiprocessing.active_children()


def _how(exitcode):
    if exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"ended (exit code {exitcode})"


# torch_npu's own [ERROR] lines say what broke, not what to do; training goes on either way.
_FIX = {
    "start": " (torch_npu could not start profiling; training continues without it on this rank: "
             "check that torch_npu and CANN versions match, or use --profile-backend torch)",
    "step": " (torch_npu failed during the window; training continues: profile again)",
    "stop": " (torch_npu failed to save the window; training continues: profile again, and check "
            "free space under --profile-save-path)",
}


def _error_lines(path, limit=20):
    lines = []
    try:
        with open(path, errors="replace") as handle:
            for line in handle:
                if "[ERROR]" in line or " ERROR " in line:
                    lines.append(line.strip())
                    if len(lines) >= limit:
                        break
    except OSError:
        pass
    return lines
