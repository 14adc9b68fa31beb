"""What a recorder records: the pure half of the window recorder (DESIGN §6).

A ``Plan`` answers *what*, before any unit runs: whether this rank records (the selected ranks),
which windows of units it records, as which sessions, into which folders, under which capture
names, and whether the disk budget allows it. It is pure: no torch, no threads, no signals, no
files written (the budget reads the save path's free space). Start-up (``recorder.arm``) and
``mindspeed-prof show-config`` build it with the same two calls, ``make_plan`` then
``Plan.with_windows``, so what the dry run prints is what the job does.
"""

import os
from dataclasses import dataclass, replace
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

from ..config import budget, names, ranks
from .. import layout
from ..config.profiler_config import ProfilerConfig
from ..errors import ConfigError
from ..config.units import ITERATION, Unit, in_words
from ..config.polled import polled
from ..config.window import OPEN_ENDED, StepSchedule, last_iteration, plan_windows, several_windows

LayoutOf = Callable[[int], dict]


@dataclass(frozen=True)
class Plan:
    """One recorder's plan; see the module docstring. ``windows`` are the planned windows
    (``()`` until ``with_windows``); ``sessions()`` splits them as they will run."""

    config: ProfilerConfig
    unit: Unit
    rank: int
    world_size: int
    selected_ranks: Tuple[int, ...]
    save_path: str
    role: Optional[str] = None
    session_per_unit: bool = False
    own_folders: bool = False  # every window in its own folder (windows may come over HTTP)
    windows: Tuple[StepSchedule, ...] = ()
    first: int = 1
    last: Optional[int] = None  # the last unit that runs, when known

    @property
    def active(self) -> bool:
        """This rank records windows."""
        return self.config.profile and self.rank in self.selected_ranks

    @property
    def polling(self) -> bool:
        """This rank takes part in the poll of the on-demand trigger and the capture rules
        (every rank does, selected or not)."""
        return self.config.profile and polled(self.config)

    @property
    def idle(self) -> bool:
        """Nothing to do per unit on this rank: no window, no trigger check."""
        return not (self.active or self.polling)

    def with_windows(self, *, first: int = 1, last: Optional[int] = None,
                     exit_interval: Optional[int] = None) -> "Plan":
        """The windows, checked against the run's first and last unit (ConfigError naming the
        flag when one cannot complete). ``last``: ``--train-iters``/``total_steps`` if known."""
        windows: Sequence[StepSchedule] = ()
        if self.config.profile:
            try:
                windows = plan_windows(self.config, first_iteration=first, train_iters=last,
                                       exit_interval=exit_interval)
            except ConfigError as exc:
                raise ConfigError(in_words(str(exc), self.unit)) from None
        return replace(self, windows=tuple(windows), first=first,
                       last=last_iteration(first, last, exit_interval))

    def sessions(self, windows: Optional[Sequence[StepSchedule]] = None
                 ) -> Iterator[StepSchedule]:
        """The sessions to open, in order: each window, or each window's units one by one."""
        for window in self.windows if windows is None else windows:
            if not self.session_per_unit:
                yield window
                continue
            end = window.end if window.end is not None else OPEN_ENDED
            for n in range(window.start, end):
                yield StepSchedule(skip_first=n, warmup=0, active=1)

    def first_session(self) -> Optional[StepSchedule]:
        return next(self.sessions(), None)

    def window_dir(self, session: StepSchedule) -> str:
        """The folder a session writes into: the save path, or its window's own folder."""
        if not (self.session_per_unit or self.own_folders or several_windows(self.config)):
            return self.save_path
        return layout.window_dir(self.save_path, session.start, session.end, self.unit.prefix)

    def worker_name(self, session: StepSchedule) -> str:
        """The NPU capture's name prefix: rank (and role); with a session per unit, the unit
        too (``rank0_req2``), so one rank's captures are told apart by name."""
        prefix = self.unit.prefix if self.session_per_unit else None
        return layout.session_worker_name(self.rank, self.role, prefix, session.start)

    def certain_windows(self) -> Sequence[StepSchedule]:
        """The windows sure to happen: all of them when the last unit is known; else only the
        first (repeated windows are planned far ahead; the live budget check bounds the rest)."""
        return self.windows if self.last is not None else self.windows[:1]

    def check_budget(self, backend: str, ranks_on_node: int) -> Optional[budget.RankBudget]:
        """ConfigError when the certain windows exceed ``--profile-max-gb`` or the free space
        of the save path on this node; the rank's budget for the live check otherwise."""
        if not self.active:
            return None
        rank_budget = budget.RankBudget(self.config, backend, list(self.selected_ranks))
        try:
            rank_budget.check_start(list(self.certain_windows()), self.save_path, ranks_on_node)
        except ConfigError as exc:
            raise ConfigError(in_words(str(exc), self.unit)) from None
        return rank_budget

    def selected_on_node(self, local_rank: Optional[int]) -> int:
        """How many selected ranks share this rank's node (what the free-space check sizes)."""
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", 0) or 0)
        if not local_world or local_rank is None:
            return 1
        first = self.rank - local_rank
        return max(1, sum(1 for r in self.selected_ranks if first <= r < first + local_world))


def make_plan(config: ProfilerConfig, *, unit: Unit = ITERATION, rank: int = 0,
              world_size: int = 1, layout_of: Optional[LayoutOf] = None,
              role: Optional[str] = None, session_per_unit: bool = False,
              save_path: Optional[str] = None, own_folders: bool = False) -> Plan:
    """Who records: the ranks resolved (ConfigError for ranks the job lacks). ``layout_of``
    maps a global rank to its {tp, pp, dp, cp, ep, node} for topology selectors. ``role`` is
    checked here, where it enters the core: it names a folder under the save path."""
    if role is not None:
        names.role(role)
    selected: List[int] = ranks.resolve(config.profile_ranks, world_size, layout_of) \
        if config.profile else []
    return Plan(config=config, unit=unit, rank=rank, world_size=world_size,
                selected_ranks=tuple(selected), save_path=save_path or config.profile_save_path,
                role=role, session_per_unit=session_per_unit, own_folders=own_folders)
