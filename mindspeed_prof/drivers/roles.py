"""The RL role driver: a role's worker tells it which RL step and which stage runs (DESIGN §6).

    prof = RoleProfiler("actor", config, total_steps=100)   # rank from torch.distributed / RANK
    for g in steps:                                          # the controller's RL step number
        with prof.step(g):
            with prof.stage("old_logprob"): ...
            with prof.stage("update"): ...
    prof.close()                                             # also at exit, on every exit path

Output goes to ``{save}/{role}/``, a complete save path of its own. Every session covers exactly
one block of this role's own work, never the time between two of its steps, when colocated roles
(verl's ActorRolloutRefWorker) compute in the same process and would land in the trace:
- without ``profile_stages`` each RL step of a window is one session (``step_{g}-{g}/``), its
  stages ``stage:NAME`` ranges in it;
- with ``profile_stages`` only those stages are recorded, each occurrence as its own session
  (torch profilers cannot pause inside a session) under ``{save}/{role}/{stage}/``: one window
  recorder per selected stage, each running only while its stage runs.
The recorders enforce "one running session per process": a session that would overlap another
role's is refused with an error naming both roles, and the job goes on.

A step may be entered again with the same number (a worker whose methods the controller calls
one by one, each wrapped in ``step(g)``): stages keep recording their first occurrence in the
step; without ``profile_stages`` only the step's first block is recorded.
"""

import operator
import threading
from typing import Any, ContextManager, Dict, Literal, Optional

from .. import layout
from ..config.profiler_config import ProfilerConfig
from ..recording.environment import rank_from_env
from ..errors import ConfigError
from ..recording.exits import exit_reason
from ..recording.recorder import Failure, WindowRecorder
from ..config.units import RL_STEP
from ..config.window import TrainIters
from .base import NULL_DRIVER

STAGE_RANGE = "stage:{name}"
_NOTHING = NULL_DRIVER.range("")  # reusable: what every call returns where nothing records


