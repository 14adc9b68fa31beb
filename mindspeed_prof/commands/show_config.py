"""``mindspeed-prof show-config [options] [--profile* flags]``: what a set of flags will do.

Resolves the flags exactly as training would (YAML and environment included) and prints the
config, the ranks and iterations that will be profiled, the backend, and the profiler call each
profiled rank will make, without training. ``--profile`` is implied. What a rank would do is
``recording/resolution.py``'s (beside the plan and the notices); this command prints it.
"""

import re

from mindspeed_prof.config import ranks
from mindspeed_prof.arguments import add_recorded_profile_flags, resolve_profile_flags
from mindspeed_prof.arguments import parallel_sizes
from mindspeed_prof.arguments.host_defaults import megatron_default_for, with_cpu_default
from mindspeed_prof.errors import ConfigError
from mindspeed_prof.recording.resolution import SHOWN_WINDOWS, resolve_rank
from mindspeed_prof.config.units import ENGINE_STEP, ITERATION, REQUEST, UNITS

HELP = "Print the resolved profiling config and the exact profiler call, without training."
# Windows printed on the terminal: SHOWN_WINDOWS (all of them go into --json, up to this many).
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
    resolution = resolve_rank(config, unit, world_size=args.world_size,
                              layout=parallel_sizes.layout_of(args, args.world_size),
                              first=args.first_iteration, last=args.train_iters,
                              exit_interval=args.exit_interval,
                              window_given=resolved.window_given, default_notes=default_notes,
                              ranks_text=_ranks_text)
    return _report(resolution, config, unit, args.world_size)


def _report(resolution, config, unit, world_size):
    """The resolution as show-config's report (what --json prints)."""
    windows, plan = resolution.windows, resolution.plan
    return {
        "unit": unit.name,
        "config": config.as_dict(),
        "ranks": {"spec": ranks.format_selection(config.profile_ranks), "world_size": world_size,
                  "selected": None if resolution.selection_note else list(plan.selected_ranks)},
        "window": windows[0] if windows else None,
        "windows": windows[:JSON_WINDOWS],
        "window_count": None if resolution.repeats_to_the_end else len(windows),
        "trigger": resolution.trigger,
        "http": resolution.http,
        "captures": resolution.captures,
        "backend": resolution.backend,
        "save_path": resolution.save_path,
        "profiler_call": resolution.profiler_call,
        "notes": resolution.notes,
    }


def _ranks_text(selected):
    """A rank list as people read it: ``1, 2``; past a screenful, ranges (``0-1023``)."""
    from mindspeed_prof.output.render import many

    if len(selected) > many.ROWS_SHOWN:
        return many.few_ranges(selected)
    return ", ".join(map(str, selected))


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
