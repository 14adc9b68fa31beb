"""The capture rules at work on one rank: unit times, the poll's one exchange, what it decides.

``anomaly.py`` judges; this module measures and talks. At every poll boundary (``n %
--profile-trigger-poll == 0``) each rank makes exactly one exchange, whichever of the trigger
file and the two rules are on:

- the trigger file and/or the slow-step rule: one broadcast from rank 0, carrying the trigger
  request and rank 0's spike evidence;
- with the straggler rule, or with ``--profile-max-gb``: one all-gather instead: each rank adds
  its number and how many units its share of the disk budget still holds, rank 0 also the
  request and its spike evidence. A capture one of its ranks has no room for is refused at the
  poll (listed with the reason, no capture slot used), not agreed and then skipped there.

Both are one fixed-size tensor of JSON (``exchange.py``), where the trigger alone used to make
two collectives (``broadcast_object_list``: the size, then the pickled bytes). This module is
the poll's built-in part (``poll_exchange.PollPart``): it adds its entries to the exchange, which
another source's part (a row of ``config/polled.py``) shares without a place here.

Every rank then runs the same pure decision on the same exchanged data, so all of them agree on
the capture (its units, its ranks, its number) and on every window the job has, without a
second collective. Without a rule and a trigger file none of this exists; once
``--profile-max-captures`` is reached (and no trigger file is armed) the exchange, the timing
and the ``Work.wait`` timing stop on every rank at the same poll.
"""

import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import collective_wait
from .. import log
from .anomaly import (SLOW_STEP,
    STRAGGLER,
    Capture,
    CaptureLimits,
    JobWindows,
    SpikeRule,
    StragglerRule,
    decide)
from .capture_words import describe
from ..config.ranks import short_ranks
from ..config.window import OPEN_ENDED, StepSchedule

# Refused captures the manifest lists (the count goes on).
NOT_CAPTURED_LISTED = 10
_clock = time.perf_counter  # module-level, so a test can drive the unit times

# This rank's room for a capture: None when nothing bounds it, else (how many more units it can
# record, what bounds it: the disk budget's share, or profiling having ended here).
Room = Callable[[], Optional[Tuple[int, str]]]


def measures(plan: Any) -> bool:
    """Does this rank time its units? Rank 0 for the slow-step rule, every rank for the
    straggler rule (in a job of more than one rank)."""
    config = plan.config
    if not (config.profile and config.captures):
        return False
    return (config.profile_on_slow_step is not None and plan.rank == 0) or \
        (config.profile_on_straggler is not None and plan.world_size > 1)


class StepClock:
    """This rank's unit times since the last poll: (unit, seconds, seconds waited in
    collectives). ``began``/``ended`` run on the unit's own thread, around the work only."""

    __slots__ = ("pending", "on", "_waits", "_n", "_t0", "_w0")

    def __init__(self, waits: bool) -> None:
        self.pending: List[Tuple[int, float, float]] = []
        self.on = True
        self._waits = waits
        self._n: Optional[int] = None
        self._t0 = self._w0 = 0.0

    def began(self, n: int) -> None:
        if self.on:
            self._n = n
            self._w0 = collective_wait.waited() if self._waits else 0.0
            self._t0 = _clock()

    def ended(self, n: int, failed: bool = False) -> None:
        if n != self._n:
            return  # not begun here (a nested or skipped unit)
        self._n = None
        if failed or not self.on:
            return
        seconds = _clock() - self._t0
        waited = collective_wait.waited() - self._w0 if self._waits else 0.0
        self.pending.append((n, seconds, waited))

    def take(self) -> List[Tuple[int, float, float]]:
        pending, self.pending = self.pending, []
        return pending


