"""What one rank would do with a config, without running: its plan, the backend, the notes
start-up would say and the exact profiler call (``mindspeed-prof show-config`` prints it).

The same checks, in the same order and words, as the training start-up (``recorder.arm``,
``startup.py``), on the first selected rank; a dry run leaves no folder behind.
"""

import dataclasses
import os
from typing import Any, Callable, Dict, List, Optional, Sequence

from .. import backends
from ..config import ranks
from ..config.profiler_config import ProfilerConfig
from ..config.units import ENGINE_STEP, ITERATION, REQUEST, Unit, describe_window
from ..config.window import StepSchedule, passed_windows
from ..errors import BackendUnavailable, ConfigError
from . import http_notices as notices_http
from .plan import Plan, make_plan
from .startup import check_save_path, memory_device, refuse_armed_profilers

# Windows a note lists (the passed ones).
SHOWN_WINDOWS = 5


@dataclasses.dataclass(frozen=True)
class Resolution:
    """What a rank would do (``show-config``'s report, before it is printed)."""

    plan: Plan  # the first selected rank's, windows checked
    backend: str
    save_path: str  # absolute
    profiler_call: str
    notes: List[str]
    windows: List[Dict[str, Any]]  # each planned window: start, end, describe, schedule
    repeats_to_the_end: bool  # --profile-every with no known last unit: windows go on
    selection_note: Optional[str]  # why the selected ranks resolve inside the job only
    trigger: Optional[Dict[str, Any]]
    captures: Optional[Dict[str, Any]]
    http: Optional[Dict[str, Any]]  # a server's HTTP control


