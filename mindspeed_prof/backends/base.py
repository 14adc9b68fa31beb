"""What every backend does for one window on one rank, and the pieces they share."""

import threading

from .. import layout


class Backend:
    """One profiler for one window: created just before the window, stopped right after.

    ``report(kind, phase, message)`` sends errors and warnings to the manager, which logs them on
    this rank and records them in the manifest. Backends never raise out of ``step``/``stop``
    for a profiler failure they can describe; they report it and leave the training running.
    """

    name = "base"

    def __init__(self, *, config, rank, save_dir, schedule, metadata, report, worker=None):
        self.config = config
        self.rank = rank
        self.worker = worker or layout.worker_name(rank)  # the capture's name prefix
        self.save_dir = save_dir
        self.schedule = schedule
        self.metadata = metadata or {}
        self.report = report
        self.saved = threading.Event()  # set once this window's data is on disk (or failed)
        self.failed = False
        self.on_saved = None  # the manager's callback, run when the data reaches disk
        self.saving_thread = None  # ident of the thread writing/parsing right now, if any
        # Seconds the trace's export took on the thread that ended the window (None: not
        # measured apart from the stop, or done in the background).
        self.export_s = None

    def _mark_saved(self):
        self.saved.set()
        if self.on_saved is not None:
            self.on_saved()

    def start(self, iteration):
        """Create the profiler with its step counter at ``iteration`` and start it."""
        raise NotImplementedError

    def step(self):
        """The current iteration finished."""
        raise NotImplementedError

    def stop(self):
        """Stop and flush; safe to call twice."""
        raise NotImplementedError

    @property
    def step_num(self):
        raise NotImplementedError

    def abandon(self):
        """This session will never be stopped (its thread is gone or elsewhere): nothing more
        will be written, so nobody waits for it."""
        self.saved.set()

    def range(self, name):
        """A labelled range in this session's trace (torch_npu records torch's ranges too)."""
        import torch

        return torch.profiler.record_function(name)

    def mark(self, name, device=False):
        """A pipeline-schedule mark (``config/schedule_marks.py``): a labelled range here;
        the NPU backend puts one with ``device`` on the device stream."""
        return self.range(name)

    def outputs(self):
        """Paths this window wrote (files or run folders)."""
        return []

    def wait(self, timeout=None):
        """Wait for background export/parse to finish; True when nothing is pending."""
        if self.saving_thread == threading.get_ident():
            # A signal handler interrupted this thread's own synchronous save: waiting for it
            # would only burn the grace time before SIGKILL.
            return False
        return self.saved.wait(timeout)

    def pending_note(self):
        """Why the data may not be final yet (async parse), or None."""
        return None

    def status(self):
        """This window's manifest status, judged from what the backend knows now."""
        if self.failed:
            return "failed"
        if self.config.profile_analyse == "offline" and self.name == "npu":
            return "unparsed"  # as asked: raw data now, `mindspeed-prof analyse` later
        if not self.saved.is_set() or self.pending_note():
            return "parsing"
        return "complete" if self.outputs() else "incomplete"


def not_applicable(config, knobs):
    """The knobs set away from their defaults that this backend cannot honour, as flag names."""
    from ..config.profiler_config import KNOBS, flag_name

    return [flag_name(k) for k in knobs if getattr(config, k) != KNOBS[k].default]
