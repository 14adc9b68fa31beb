"""Step arithmetic: which iterations a run profiles, checked before the first step.

Iterations are numbered as the training log prints them: 1-based and global, so a run resumed
from a checkpoint at iteration 1000 executes 1001, 1002, ... The window is ``[start, end)``.

The schedule is expressed in those absolute numbers, because the backends set the profiler's
step counter to the logged iteration: the trace's ``ProfilerStep#N`` then *is* iteration N.
"""

import itertools
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from ..errors import ConfigError
from . import polled

# Active length used when the window runs "until training ends" and train_iters is unknown
# (plain loops): the profiler records until stop().
OPEN_ENDED = 2**31 - 1
# Repeated windows of a loop without train_iters are planned this far ahead.
MAX_OPEN_REPEATS = 10_000


@dataclass(frozen=True)
class StepSchedule:
    """torch/torch_npu ``schedule`` arguments, counted in logged iterations."""

    skip_first: int
    warmup: int
    active: int
    repeat: int = 1
    wait: int = 0

    @property
    def start(self):
        """First recorded iteration."""
        return self.skip_first + self.warmup

    @property
    def end(self):
        """First iteration not recorded (``None`` when open-ended)."""
        return None if self.active == OPEN_ENDED else self.start + self.active

    @property
    def first_touched(self):
        """The iteration at which the profiler must exist (warm-up included)."""
        return self.skip_first

    def describe(self):
        if self.end is None:
            return f"iterations {self.start}.. (until training ends)"
        last = self.end - 1
        span = f"iteration {self.start}" if last == self.start else f"iterations {self.start}-{last}"
        return span + (f" (warm-up at {self.skip_first})" if self.warmup else "")


class TrainIters(int):
    """``--train-iters`` as a number that remembers which flag set it.

    Megatron derives the iteration count from ``--train-samples`` in sample-based runs; a window
    that does not fit must name the flag the user typed. The number travels unchanged through
    the recorder (which knows nothing of Megatron's flags) to the messages here.
    """

    flag: str

    def __new__(cls, value: int, flag: str = "--train-iters"):
        number = super().__new__(cls, value)
        number.flag = flag
        return number


def train_limit(train_iters: Optional[int], train_samples: Optional[int] = None):
    """``train_iters`` as the run's limit, named ``--train-samples`` when samples set it."""
    if train_iters is None or not train_samples:
        return train_iters
    return TrainIters(train_iters, "--train-samples")


