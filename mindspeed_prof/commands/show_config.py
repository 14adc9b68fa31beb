"""``mindspeed-prof show-config [options] [--profile* flags]``: what a set of flags will do.

Resolves the flags exactly as training would (YAML and environment included) and prints the
config, the ranks and iterations that will be profiled, the backend, and the profiler call each
profiled rank will make, without training. ``--profile`` is implied.
"""

import dataclasses
import os
import re

from mindspeed_prof import backends
from mindspeed_prof.config import ranks
from mindspeed_prof.arguments import add_recorded_profile_flags, resolve_profile_flags
from mindspeed_prof.arguments import parallel_sizes
from mindspeed_prof.arguments.host_defaults import megatron_default_for, with_cpu_default
from mindspeed_prof.errors import BackendUnavailable, ConfigError
from mindspeed_prof.recording.plan import make_plan
from mindspeed_prof.recording.startup import check_save_path, memory_device, refuse_armed_profilers
from mindspeed_prof.recording import http_notices as notices_http
from mindspeed_prof.config.units import ENGINE_STEP, ITERATION, REQUEST, UNITS, describe_window
from mindspeed_prof.config.window import StepSchedule, passed_windows

HELP = "Print the resolved profiling config and the exact profiler call, without training."
# Windows printed on the terminal (all of them go into --json, up to this many).
SHOWN_WINDOWS = 5
JSON_WINDOWS = 1000
# A Megatron-LM release as --megatron-version takes it: 0.17, 0.17.1, 0.19.0rc1 ("17" is not)
RELEASE = re.compile(r"\d+\.\d+(\.\d+)?([a-z]+\d*)?")


def add_arguments(parser):
    parser.add_argument("--world-size", type=int, default=1, metavar="N",
                        help="Ranks in the job, to resolve --profile-ranks (default: 1).")
    parser.add_argument("--train-iters", type=int, default=None, metavar="N",
                        help="Megatron's --train-iters, to check the windows and resolve -1.")
    parser.add_argument("--exit-interval", type=int, default=None, metavar="N",
                        help="Megatron's --exit-interval, to check the windows.")
    parser.add_argument("--first-iteration", type=int, default=1, metavar="N",
                        help="First iteration the run executes (a resumed run: checkpoint + 1).")
    parser.add_argument("--unit", choices=("iteration", "request", "engine-step"),
                        default="iteration",
                        help="What the window flags count: iterations (training, the default), "
                             "requests (Megatron's static engine and its text-generation server, "
                             "MindSpeed-LLM's inference.py; numbered from 1 per process) or "
                             "engine steps (megatron-core's DynamicInferenceEngine and its "
                             "servers; numbered as the engine's step log numbers them).")
    parser.add_argument("--megatron-version", default=None, metavar="X.Y",
                        help="Megatron-LM release whose --profile-ranks default an untyped "
                             "--profile-ranks takes ([0] = rank 0 up to 0.16, [] = every rank "
                             "from 0.17); default: the installed megatron-core's, if any.")
    parser.add_argument("--json", action="store_true", help="Machine-readable output.")
    parallel_sizes.add_parallel_size_flags(parser)
    add_recorded_profile_flags(parser, description="as on the training command line; "
                                                   "--profile is implied")


def resolve(args):
    if args.world_size < 1:
        raise ConfigError(f"--world-size {args.world_size} must be >= 1.")
    if args.first_iteration < 1:
        raise ConfigError(f"--first-iteration {args.first_iteration} must be >= 1.")
    unit = UNITS[args.unit.replace("-", " ")]
    serving = unit in (REQUEST, ENGINE_STEP)
    if serving and (args.train_iters is not None or args.exit_interval is not None):
        raise ConfigError(f"--train-iters and --exit-interval do not apply with --unit "
                          f"{args.unit}: a server has no known last {unit.name}; drop them.")
    if serving and args.first_iteration != 1:
        raise ConfigError(f"--first-iteration does not apply with --unit {args.unit}: every "
                          f"process numbers its {unit.plural} from 1; drop it.")
    host_version, version_from = _megatron_version(args.megatron_version)
    resolved = resolve_profile_flags(args.profile_argv or [], implied_profile=True,
                                     host_rank_default=megatron_default_for(host_version))
    config, default_notes = resolved.config, list(resolved.notes)
    if "profile_with_cpu" not in resolved.given:
        default_notes.append(with_cpu_default(config.profile_level, config.profile_mstx)[1])
    if default_notes and host_version:
        default_notes = [f"{note} (Megatron-LM {host_version}, {version_from})"
                         if note.startswith("--profile-ranks") else note
                         for note in default_notes]
    layout = parallel_sizes.layout_of(args, args.world_size)
    plan, selection_note = _plan(config, unit, args.world_size, layout)
    # The same checks, in the same order and words, as the training start-up (recorder.arm).
    plan = plan.with_windows(first=args.first_iteration, last=args.train_iters,
                             exit_interval=args.exit_interval)
    waits_for_http = serving and not resolved.window_given
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
        else _plan_notes(config, plan.windows, args.first_iteration))
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
    lacking = ranks.beyond(config.profile_ranks, args.world_size)
    if lacking and not selection_note:
        notes.append(f"rank(s) {_ranks_text(lacking)} are beyond the job's "
                     f"{args.world_size} ranks (--world-size) and are left out")
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
                  f"the selected rank(s) {_ranks_text(plan.selected_ranks)}")
        captures = {key: getattr(config, f"profile_{key}") for key in (
            "on_slow_step", "on_straggler", "capture_steps", "capture_warmup",
            "capture_cooldown", "max_captures", "trigger_poll")}
        captures["describe"] = rules_in_words(config, unit.name, unit.plural, chosen)
    return {
        "unit": unit.name,
        "config": config.as_dict(),
        "ranks": {"spec": ranks.format_selection(config.profile_ranks), "world_size": args.world_size,
                  "selected": None if selection_note else list(plan.selected_ranks)},
        "window": windows[0] if windows else None,
        "windows": windows[:JSON_WINDOWS],
        "window_count": None if repeats_to_the_end else len(windows),
        "trigger": trigger,
        "http": notices_http.http_plan(config, unit) if serving else None,
        "captures": captures,
        "backend": backend,
        "save_path": save_path,
        "profiler_call": call,
        "notes": notes,
    }