def resolve_rank(config: ProfilerConfig, unit: Unit, *, world_size: int,
                 layout: Optional[Dict[int, Dict[str, int]]], first: int, last: Optional[int],
                 exit_interval: Optional[int], window_given: bool, default_notes: Sequence[str],
                 ranks_text: Callable[[List[int]], str]) -> Resolution:
    """What the first selected rank of a ``world_size`` job would do with ``config`` counting
    ``unit``s from ``first`` (to ``last``, when known); ``layout``: the job's parallel layout,
    for rank selectors; ``window_given``: a window flag was typed (a server without one waits
    for HTTP); ``default_notes``: what the flags' defaults say, after the backend's word;
    ``ranks_text``: how a list of ranks is written. Raises ``ConfigError`` as start-up would."""
    default_notes = list(default_notes)
    plan, selection_note = _plan(config, unit, world_size, layout)
    # The same checks, in the same order and words, as the training start-up (recorder.arm).
    plan = plan.with_windows(first=first, last=last, exit_interval=exit_interval)
    serving = unit in (REQUEST, ENGINE_STEP)
    waits_for_http = serving and not window_given
    if waits_for_http:
        # Megatron's built-in 10/12 are not a window anyone asked for (as the engine arms).
        plan = dataclasses.replace(plan, windows=())
    repeats_to_the_end = bool(plan.windows) and bool(config.profile_every) and plan.last is None
    try:
        backend, backend_note = backends.choose(config)
    except BackendUnavailable as exc:
        # Still show what an NPU machine would run; this machine (a login node?) cannot.
        backend, backend_note = "npu", None
        notes_first = [f"not runnable on this machine: {exc}"]
    else:
        notes_first = []
    # As start-up checks a profiled rank (the example rank profiles; an empty selection was
    # refused above).
    _check_save_path_leaving_no_trace(config.profile_save_path, plan.rank, backend)
    refuse_armed_profilers(config)  # torch_npu's env-armed profilers, as start-up refuses them
    plan.check_budget(backend, 1)
    save_path = os.path.abspath(config.profile_save_path)
    session = plan.first_session() or (_capture_example(plan) if config.captures
                                       and not config.profile_trigger_file
                                       else _trigger_example(plan, waits_for_http))
    folder = os.path.abspath(plan.window_dir(session))
    worker = plan.worker_name(session) if plan.session_per_unit else None
    call, call_notes = backends.kind(backend).describe_call(config, session, folder, plan.rank,
                                                            worker)
    notes = notes_first + default_notes + (
        _request_notes() + notices_http.request_notes(config) if unit is REQUEST
        else notices_http.engine_notes(config) if unit is ENGINE_STEP
        else _plan_notes(config, plan.windows, first))
    if waits_for_http:
        notes.insert(len(notes_first), notices_http.waiting_note(unit))
    notes += list(config.warnings()) + call_notes + _memory_notes(config, backend, folder,
                                                                  save_path, plan.rank)
    ignored = backends.ignored_flags(backend, config)
    if ignored:
        notes.append(f"ignored by the {backend} backend: {', '.join(ignored)}")
    if backend_note and config.profile_backend == "auto":
        notes.append(f"backend auto chose {backend}: {backend_note}")
    if selection_note:
        notes.append(f"rank selectors resolve inside the job: {selection_note} (or give "
                     f"show-config the job's --tensor-model-parallel-size, "
                     f"--pipeline-model-parallel-size, --context-parallel-size, "
                     f"--expert-model-parallel-size and --nproc-per-node)")
    elif layout is not None and ranks.needs_topology(config.profile_ranks):
        notes.append(f"rank selectors resolved on the layout of the parallel sizes given "
                     f"({_sizes_text(layout)}), ranks placed in Megatron's default order "
                     f"tp-cp-ep-dp-pp")
    lacking = ranks.beyond(config.profile_ranks, world_size)
    if lacking and not selection_note:
        notes.append(f"rank(s) {ranks_text(lacking)} are beyond the job's "
                     f"{world_size} ranks (--world-size) and are left out")
    windows = [_window(window, unit) for window in plan.windows]
    trigger = None
    if config.profile_trigger_file:
        trigger = {"file": config.profile_trigger_file, "poll": config.profile_trigger_poll,
                   "describe": f"on request: `mindspeed-prof trigger "
                               f"{config.profile_trigger_file} --steps N` (rank 0 looks every "
                               f"{config.profile_trigger_poll} {unit.plural})"}
    captures = None
    if config.captures:
        from mindspeed_prof.control.capture_words import rules_in_words

        chosen = ("the selected rank(s) resolved inside the job" if selection_note else
                  f"the selected rank(s) {ranks_text(plan.selected_ranks)}")
        captures = {key: getattr(config, f"profile_{key}") for key in (
            "on_slow_step", "on_straggler", "capture_steps", "capture_warmup",
            "capture_cooldown", "max_captures", "trigger_poll")}
        captures["describe"] = rules_in_words(config, unit.name, unit.plural, chosen)
    return Resolution(plan=plan, backend=backend, save_path=save_path, profiler_call=call,
                      notes=notes, windows=windows, repeats_to_the_end=repeats_to_the_end,
                      selection_note=selection_note, trigger=trigger, captures=captures,
                      http=notices_http.http_plan(config, unit) if serving else None)


def _sizes_text(layout):
    """``tp 2, pp 2, dp 2, cp 1, ep 1``: the sizes a layout was built from."""
    return ", ".join(f"{key} {len({c[key] for c in layout.values()})}"
                     for key in ("tp", "pp", "dp", "cp", "ep"))


def _plan(config, unit, world_size, layout=None):
    """The plan of the first selected rank (the one the call is shown for), as start-up builds
    it; with rank selectors that need the job's layout and no layout given (the parallel-size
    flags), rank 0's, and why."""
    per_unit = unit is REQUEST  # a session per request, in its own folder (requests hop threads)
    own = unit is ENGINE_STEP   # every window in its own folder (HTTP windows follow each other)
    try:
        plan = make_plan(config, unit=unit, world_size=world_size, session_per_unit=per_unit,
                         own_folders=own, layout_of=layout)
    except ConfigError as exc:
        if not ranks.needs_topology(config.profile_ranks) or layout is not None:
            raise
        plan = make_plan(config.replace(profile_ranks=(0,)), unit=unit, world_size=world_size,
                         session_per_unit=per_unit, own_folders=own)
        return dataclasses.replace(plan, config=config), str(exc)
    return dataclasses.replace(plan, rank=plan.selected_ranks[0]), None