def last_iteration_before_exit(first_iteration, exit_interval):
    """Megatron stops after the first logged iteration divisible by ``--exit-interval``."""
    if not exit_interval:
        return None
    return -(-first_iteration // exit_interval) * exit_interval


def last_iteration(first_iteration, train_iters, exit_interval):
    """The last iteration the run executes: ``--train-iters`` or an earlier ``--exit-interval``."""
    exit_at = last_iteration_before_exit(first_iteration, exit_interval)
    if train_iters is None:
        return exit_at
    return train_iters if exit_at is None else min(train_iters, exit_at)


def _limit_flag(last, train_iters):
    """The flag that ends training at ``last``: what a message names and its fix raises."""
    if last == train_iters:
        return getattr(train_iters, "flag", "--train-iters")
    return "--exit-interval"


def _check_something_runs(first_iteration, last, limit):
    if last is not None and first_iteration > last:
        raise ConfigError(f"no iteration will run: this run starts at iteration "
                          f"{first_iteration} and {limit} stops it at {last}; "
                          f"raise {limit} or drop --profile.")


def check_start_end(start: int, end: int) -> None:
    """The one rule for ``--profile-step-start/-end`` on their own: ConfigError naming the fix."""
    if start < 1:
        raise ConfigError(f"--profile-step-start {start} must be >= 1 (iterations are numbered "
                          f"from 1, as the training log prints them).")
    if end != -1 and end <= start:
        raise ConfigError(f"--profile-step-end {end} must be > --profile-step-start {start}; "
                          f"use -1 to profile to the end.")


def plan_window(*, start: int, end: int, first_iteration: int = 1,
                train_iters: Optional[int] = None, exit_interval: Optional[int] = None,
                ) -> StepSchedule:
    """The schedule that records logged iterations ``[start, end)``, or a ConfigError.

    ``first_iteration`` is the first iteration this process will execute (``args.iteration + 1``
    after a resume). ``end == -1`` means until ``train_iters``. A window that cannot complete
    (already passed, beyond ``--train-iters``, cut by ``--exit-interval``) is refused here, so the
    user learns at start-up rather than finding an empty folder hours later.
    """
    check_start_end(start, end)
    if start < first_iteration:
        resumed = (f"this run resumes at iteration {first_iteration}"
                   if first_iteration > 1 else "iterations start at 1")
        raise ConfigError(f"--profile-step-start {start} has already passed: {resumed}; "
                          f"use --profile-step-start {first_iteration} or later.")
    last = last_iteration(first_iteration, train_iters, exit_interval)
    limit = _limit_flag(last, train_iters)
    if last is not None:
        _check_something_runs(first_iteration, last, limit)
        if start > last:
            raise ConfigError(f"--profile-step-start {start} is never reached: {limit} stops "
                              f"training after iteration {last}; use --profile-step-start <= {last}"
                              f" or raise {limit}.")
        if end != -1 and end - 1 > last:
            raise ConfigError(f"--profile-step-end {end} needs iterations up to {end - 1}, but "
                              f"{limit} stops training after iteration {last}; use "
                              f"--profile-step-end {last + 1} (or -1 for the end), or raise "
                              f"{limit}.")
    return _schedule(start, end, floor=first_iteration, last=last)


def _schedule(start, end, *, floor, last):
    """``[start, end)`` as a schedule, warming up on ``start - 1`` when that iteration runs and
    belongs to no earlier window (``floor``: the first iteration free for warm-up)."""
    warmup = 1 if start - 1 >= floor else 0
    if end == -1:
        active = OPEN_ENDED if last is None else last - start + 1
    else:
        active = end - start
    return StepSchedule(skip_first=start - warmup, warmup=warmup, active=active)


def parse_step_ranges(tokens):
    """``--profile-steps 100-102,1100-1102`` -> ((100, 102), (1100, 1102)): inclusive, sorted.

    Both ends are iterations that get profiled, as in ``--profile-ranks 0-7``.
    """
    flag = "--profile-steps"
    if tokens is None or (isinstance(tokens, tuple) and not tokens):
        return ()  # not asked for (the canonical empty value a config holds)
    if isinstance(tokens, (str, int)):
        tokens = [tokens]
    ranges = []
    for token in tokens:
        if isinstance(token, (tuple, list)) and len(token) == 2:
            ranges.append((int(token[0]), int(token[1])))
            continue
        for part in str(token).replace(",", " ").split():
            first, _, last = part.partition("-")
            if not first.isdigit() or (last and not last.isdigit()):
                raise ConfigError(f"{flag} {part!r} is not an iteration range; write ranges of "
                                  f"logged iterations such as 100-102,1100-1102 (or 7 for one).")
            ranges.append((int(first), int(last or first)))
    if not ranges:
        shown = " ".join(repr(str(t)) for t in tokens) if tokens else "[]"
        raise ConfigError(f"{flag} {shown} names no window (an empty variable?); write ranges "
                          f"of logged iterations such as 100-102,1100-1102, or leave {flag} out.")
    ranges.sort()
    for first, last in ranges:
        if first < 1:
            raise ConfigError(f"{flag} {first}-{last}: iterations are numbered from 1, as the "
                              f"training log prints them; use ranges from 1 on.")
        if last < first:
            raise ConfigError(f"{flag} {first}-{last} runs backwards; write it as {last}-{first}.")
    for (a, b), (c, d) in zip(ranges, ranges[1:]):
        if c <= b:
            raise ConfigError(f"{flag} windows {a}-{b} and {c}-{d} overlap; merge them or move one.")
    return tuple(ranges)


def parse_forward_range(tokens):
    """``--profile-forwards 2-5`` -> ((2, 5),): one inclusive range of forwards, from 1."""
    flag = "--profile-forwards"
    if tokens is None or (isinstance(tokens, tuple) and not tokens):
        return ()
    items = tokens if isinstance(tokens, (list, tuple)) else [tokens]
    if len(items) == 1 and isinstance(items[0], (list, tuple)) and len(items[0]) == 2:
        ranges = [(int(items[0][0]), int(items[0][1]))]
    else:
        ranges = []
        for part in " ".join(str(t) for t in items).replace(",", " ").split():
            first, _, last = part.partition("-")
            if not first.isdigit() or (last and not last.isdigit()):
                raise ConfigError(f"{flag} {part!r} is not a range of forwards; write A-B, e.g. "
                                  f"{flag} 2-5 (forward 1 is the prefill), or 3 for one.")
            ranges.append((int(first), int(last or first)))
    if len(ranges) != 1:
        shown = " ".join(str(t) for t in items) or "[]"
        raise ConfigError(f"{flag} {shown!r} must be one range A-B (e.g. 2-5), not "
                          f"{len(ranges) or 'no'} ranges.")
    first, last = ranges[0]
    if first < 1:
        raise ConfigError(f"{flag} {first}-{last}: forwards are numbered from 1 (the prefill); "
                          f"use {flag} 1-{max(last, 1)} or later.")
    if last < first:
        raise ConfigError(f"{flag} {first}-{last} runs backwards; write it as {last}-{first}.")
    return ((first, last),)


def several_windows(config):
    """True when each window gets its own ``iter_{first}-{last}/`` folder."""
    return bool(config.profile_every or config.profile_steps or polled.polled(config))


def passed_windows(config, first_iteration):
    """The ``--profile-steps`` / ``--profile-every`` windows a resumed run skips (inclusive)."""
    if config.profile_steps:
        return [(a, b) for a, b in config.profile_steps if a < first_iteration]
    if config.profile_every and not polled.replaces_every(config):
        start, end, every = config.profile_step_start, config.profile_step_end, config.profile_every
        return [(start + k * every, end - 1 + k * every)
                for k in range(_first_every_index(config, first_iteration))]
    return []


def plan_windows(config, *, first_iteration=1, train_iters=None, exit_interval=None):
    """Every window's schedule, or a ConfigError naming the flag that asked for the window.

    Windows a resumed run has already passed are skipped; only a plan with nothing left to
    record is refused. ``--profile-every`` windows stop at the last one that fits in training;
    an explicit ``--profile-steps`` window that cannot complete is refused.
    """
    if config.profile_steps:
        return _plan_steps(config, first_iteration, train_iters, exit_interval)
    if polled.replaces_every(config):
        return []  # profile on request only (the trigger file)
    if config.profile_every:
        return _plan_every(config, first_iteration, train_iters, exit_interval)
    if polled.polled(config):
        return []  # windows at run time; --profile-step-start/-end alone plan no window
    return [plan_window(start=config.profile_step_start, end=config.profile_step_end,
                        first_iteration=first_iteration, train_iters=train_iters,
                        exit_interval=exit_interval)]


def _format_steps(ranges):
    return ",".join(f"{a}-{b}" for a, b in ranges)


def _plan_steps(config, first_iteration, train_iters, exit_interval):
    flag = "--profile-steps"
    last = last_iteration(first_iteration, train_iters, exit_interval)
    limit = _limit_flag(last, train_iters)
    _check_something_runs(first_iteration, last, limit)
    ahead = [(a, b) for a, b in config.profile_steps if a >= first_iteration]
    if not ahead:
        raise ConfigError(f"{flag} {_format_steps(config.profile_steps)}: every window has "
                          f"already passed (this run resumes at iteration {first_iteration}); "
                          f"give windows from iteration {first_iteration} on.")
    plans, floor = [], first_iteration
    for first, final in ahead:
        if last is not None and final > last:
            fix = f"use {first}-{last} instead, drop it" if first <= last else "drop it"
            raise ConfigError(f"{flag} window {first}-{final} needs iterations up to {final}, "
                              f"but {limit} stops training after iteration {last}; {fix}, or "
                              f"raise {limit}.")
        plans.append(_schedule(first, final + 1, floor=floor, last=last))
        floor = final + 1
    return plans


def _first_every_index(config, first_iteration):
    """Index of the first ``--profile-every`` window that starts at or after ``first_iteration``."""
    behind = first_iteration - config.profile_step_start
    return max(0, -(-behind // config.profile_every))


def _plan_every(config, first_iteration, train_iters, exit_interval):
    start, end, every = config.profile_step_start, config.profile_step_end, config.profile_every
    skipped = _first_every_index(config, first_iteration)
    last = last_iteration(first_iteration, train_iters, exit_interval)
    limit = _limit_flag(last, train_iters)
    _check_something_runs(first_iteration, last, limit)
    plans, floor = [], first_iteration
    for k in itertools.count(skipped):
        first, stop = start + k * every, end + k * every
        if last is not None and stop - 1 > last:
            break
        if last is None and len(plans) >= MAX_OPEN_REPEATS:
            break
        plans.append(_schedule(first, stop, floor=floor, last=last))
        floor = stop
    if not plans:
        first, stop = start + skipped * every, end + skipped * every
        if skipped:
            where = (f"this run resumes at iteration {first_iteration} and {limit} stops it "
                     f"after iteration {last}, but the next window is iterations "
                     f"{first}-{stop - 1}")
        else:
            where = (f"the first window, iterations {first}-{stop - 1} (--profile-step-start "
                     f"{start}, --profile-step-end {end}), needs iterations up to {stop - 1} but "
                     f"{limit} stops training after iteration {last}")
        raise ConfigError(f"--profile-every {every}: no window fits: {where}; raise {limit}, or "
                          f"choose --profile-step-start/-end so that a window falls within "
                          f"{first_iteration}-{last}.")
    return plans


@dataclass(frozen=True)
class WindowRequest:
    """A window asked for at run time: from the next unit, skip ``delay`` units, then record
    ``length`` of them (0: until stopped); ``prefix``: the folder it goes in; ``by``: who asked."""

    delay: int = 0
    length: int = 0
    prefix: Optional[str] = None
    by: str = "http"
    # A window a rule chose for this rank (a trigger request, a capture): the sessions it
    # opens, the window they record (for per-unit sessions), and whether they take the place
    # of what is queued (a trigger request) or go before it (a capture). Empty: the sessions
    # follow from ``delay`` and ``length`` (an HTTP start).
    sessions: Tuple["StepSchedule", ...] = ()
    window: Optional["StepSchedule"] = None
    replaces_queue: bool = False

    def origin(self, asked_at: int) -> Dict[str, Any]:
        return {"by": self.by, "asked_before": asked_at, "delay": self.delay,
                "max": self.length or None, "prefix": self.prefix}
