"""``mindspeed-prof show-config [options] [--profile* flags]``: what a set of flags will do.

Resolves the flags exactly as training would (YAML and environment included) and prints the
config, the ranks and iterations that will be profiled, the backend, and the profiler call each
profiled rank will make, without training. ``--profile`` is implied.
"""

import json
import os

from mindspeed_prof import backends, ranks
from mindspeed_prof.arguments import add_recorded_profile_flags, parse_profile_flags
from mindspeed_prof.backends import describe
from mindspeed_prof.errors import BackendUnavailable, ConfigError
from mindspeed_prof.window import plan_window

HELP = "Print the resolved profiling config and the exact profiler call, without training."


def add_arguments(parser):
    parser.add_argument("--world-size", type=int, default=1, metavar="N",
                        help="Ranks in the job, to resolve --profile-ranks (default: 1).")
    parser.add_argument("--train-iters", type=int, default=None, metavar="N",
                        help="Megatron's --train-iters, to check the window and resolve -1.")
    parser.add_argument("--first-iteration", type=int, default=1, metavar="N",
                        help="First iteration the run executes (a resumed run: checkpoint + 1).")
    parser.add_argument("--json", action="store_true", help="Machine-readable output.")
    add_recorded_profile_flags(parser, description="as on the training command line; "
                                                   "--profile is implied")


def resolve(args):
    if args.world_size < 1:
        raise ConfigError(f"--world-size {args.world_size} must be >= 1.")
    config = parse_profile_flags(args.profile_argv or [], implied_profile=True)
    schedule = plan_window(start=config.profile_step_start, end=config.profile_step_end,
                           first_iteration=args.first_iteration, train_iters=args.train_iters)
    try:
        selected = ranks.resolve(config.profile_ranks, args.world_size)
        selection_note = None
    except ConfigError as exc:
        if not ranks.needs_topology(config.profile_ranks):
            raise
        selected, selection_note = None, str(exc)
    try:
        backend, backend_note = backends.choose(config)
    except BackendUnavailable as exc:
        # Still show what an NPU machine would run; this machine (a login node?) cannot.
        backend, backend_note = "npu", None
        notes_first = [f"not runnable on this machine: {exc}"]
    else:
        notes_first = []
    example_rank = selected[0] if selected else 0
    save_path = os.path.abspath(config.profile_save_path)
    call, call_notes = (describe.npu_call if backend == "npu" else describe.torch_call)(
        config, schedule, save_path, example_rank)
    notes = notes_first + list(config.warnings()) + call_notes
    ignored = backends.ignored_flags(backend, config)
    if ignored:
        notes.append(f"ignored by the {backend} backend: {', '.join(ignored)}")
    if backend_note and config.profile_backend == "auto":
        notes.append(f"backend auto chose {backend}: {backend_note}")
    if selection_note:
        notes.append(f"rank selectors resolve inside the job: {selection_note}")
    return {
        "config": config.as_dict(),
        "ranks": {"spec": ranks.format_selection(config.profile_ranks), "world_size": args.world_size,
                  "selected": selected},
        "window": {"start": schedule.start, "end": schedule.end, "describe": schedule.describe(),
                   "schedule": {"skip_first": schedule.skip_first, "warmup": schedule.warmup,
                                "active": schedule.active, "repeat": schedule.repeat,
                                "wait": schedule.wait}},
        "backend": backend,
        "save_path": save_path,
        "profiler_call": call,
        "notes": notes,
    }


def run(args):
    report = resolve(args)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    width = max(len(k) for k in report["config"])
    print("ProfilerConfig:")
    for key, value in report["config"].items():
        print(f"  {key:<{width}}  {value}")
    selected = report["ranks"]["selected"]
    shown = "resolved inside the job" if selected is None else ", ".join(map(str, selected))
    print(f"ranks:     {report['ranks']['spec']} -> {shown} (world size {report['ranks']['world_size']})")
    print(f"window:    {report['window']['describe']}")
    print(f"backend:   {report['backend']}")
    print(f"output:    {report['save_path']}")
    print(f"profiler:  {report['profiler_call']}")
    for note in report["notes"]:
        print(f"note:      {note}")
    return 0