def _memory_notes(config, backend, folder, save_path, rank):
    """What --profile-memory-* will write, or why this machine could not."""
    from mindspeed_prof import layout

    notes = []
    try:
        device = memory_device(config, backend)
    except ConfigError as exc:
        return [f"not runnable on this machine: {exc}"]
    if config.profile_memory_snapshot:
        notes.append(f"--profile-memory-snapshot: the {device or 'device'} allocator's history "
                     f"through each window -> {os.path.join(folder, layout.memory_snapshot_name(rank))}"
                     f" (each window's folder)")
    if config.profile_memory_oom:
        notes.append(f"--profile-memory-oom: the allocator's history from start-up (newest "
                     f"{config.profile_memory_max_entries} events); on out-of-memory -> "
                     f"{os.path.join(save_path, layout.memory_oom_name(rank))}, then the error "
                     f"as before")
    return notes


def _window(schedule, unit=ITERATION):
    return {"start": schedule.start, "end": schedule.end,
            "describe": describe_window(schedule, unit, per_unit_sessions=unit is REQUEST),
            "schedule": {"skip_first": schedule.skip_first, "warmup": schedule.warmup,
                         "active": schedule.active, "repeat": schedule.repeat,
                         "wait": schedule.wait}}


def _trigger_example(plan, http=False):
    """The session a one-step trigger request seen at unit 1 gets (for the call shown); for a
    server waiting for HTTP, the session of a start before unit 1."""
    if http:
        return notices_http.http_example(plan)
    if plan.session_per_unit:
        return StepSchedule(skip_first=2, warmup=0, active=1)
    return StepSchedule(skip_first=1, warmup=1, active=1)


def _capture_example(plan):
    """The session of the earliest capture a rule could take (for the call shown): at the first
    poll after the warm-up and the median's first samples."""
    from mindspeed_prof.control.anomaly import MIN_SAMPLES

    config = plan.config
    poll, ready = config.profile_trigger_poll, plan.first + config.profile_capture_warmup + MIN_SAMPLES
    n = -(-ready // poll) * poll
    steps = 1 if plan.session_per_unit else config.profile_capture_steps
    return StepSchedule(skip_first=n, warmup=0, active=steps)


def _request_notes():
    return ["the window counts requests: the first request each process serves is request 1, "
            "on every rank alike; a server has no known last request, so a window it never "
            "reaches is not refused now: the server says so when it stops (log and manifest)",
            "each request of a window is its own profiler session in req_{n}-{n}/ (the "
            "server runs requests on new threads; a session records only its own thread); "
            "the call shown is the first request's"]


def _plan_notes(config, plans, first_iteration):
    notes = []
    passed = passed_windows(config, first_iteration)
    if passed:
        shown = ", ".join(f"{a}-{b}" for a, b in passed[:SHOWN_WINDOWS])
        more = f" and {len(passed) - SHOWN_WINDOWS} more" if len(passed) > SHOWN_WINDOWS else ""
        notes.append(f"skipped, already passed when the run starts at iteration "
                     f"{first_iteration}: {shown}{more}")
    if len(plans) > 1:
        notes.append("each window gets its own profiler and iter_{first}-{last}/ folder; the "
                     "call shown is the first window's")
    if config.profile_trigger_file and not plans:
        notes.append("the call shown is a --steps 1 request seen at iteration 1; a request for "
                     "N steps records N iterations after the one it is seen at")
    elif config.captures and not plans:
        notes.append("the call shown is the earliest capture's; a capture records from the "
                     "iteration at whose poll it is decided, each in its own iter_{a}-{b}/")
    return notes


def _check_save_path_leaving_no_trace(path, rank, backend):
    """check_save_path, as start-up runs it, without leaving the folders it made (a dry run)."""
    missing = []
    probe = os.path.abspath(path)
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        missing.append(probe)
        probe = os.path.dirname(probe)
    try:
        check_save_path(path, rank, backend)
    finally:
        for folder in missing:  # deepest first
            try:
                os.rmdir(folder)
            except OSError:
                break
