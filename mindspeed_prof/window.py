"""Step arithmetic: which iterations a run profiles, checked before the first step.

Iterations are numbered as the training log prints them: 1-based and global, so a run resumed
from a checkpoint at iteration 1000 executes 1001, 1002, ... The window is ``[start, end)``.

The schedule is expressed in those absolute numbers, because the backends set the profiler's
step counter to the logged iteration: the trace's ``ProfilerStep#N`` then *is* iteration N.
"""

import itertools
from dataclasses import dataclass
from typing import Optional

from .errors import ConfigError

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


def plan_window(*, start: int, end: int, first_iteration: int = 1,
                train_iters: Optional[int] = None, exit_interval: Optional[int] = None,
                ) -> StepSchedule:
    """The schedule that records logged iterations ``[start, end)``, or a ConfigError.

    ``first_iteration`` is the first iteration this process will execute (``args.iteration + 1``
    after a resume). ``end == -1`` means until ``train_iters``. A window that cannot complete
    (already passed, beyond ``--train-iters``, cut by ``--exit-interval``) is refused here, so the
    user learns at start-up rather than finding an empty folder hours later.
    """
    if start < 1:
        raise ConfigError(f"--profile-step-start {start} must be >= 1 (iterations are numbered "
                          f"from 1, as the training log prints them).")
    if end != -1 and end <= start:
        raise ConfigError(f"--profile-step-end {end} must be > --profile-step-start {start}; "
                          f"use -1 to profile to the end.")
    if start < first_iteration:
        resumed = (f"this run resumes at iteration {first_iteration}"
                   if first_iteration > 1 else "iterations start at 1")
        raise ConfigError(f"--profile-step-start {start} has already passed: {resumed}; "
                          f"use --profile-step-start {first_iteration} or later.")
    last = last_iteration(first_iteration, train_iters, exit_interval)
    limit = ("--train-iters" if last == train_iters else "--exit-interval")
    if last is not None:
        if first_iteration > last:
            raise ConfigError(f"no iteration will run: this run starts at iteration "
                              f"{first_iteration} and {limit} stops it at {last}; "
                              f"raise {limit} or drop --profile.")
        if start > last:
            raise ConfigError(f"--profile-step-start {start} is never reached: {limit} stops "
                              f"training after iteration {last}; use --profile-step-start <= {last}.")
        if end != -1 and end - 1 > last:
            raise ConfigError(f"--profile-step-end {end} needs iterations up to {end - 1}, but "
                              f"{limit} stops training after iteration {last}; use "
                              f"--profile-step-end {last + 1} (or -1 for the end).")
    warmup = 1 if start - 1 >= first_iteration else 0
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
    if tokens is None:
        return ()
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


def windows_of(config):
    """The ``[start, end)`` windows a config asks for, in order (lazy: may be endless)."""
    if config.profile_steps:
        return iter([(first, last + 1) for first, last in config.profile_steps])
    if config.profile_trigger_file:
        return iter(())  # profile on request only
    start, end, every = config.profile_step_start, config.profile_step_end, config.profile_every
    if not every:
        return iter([(start, end)])
    return ((start + k * every, end + k * every) for k in itertools.count())


def plan_windows(config, *, first_iteration=1, train_iters=None, exit_interval=None):
    """Every window's schedule, checked like ``plan_window``. Repeated windows stop at the last
    one that fits in training; the first must fit, or the run is refused."""
    plans, previous_end = [], None
    last = last_iteration(first_iteration, train_iters, exit_interval)
    for start, end in windows_of(config):
        if config.profile_every and start < first_iteration:
            continue  # a resumed run: repeated windows before the checkpoint are history
        repeated = bool(config.profile_every) and bool(plans)
        if repeated and last is not None and end - 1 > last:
            break
        if repeated and last is None and len(plans) >= MAX_OPEN_REPEATS:
            break
        floor = first_iteration if previous_end is None else previous_end
        schedule = plan_window(start=start, end=end, first_iteration=first_iteration,
                               train_iters=train_iters, exit_interval=exit_interval)
        if schedule.warmup and schedule.skip_first < floor:
            schedule = StepSchedule(skip_first=start, warmup=0, active=schedule.active)
        plans.append(schedule)
        previous_end = schedule.end
    return plans