class RLStepDriver:
    """One role's RL steps in one process; see the module docstring. Not thread-safe by design:
    a session records only the thread that started it, so step() and stage() belong to the
    thread that computes."""

    def __init__(self, role: str, config: ProfilerConfig, *, rank: Optional[int] = None,
                 world_size: Optional[int] = None, local_rank: Optional[int] = None,
                 total_steps: Optional[int] = None) -> None:
        env_rank, env_world, env_local = rank_from_env()
        self.role = role
        self.config = config
        self.rank = env_rank if rank is None else rank
        self.world_size = max(env_world if world_size is None else world_size, self.rank + 1)
        self.total_steps = total_steps
        self.stages = tuple(config.profile_stages)
        self.closed = False
        self._current: Optional[int] = None  # the RL step running now
        self._last: Optional[int] = None     # the last RL step begun
        self._thread: Optional[int] = None   # the thread that runs the current step
        self._done: set = set()       # stages already recorded in the current step
        self._repeated: set = set()   # steps entered more than once (warned about once)
        self._ran: Dict[str, None] = {}  # every stage name the worker passed, in order
        self._step_ran: set = set()   # the stage names of the current step
        self._first_step: Optional[int] = None
        self._names_checked = False   # the selected names were checked against a step's
        self.recorders: Dict[Optional[str], WindowRecorder] = {}
        if config.profile and config.captures and self.stages:
            flag = ("--profile-on-slow-step" if config.profile_on_slow_step is not None
                    else "--profile-on-straggler")
            raise ConfigError(f"role {role!r}: {flag} judges the time of whole RL steps, but "
                              f"profile_stages {','.join(self.stages)} records stages one by one "
                              f"(a recorder each, none of them timing the step); drop "
                              f"profile_stages to capture whole RL steps, or drop {flag}.")
        try:
            for stage in self.stages or (None,):
                # The role names a folder: the recorder's plan refuses one that cannot.
                recorder = WindowRecorder(
                    config, rank=self.rank, world_size=self.world_size,
                    local_rank=env_local if local_rank is None else local_rank, unit=RL_STEP,
                    role=role, session_per_unit=True,
                    save_path=layout.role_dir(config.profile_save_path, role, stage))
                self.recorders[stage] = recorder
                # A window that does not fit names the argument to raise: total_steps.
                recorder.arm(first=1, last=None if total_steps is None
                             else TrainIters(total_steps, "total_steps"))
                if recorder.manifest is not None and stage is not None:
                    recorder.manifest.describe_run(unit=RL_STEP.name, role=role, first=1,
                                                   last=total_steps, stage=stage)
        except ConfigError as exc:
            self.close("config error", str(exc))
            raise ConfigError(str(exc) if str(exc).startswith(f"role {role!r}")
                              else f"role {role!r}: {exc}") from None
        except BaseException:
            self.close("config error")
            raise
        self.save_path = layout.role_dir(config.profile_save_path, role)
        self.idle = all(recorder.idle for recorder in self.recorders.values())
        if self.idle:
            # Nothing ever records here: the calls become the null driver's.
            self.step, self.stage = NULL_DRIVER.step, NULL_DRIVER.stage  # type: ignore

    # -- the worker's calls ---------------------------------------------------------------------

    def step(self, step: int) -> ContextManager[Any]:
        """Context manager around RL step ``step`` (the controller's number, increasing)."""
        if self.closed:
            raise RuntimeError(f"role {self.role!r}: step({step}) after close(); this profiler "
                               f"has written its final manifest: create a new role_profiler "
                               f"for another run.")
        if self._current is not None and threading.get_ident() != self._thread:
            raise RuntimeError(
                f"role {self.role!r}: step({step}) on thread {threading.current_thread().name!r} "
                f"while step({self._current}) runs on another thread; one process records one "
                f"thread's session at a time: run a role's steps one after the other.")
        if self._current is not None:
            raise RuntimeError(f"role {self.role!r}: step({step}) inside step({self._current}); "
                               f"RL steps do not nest: leave one before entering the next.")
        try:
            # numpy integers too: a controller's step may come back from an array or a batch
            number = operator.index(step)
        except TypeError:
            number = 0
        if isinstance(step, bool) or number < 1:
            raise ValueError(f"role {self.role!r}: step({step!r}) must be the controller's RL "
                             f"step number, an integer >= 1.")
        step = number
        if self._last is not None and step < self._last:
            raise ValueError(f"role {self.role!r}: step({step}) after step({self._last}); RL "
                             f"steps must not go back (pass the controller's step number).")
        return _Step(self, step)

    def stage(self, name: str) -> ContextManager[Any]:
        """Context manager around one stage (``generate``, ``old_logprob``, ``update``…)."""
        if self._current is not None and threading.get_ident() != self._thread:
            raise RuntimeError(
                f"role {self.role!r}: stage({name!r}) on thread "
                f"{threading.current_thread().name!r}, but step {self._current} runs on another "
                f"thread; a profiler session records only the thread that started it: call "
                f"step() and stage() on the thread that computes.")
        if not self.stages:
            return self.recorders[None].range(STAGE_RANGE.format(name=name))
        key = name.lower()
        self._ran.setdefault(key)
        self._step_ran.add(key)
        recorder = self.recorders.get(key)
        if recorder is None or recorder.idle:
            return _NOTHING
        if self._current is None:
            raise RuntimeError(f"role {self.role!r}: stage({name!r}) outside step(); with "
                               f"profile_stages a stage is recorded as part of an RL step: "
                               f"call it inside `with prof.step(g):`.")
        if key in self._done:
            recorder.report("warning", "stage", f"stage {key!r} ran again in RL step "
                                                f"{self._current}; only its first occurrence "
                                                f"in a step is recorded")
            return _NOTHING
        self._done.add(key)
        return _StageSession(recorder, self._current, STAGE_RANGE.format(name=key))

    # -- the Driver shape -----------------------------------------------------------------------

    def begin(self, n: int) -> None:
        self._enter(n)

    def end(self, n: int, failure: Optional[Failure] = None) -> None:
        self._leave(n, failure)

    def range(self, name: str) -> ContextManager[Any]:
        return self.stage(name)

    def close(self, reason: str = "finished", detail: Optional[str] = None) -> None:
        """Stop any running session, wait for its files, write the final manifests. Idempotent;
        also done at exit on every exit path (the recorders install that). A stage selected with
        profile_stages that recorded nothing says why: it never ran, or not in a profiled step
        (not that the loop ended before the window: the steps did run)."""
        if not self.closed and self.stages and self._last is not None:
            for stage, recorder in self.recorders.items():
                windows = recorder.plan.windows
                if recorder.manifest is None or recorder.windows_opened or not windows \
                        or self._last < windows[0].start:
                    continue
                recorder.nothing_profiled_words = self._not_recorded_words(str(stage))
        self.closed = True
        for recorder in self.recorders.values():
            recorder.close(reason, detail)

    def __enter__(self) -> "RLStepDriver":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        self.close(*exit_reason(exc_type, exc))
        return False

    # -- inside -----------------------------------------------------------------------------

    def _enter(self, number: int) -> Optional[WindowRecorder]:
        again = self._last == number
        self._current = self._last = number
        self._thread = threading.get_ident()
        if not again:
            self._done.clear()
        if self.stages:
            return None
        recorder = self.recorders[None]
        if not again:
            recorder.begin(number)
            return recorder
        if number not in self._repeated:
            self._repeated.add(number)
            recorder.report("warning", "step", f"RL step {number} was entered again; only its "
                                               f"first block is recorded (select stages with "
                                               f"profile_stages to record each stage)")
        return None

    def _leave(self, number: int, failure: Optional[Failure],
               recorder: Optional[WindowRecorder] = None) -> None:
        try:
            if recorder is not None:
                recorder.end(number, failure)
        finally:
            self._current = self._thread = None
        if self._first_step is None:
            self._first_step = number
        if self.stages and self._step_ran and not self._names_checked:
            self._names_checked = True
            self._check_names(number)
        self._step_ran = set()

    def _check_names(self, number: int) -> None:
        """At the end of the first step that ran stages: a selected name none of them had is
        most likely misspelt; say so now, not after the run."""
        ran = ", ".join(repr(name) for name in self._ran)
        for stage in self.stages:
            if stage not in self._step_ran:
                self.recorders[stage].report(
                    "warning", "stage", f"profile_stages names {stage!r}, but RL step {number} "
                                        f"ran no stage of that name (it ran {ran}); the names "
                                        f"your worker passes to prof.stage() are the ones to "
                                        f"select")

    def _not_recorded_words(self, stage: str) -> str:
        """Why the recorder of selected ``stage`` recorded nothing although RL steps ran."""
        steps = (f"RL step {self._last}" if self._first_step == self._last
                 else f"RL steps {self._first_step}-{self._last}")
        ran = ", ".join(repr(name) for name in self._ran) or "none"
        if stage not in self._ran:
            return (f"profile_stages names {stage!r}, but no stage of that name ran in {steps} "
                    f"(the stages that ran: {ran}); nothing was profiled for it: select the "
                    f"names your worker passes to prof.stage()")
        return (f"stage {stage!r} ran in {steps}, but never inside a profiled RL step; nothing "
                f"was profiled for it")


RoleProfiler = RLStepDriver  # the name role_profiler() has always returned


class _Step:
    __slots__ = ("owner", "number", "recorder")

    def __init__(self, owner: RLStepDriver, number: int) -> None:
        self.owner, self.number = owner, number
        self.recorder: Optional[WindowRecorder] = None

    def __enter__(self) -> "_Step":
        self.recorder = self.owner._enter(self.number)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        failure = exit_reason(exc_type, exc) if exc_type is not None else None
        self.owner._leave(self.number, failure, self.recorder)
        return False


class _StageSession:
    """One occurrence of a selected stage: its own session, numbered with the RL step."""

    __slots__ = ("recorder", "number", "label", "range")

    def __init__(self, recorder: WindowRecorder, number: int, label: str) -> None:
        self.recorder, self.number, self.label = recorder, number, label
        self.range: ContextManager[Any] = _NOTHING

    def __enter__(self) -> "_StageSession":
        self.recorder.begin(self.number)
        self.range = self.recorder.range(self.label)
        self.range.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        try:
            self.range.__exit__(exc_type, exc, tb)
        finally:
            failure = exit_reason(exc_type, exc) if exc_type is not None else None
            self.recorder.end(self.number, failure)
        return False
