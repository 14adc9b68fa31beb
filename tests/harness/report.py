"""Per-rank JSON record of a stand-in training run, so tests never parse interleaved stdout.

With ``HARNESS_REPORT_DIR`` set, rank R keeps ``{dir}/rank{R}.json`` up to date: rewritten
atomically after every iteration and once more when the run ends, however it ends (return,
``sys.exit``, exception, SIGTERM). Without it every call is a no-op.
"""

import atexit
import contextlib
import json
import os
import signal
import traceback

REPORT_DIR_ENV = "HARNESS_REPORT_DIR"


class NullReport:
    """Stands in when no report was asked for, so the training loop never checks."""

    def update(self, **fields):
        pass

    def record_step(self, iteration):
        pass

    def record_skip(self, iteration):
        pass

    def record_loss(self, iteration, value):
        pass

    def record_eval(self, iteration):
        pass

    def record_signal(self, name):
        pass

    def end(self, how, **details):
        pass

    @contextlib.contextmanager
    def outcome(self):
        yield


class RunReport(NullReport):
    """What one rank did; every change that matters reaches disk before the next one."""

    def __init__(self, path, **fields):
        self._path = path
        self._data = {
            "pid": os.getpid(),
            "train_step_iterations": [],
            "skipped_iterations": [],
            "eval_iterations": [],
            "signals": [],
            "losses": {},
            "end": None,
            **fields,
        }
        self.write()

    def update(self, **fields):
        self._data.update(fields)
        self.write()

    def record_step(self, iteration):
        self._data["train_step_iterations"].append(iteration)
        self.write()

    def record_skip(self, iteration):
        self._data["skipped_iterations"].append(iteration)
        self.write()

    def record_loss(self, iteration, value):
        self._data["losses"][str(iteration)] = value
        self.write()

    def record_eval(self, iteration):
        self._data["eval_iterations"].append(iteration)
        self.write()

    def record_signal(self, name):
        self._data["signals"].append(name)
        self.write()

    def end(self, how, **details):
        # The innermost observer knows best (pretrain sees the exception before atexit does).
        if self._data["end"] is None:
            self._data["end"] = {"how": how, **details}
        self.write()

    @contextlib.contextmanager
    def outcome(self):
        """Records how the wrapped block left: return, ``sys.exit`` or exception."""
        try:
            yield
        except SystemExit as exc:
            self.end("sys_exit", code=exc.code)
            raise
        except BaseException as exc:
            self.end(
                "exception",
                type=type(exc).__name__,
                repr=repr(exc),
                traceback=traceback.format_exc(limit=-8),
            )
            raise
        else:
            self.end("returned")

    def write(self):
        tmp = f"{self._path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self._data, f, indent=1, default=repr)
        os.replace(tmp, self._path)


def _record_sigterm(report):
    previous = signal.getsignal(signal.SIGTERM)
    owner = os.getpid()

    def on_sigterm(signum, frame):
        if os.getpid() != owner:
            # A forked DataLoader worker inherits this handler; the rank's report is not its own.
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        report.record_signal("SIGTERM")
        if callable(previous):
            # Whoever handled SIGTERM before Megatron was imported (a launcher) decides.
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            report.end("signal", signal="SIGTERM")
            # Die the way an unhandled SIGTERM would, so launchers see the same exit status.
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    # Megatron's --exit-signal-handler installs its own handler later and keeps this one as
    # the original; that is the real precedence.
    signal.signal(signal.SIGTERM, on_sigterm)


def open_report(env, **fields):
    """The report for this process: a ``RunReport`` when ``HARNESS_REPORT_DIR`` is set."""
    directory = env.get(REPORT_DIR_ENV)
    if not directory:
        return NullReport()
    os.makedirs(directory, exist_ok=True)
    rank = int(env.get("RANK", "0"))
    report = RunReport(
        os.path.join(directory, f"rank{rank}.json"),
        rank=rank,
        world_size=int(env.get("WORLD_SIZE", "1")),
        **fields,
    )
    atexit.register(report.end, "interpreter_exit")
    _record_sigterm(report)
    return report