def _sizes_text(layout):
    """``tp 2, pp 2, dp 2, cp 1, ep 1``: the sizes a layout was built from."""
    return ", ".join(f"{key} {len({c[key] for c in layout.values()})}"
                     for key in ("tp", "pp", "dp", "cp", "ep"))


def _ranks_text(selected):
    """A rank list as people read it: ``1, 2``; past a screenful, ranges (``0-1023``)."""
    from mindspeed_prof.output.render import many

    if len(selected) > many.ROWS_SHOWN:
        return many.few_ranges(selected)
    return ", ".join(map(str, selected))


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


def _megatron_version(given):
    """The Megatron-LM release to emulate, and where it came from: --megatron-version, else the
    installed megatron-core's metadata (read without importing Megatron), else none."""
    if given:
        if not RELEASE.fullmatch(given) or megatron_default_for(given) is None:
            raise ConfigError(f"--megatron-version {given!r} is not a release number: "
                              f"Megatron-LM's read like 0.17 or 0.17.1 (MAJOR.MINOR[.PATCH]); "
                              f"give e.g. --megatron-version 0.17.1.")
        return given, "from --megatron-version"
    try:
        from importlib.metadata import PackageNotFoundError, version
        return version("megatron-core"), "the installed megatron-core"
    except (ImportError, PackageNotFoundError, ValueError):
        return None, None


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


def run(args):
    report = resolve(args)
    if args.json:
        from mindspeed_prof.output.render import jsontext

        print(jsontext.dumps(report))  # strict JSON, as every --json
        return 0
    width = max(len(k) for k in report["config"])
    print("ProfilerConfig:")
    for key, value in report["config"].items():
        print(f"  {key:<{width}}  {value}")
    selected = report["ranks"]["selected"]
    shown = "resolved inside the job" if selected is None else _ranks_text(selected)
    print(f"ranks:     {report['ranks']['spec']} -> {shown} (world size {report['ranks']['world_size']})")
    for line in _plan_lines(report):
        print(line)
    print(f"backend:   {report['backend']}")
    print(f"output:    {report['save_path']}")
    print(f"profiler:  {report['profiler_call']}")
    for note in report["notes"]:
        print(f"note:      {note}")
    return 0


def _plan_lines(report):
    windows, count = report["windows"], report["window_count"]
    lines = []
    if count is None:
        every, unit = report["config"]["profile_every"], UNITS[report["unit"]]
        until = "training ends" if unit is ITERATION else f"{unit.owner} stops"
        lines.append(f"windows:   every {every} {unit.plural} until {until}, from")
        lines += [f"           {w['describe']}" for w in windows[:2]]
    elif count == 1:
        lines.append(f"window:    {windows[0]['describe']}")
    elif count:
        lines.append(f"windows:   {count} planned")
        lines += [f"           {w['describe']}" for w in windows[:SHOWN_WINDOWS]]
        if count > SHOWN_WINDOWS:
            lines.append(f"           ... and {count - SHOWN_WINDOWS} more, up to "
                         f"{windows[-1]['describe']}")
    if not windows and report.get("http"):
        lines.append("window:    none planned (no window flags given)")
    if report["trigger"]:
        lines.append(f"trigger:   {report['trigger']['describe']}")
    if report.get("http"):
        lines.append(f"http:      {report['http']['describe']}")
        lines.append(f"           answers {report['http']['callers']}")
        lines.append(f"           {report['http']['budget']}")
    if report.get("captures"):
        lines.append(f"captures:  {report['captures']['describe']}")
    return lines
