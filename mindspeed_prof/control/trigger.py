"""On-demand profiling of a running job, aligned across ranks.

``mindspeed-prof trigger FILE --steps N [--ranks R...]`` writes a request into FILE. A job started
with ``--profile-trigger-file FILE`` has rank 0 look at FILE every ``--profile-trigger-poll``
iterations (one ``stat``), and shares what it found with every rank through one small broadcast
at that iteration boundary (the poll's exchange: ``captures.py``, ``exchange.py``). All selected
ranks therefore profile the same iterations, which torch_npu's dynamic profiling (each process
polls on its own) cannot guarantee. Without the flag
none of this exists: no stat, no collective.

Each rank reports its state in ``FILE.status/rank{R}.json``: armed, running, parsing, done,
cut (the job ended inside the window, which kept the iterations it recorded: ``check``'s
``cut``), failed, idle (the job ended).
"""

import contextlib
import json
import os
import time
import uuid

from ..config.window import StepSchedule

STATES = ("armed", "running", "parsing", "done", "cut", "failed", "idle")
# A window's manifest status, as the trigger status file says it.
STATE_OF_STATUS = {"complete": "done", "unparsed": "done", "incomplete": "failed", "cut": "cut"}
# The states a request ends in: ``trigger --wait`` stops at them, and succeeds on done and idle.
FINAL_STATES = ("done", "cut", "failed", "idle")


def status_dir(path):
    return f"{path}.status"


def write_json_atomic(path, data):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as handle:
            json.dump(data, handle, indent=2)
        os.replace(tmp, path)
    except BaseException:
        # Never leave the half-written temporary file beside the target.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_request(path, steps, ranks=None):
    """What ``mindspeed-prof trigger`` writes; returns the request."""
    request = {"id": uuid.uuid4().hex[:12], "steps": int(steps),
               "ranks": list(ranks) if ranks else None, "created": time.time()}
    write_json_atomic(path, request)
    return request


def read_statuses(path):
    folder = status_dir(path)
    statuses = {}
    if not os.path.isdir(folder):
        return statuses
    for name in os.listdir(folder):
        if name.startswith("rank") and name.endswith(".json"):
            try:
                with open(os.path.join(folder, name)) as handle:
                    data = json.load(handle)
                statuses[int(data["rank"])] = data
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return statuses


class TriggerWatcher:
    """Rank 0 reads the file at each poll; the poll hands every rank what it found."""

    def __init__(self, path, *, poll, rank, world_size, report):
        self.path = path
        self.poll = poll
        self.rank = rank
        self.world_size = world_size
        self.report = report
        self._seen = None          # (mtime_ns, size) of the file last read
        self._handled = set()      # request ids already acted on
        self._armed_at = time.time()  # requests older than the job are stale, not new

    @classmethod
    def for_plan(cls, plan, report):
        """The watcher of a recorder with this plan, armed (its status file says so)."""
        config = plan.config
        watcher = cls(config.profile_trigger_file, poll=config.profile_trigger_poll,
                      rank=plan.rank, world_size=plan.world_size, report=report)
        watcher.set_state("armed")
        return watcher

    def accepted(self, request):
        """Every rank received ``request`` (the poll's exchange, ``captures.CapturePoll``)."""
        self._handled.add(request["id"])

    def read_new(self):
        """Rank 0: the new request in the file, or None (one ``stat`` when nothing changed)."""
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        key = (stat.st_mtime_ns, stat.st_size)
        if key == self._seen:
            return None
        self._seen = key
        try:
            with open(self.path) as handle:
                request = json.load(handle)
            steps = int(request["steps"])
            request_id = str(request["id"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self.report("error", "trigger", f"{self.path} is not a trigger request ({exc}); write "
                                            f"it with `mindspeed-prof trigger {self.path} --steps N`")
            return None
        if request_id in self._handled:
            return None
        if float(request.get("created", stat.st_mtime)) < self._armed_at:
            self._handled.add(request_id)
            self.report("warning", "trigger", f"ignoring request {request_id} in {self.path}: it "
                                              f"was written before this job started")
            return None
        if steps < 1:
            self.report("error", "trigger", f"request {request_id} asks for {steps} steps; "
                                            f"use --steps 1 or more")
            return None
        return {"id": request_id, "steps": steps, "ranks": request.get("ranks")}

    def ignored(self, request, n, unit, why):
        """Rank 0 says a request could not be acted on at unit ``n``."""
        if self.rank == 0:
            self.report("warning", "trigger", f"request {request['id']} ignored at {unit.name} "
                                              f"{n}: {why}")

    def window_ended(self, window):
        """A window's data is on disk: its manifest status, as the status file says it."""
        self.set_state(STATE_OF_STATUS.get(window.status, window.status),
                       window=[window.start, window.end])

    def set_state(self, state, **details):
        data = {"rank": self.rank, "state": state, "updated": time.time(), **details}
        try:
            write_json_atomic(os.path.join(status_dir(self.path), f"rank{self.rank}.json"), data)
        except OSError as exc:
            self.report("warning", "trigger", f"cannot write the status file: {exc}")


def window_for(request, iteration, last_iteration):
    """The inclusive (first, last) iterations a request received at ``iteration`` profiles: the
    next ``steps`` ones, cut at the end of training; None when none is left."""
    last = iteration + request["steps"]
    if last_iteration is not None:
        last = min(last, last_iteration)
    return (iteration + 1, last) if last > iteration else None


def requested_sessions(window, n, session_per_unit):
    """The sessions for a request whose ``window`` (from ``window_for``) starts after unit ``n``,
    and the units it records (first, last) as a message should name them."""
    if session_per_unit:
        # The unit about to run is the first requested one: no warm-up unit, a session each.
        return ([StepSchedule(skip_first=u, warmup=0, active=1) for u in range(n, window[1])],
                (window[0] - 1, window[1] - 1))
    # Warm up on the unit about to run; record the requested ones after it.
    return [StepSchedule(skip_first=n, warmup=1, active=window[1] - n)], window


def sessions_for(request, n, plan, layout_of, watcher):
    """The sessions this rank opens for a request seen at unit ``n`` (none where the request
    does not choose it) and the window they make; every rank gets the same request."""
    from .. import log
    from ..config import ranks
    from ..config.ranks import short_ranks

    window = window_for(request, n, plan.last)
    if window is None:
        watcher.ignored(request, n, plan.unit, f"{plan.unit.owner} ends now")
        return [], None
    chosen = (ranks.resolve(ranks.parse_rank_tokens(request["ranks"]), plan.world_size,
                            layout_of) if request["ranks"] else list(plan.selected_ranks))
    sessions, (first, last) = requested_sessions(window, n, plan.session_per_unit)
    if plan.rank == 0:
        log.info(f"trigger {request['id']}: profiling rank(s) {short_ranks(chosen)} at "
                 f"{plan.unit.plural} {first}-{last}")
    if plan.rank not in chosen:
        return [], None
    return sessions, StepSchedule(skip_first=first, warmup=0, active=last - first + 1)


def _collective_device(dist):
    """Where the broadcast's tensor must live for the default group's backend."""
    import torch

    backend = str(dist.get_backend())
    if backend == "gloo":
        return torch.device("cpu")
    npu = getattr(torch, "npu", None)
    if npu is not None and backend == "hccl":
        return torch.device("npu", npu.current_device())
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")