class CapturePoll:
    """One recorder's poll: the trigger watcher (if any) and the capture rules (if any)."""

    def __init__(self, plan: Any, report: Any, watcher: Any = None,
                 room: Optional[Room] = None) -> None:
        config = self.config = plan.config
        self.plan, self.report, self.watcher, self.room = plan, report, watcher, room
        # every rank's room must be known to all where a budget bounds what a rank may write
        self.budgeted = config.profile_max_gb is not None and room is not None
        self.rank, self.world_size, self.unit = plan.rank, plan.world_size, plan.unit
        self.warmup_until = plan.first - 1 + config.profile_capture_warmup
        self.spike = SpikeRule(config.profile_on_slow_step, self.warmup_until) \
            if config.profile_on_slow_step is not None and plan.rank == 0 else None
        self.straggler = StragglerRule(config.profile_on_straggler) \
            if config.profile_on_straggler is not None and plan.world_size > 1 else None
        self.limits = CaptureLimits(config.profile_max_captures, config.profile_capture_cooldown)
        self.windows = JobWindows([(w.first_touched, OPEN_ENDED if w.end is None else w.end - 1)
                                   for w in plan.windows])
        self.waits = bool(self.straggler) and collective_wait.install()
        self.clock: Optional[StepClock] = StepClock(self.waits) if measures(plan) else None
        self.captures: List[Capture] = []
        self._reasons: List[Tuple[int, int, Dict[str, Any]]] = []  # (first, last, evidence)
        self.not_captured: List[Dict[str, Any]] = []
        self.not_captured_count = 0
        self.measure: Optional[str] = None
        self._said: set = set()
        if config.profile_on_straggler is not None and plan.world_size <= 1 and plan.rank == 0:
            report("warning", "capture", "--profile-on-straggler needs more than one rank to "
                                         "compare; this job has one, so it never captures")

    # -- the exchange -----------------------------------------------------------------------

    name = "the trigger file and the capture rules"

    @property
    def done(self) -> bool:
        """Nothing is left to poll for (the same on every rank: config and agreed state)."""
        return not self.config.profile_trigger_file \
            and (not self.config.captures or self.limits.exhausted)

    @property
    def gathers(self) -> bool:
        """Every rank's entries are needed: the straggler rule's numbers, every rank's room."""
        return self.straggler is not None or self.budgeted

    def contribute(self, n: int, mine: Dict[str, Any]) -> None:
        """This rank's entries in the poll's one exchange (``poll_exchange.PollExchange``)."""
        units = self.clock.take() if self.clock is not None else []
        quiet = [u for u in units if not self.windows.busy(u[0])]
        if self.rank == 0:
            if self.watcher is not None:
                mine["request"] = self.watcher.read_new()
            if self.spike is not None:
                spike = self.spike.worst([(u, s) for u, s, _ in quiet])
                if spike is not None:
                    mine["spike"] = spike.evidence()
        if self.straggler is not None:
            own = [(u, s - w) for u, s, w in quiet if u > self.warmup_until]
            mine["number"] = statistics.median(x for _, x in own) if own else None
            mine["units"] = [own[0][0], own[-1][0]] if own else None
        if self.budgeted and self.room is not None:
            mine["room"] = self.room()
        if self.straggler is not None and self.measure is None:
            self._choose_measure()

    def agreed(self, n: int, shared: List[Optional[Dict[str, Any]]]
               ) -> Tuple[Optional[dict], Optional[Capture]]:
        """Every rank, at the same unit ``n``: (the trigger request, the capture) all agree on."""
        lead = shared[0] or {}
        request = lead.get("request")
        if request is not None:
            self.watcher.accepted(request)
            if not self.capturing(n):  # else every rank ignores it (the recorder says so)
                self._request_window(request, n)
            if lead.get("spike"):
                self._refused(n, lead["spike"], "a trigger request came at the same poll")
            return request, None
        straggler = None
        if self.straggler is not None and len(shared) == self.world_size:
            straggler = self.straggler.judge([(c or {}).get("number") for c in shared])
        capture, why = decide(n, spike=lead.get("spike"), straggler=straggler,
                              limits=self.limits, windows=self.windows,
                              steps=self.config.profile_capture_steps, last_unit=self.plan.last,
                              no_room=lambda ranks, units: self._no_room(shared, ranks, units))
        if capture is not None:
            if straggler is not None and lead.get("spike") is None:
                capture.evidence.update(measure=self.measure,
                                        units=(shared[straggler.rank] or {}).get("units"))
            self._took(capture)
        elif why is not None:
            seen = lead.get("spike") or (straggler.evidence() if straggler is not None else {})
            self._refused(n, seen, why)
        if self.done:
            self.stop()
        return None, capture

    def capturing(self, n: int) -> bool:
        """A capture covers unit ``n`` (captures never overlap: only the last can)."""
        return any(c.first <= n <= c.last for c in self.captures[-1:])

    def _choose_measure(self) -> None:
        """What the straggler rule compares, once the process group is up."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return
        self.measure = collective_wait.measure(str(dist.get_backend()))
        if not self.measure.startswith("compute"):
            self.say_once("measure", f"--profile-on-straggler compares each rank's "
                                      f"{self.measure}; a synchronous job evens that out")

    def _no_room(self, shared: Sequence[Optional[Dict[str, Any]]],
                 ranks: Optional[Tuple[int, ...]], units: int) -> Optional[str]:
        """Why a capture of ``units`` on ``ranks`` (None: the selected ones) cannot be recorded
        by all of them, from the room each rank shared; None when it can."""
        chosen = ranks if ranks is not None else self.plan.selected_ranks
        short: List[int] = []
        bounds = set()
        for rank in chosen:
            room = (shared[rank] or {}).get("room") if 0 <= rank < len(shared) else None
            if isinstance(room, (list, tuple)) and len(room) == 2 and room[0] < units:
                short.append(rank)
                bounds.add(str(room[1]))
        if not short:
            return None
        return (f"rank(s) {short_ranks(short)} could not record its {units} "
                f"{self.unit.plural if units > 1 else self.unit.name}: "
                f"{'; '.join(sorted(bounds))}")

    # -- what was agreed ------------------------------------------------------------------------

    def _request_window(self, request: dict, n: int) -> None:
        from .trigger import window_for

        window = window_for(request, n, self.plan.last)
        if window is not None:
            self.windows.add(n, window[1])
            self._reasons.append((n, window[1], {"rule": "request", "request": request["id"],
                                                 "seen_at": n}))

    def _took(self, capture: Capture) -> None:
        self.captures.append(capture)
        self._reasons.append((capture.first, capture.last, capture.evidence))
        if self.rank == 0:
            ranks = capture.ranks if capture.ranks is not None else self.plan.selected_ranks
            log.info(f"capture {capture.number}/{self.limits.max_captures}: "
                     f"{describe(capture.evidence, self.unit.name)}: profiling rank(s) "
                     f"{short_ranks(list(ranks))} at {self.unit.plural} "
                     f"{capture.first}-{capture.last}")

    def _refused(self, n: int, evidence: Dict[str, Any], why: str) -> None:
        self.not_captured_count += 1
        if len(self.not_captured) < NOT_CAPTURED_LISTED:
            self.not_captured.append({"seen_at": n, "why": why, **evidence})
        if self.rank == 0 and why not in self._said:
            self._said.add(why)
            log.info(f"not captured at {self.unit.name} {n} ({why}): "
                     f"{describe(evidence, self.unit.name)}")

    def say_once(self, key: str, message: str) -> None:
        """A warning said once, on rank 0 (the exchange's too)."""
        if self.rank == 0 and key not in self._said:
            self._said.add(key)
            self.report("warning", "capture", message)

    def sessions(self, capture: Capture) -> List[StepSchedule]:
        """This rank's sessions for ``capture``: none where it does not choose this rank."""
        ranks = capture.ranks if capture.ranks is not None else self.plan.selected_ranks
        if self.rank not in ranks:
            return []
        if self.plan.session_per_unit:
            return [StepSchedule(skip_first=u, warmup=0, active=1)
                    for u in range(capture.first, capture.last + 1)]
        return [StepSchedule(skip_first=capture.first, warmup=0,
                             active=capture.last - capture.first + 1)]

    def reason_for(self, start: int) -> Optional[Dict[str, Any]]:
        """Why the window whose first recorded unit is ``start`` was taken (None: planned)."""
        for first, last, evidence in reversed(self._reasons):
            if first <= start <= last:
                reason = dict(evidence)
                if reason.get("rule") == STRAGGLER:
                    reason["this_rank"] = ("straggler" if self.rank == reason["straggler"]
                                           else "reference")
                return reason
        return None

    def stop(self) -> None:
        """No more timing on this rank (the last capture is agreed, or the recorder closes)."""
        if self.clock is not None:
            self.clock.on = False
            self.clock.pending = []
        if self.waits:
            self.waits = False
            collective_wait.uninstall()

    def summary(self) -> Dict[str, Any]:
        """The manifest's ``captures``: the rules, what was taken, what was not and why."""
        config = self.config
        rules = []
        if config.profile_on_slow_step is not None:
            rules.append({"rule": SLOW_STEP, "factor": config.profile_on_slow_step})
        if config.profile_on_straggler is not None:
            rules.append({"rule": STRAGGLER, "factor": config.profile_on_straggler})
        return {"rules": rules, "steps": config.profile_capture_steps,
                "warmup_until": self.warmup_until, "cooldown": config.profile_capture_cooldown,
                "max_captures": config.profile_max_captures,
                "poll": config.profile_trigger_poll,
                "taken": [{"capture": c.number, "first": c.first, "last": c.last,
                           "ranks": list(c.ranks) if c.ranks is not None
                           else list(self.plan.selected_ranks), "rule": c.evidence.get("rule")}
                          for c in self.captures],
                "not_captured": self.not_captured_count,
                "not_captured_first": self.not_captured,
                "ratios_seen": {SLOW_STEP: self.spike.seen.as_dict() if self.spike else None,
                                STRAGGLER: self.straggler.seen.as_dict() if self.straggler
                                else None}}
