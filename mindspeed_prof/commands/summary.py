"""``mindspeed-prof summary DIR [--top N] [--json|--csv] [--steps] [--run ID] [--plot FILE.png]``.

Per rank and overall: step time and its breakdown, top kernels and op types (NPU) or
operators by self time (torch), and the slow ranks with what sets them apart; with allocator
snapshots (``--profile-memory-snapshot/-oom``), each one's peak allocated and reserved bytes and
top allocation sites at the peak (``memory``: see ``mindspeed-prof memory``). Exit 0 when at
least one rank was summarised (a capture read into numbers), 1 when none could be (nothing
found, or every capture unreadable: the reason goes to stderr), 2 on a usage error.
"""

import os
import sys

from mindspeed_prof.errors import ConfigError

from .reading import add_all, add_run_and_cache, run_reader

HELP = "Summarise every rank's profile under DIR: step-time breakdown, top kernels, slow ranks."


def add_arguments(parser):
    parser.add_argument("directory", metavar="DIR",
                        help="The --profile-save-path of the run, a window folder, or one "
                             "*_ascend_pt folder.")
    parser.add_argument("--top", type=int, default=10, metavar="N",
                        help="How many kernels / op types / operators to list (default 10).")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="Machine-readable JSON.")
    form.add_argument("--csv", action="store_true",
                      help="Long-format CSV: section,rank,step,name,type,metric,value.")
    add_run_and_cache(parser, "summarise")
    parser.add_argument("--steps", action="store_true",
                        help="Also list every profiled step of every rank (the table; --json "
                             "and --csv always hold them).")
    add_all(parser)
    parser.add_argument("--plot", metavar="FILE.png", default=None,
                        help="Also draw a per-rank stacked bar chart of the step breakdown "
                             "(needs matplotlib).")


def run(args):
    from mindspeed_prof.output.render.safe import usage_errors

    with usage_errors():
        return run_reader(args, _run)


def _run(args):
    from mindspeed_prof.output.render import jsontext
    from mindspeed_prof.output.memory import render as render_memory
    from mindspeed_prof.output.render import safe
    from mindspeed_prof.output.render import summary as render_summary
    from mindspeed_prof.output.memory.summary import summarize_memory
    from mindspeed_prof.output.read.roles import role_roots
    from mindspeed_prof.output.summary.directory import summarize_directory

    if args.plot:  # never over a file the readers read (refused before any reading)
        from mindspeed_prof.output.outfile import refuse_input
        refuse_input("--plot", args.plot, [args.directory])
    roots = role_roots(args.directory)
    # RL output: one cross-role table per profiled RL step; one role's (or stage's) own folder
    # gets the per-rank breakdown and top operators below, as a training save path does.
    if roots and not (len(roots) == 1 and roots[0].rel == "."):
        return _roles(args, roots)
    summary = summarize_directory(args.directory, top=args.top, run=args.run)
    memory = summarize_memory(args.directory, top=args.top)  # allocator snapshots, if any
    from mindspeed_prof.output.render.captures import captures_lines
    from mindspeed_prof.output.summary.captures import compare_captures

    captures = compare_captures(args.directory, top=args.top)  # [] unless a rule took some
    from mindspeed_prof.output.pipeline.in_summary import bubble_lines, stage_bubbles

    pipeline = stage_bubbles(args.directory)  # None unless the job was pipelined and marked
    plotted = None
    if args.plot:
        from mindspeed_prof.output.render.plot import plot_breakdown
        plotted = plot_breakdown(summary, args.plot)
        if plotted is None:
            print(safe.cell(f"mindspeed-prof summary: --plot {args.plot} not written: no rank "
                            f"has step times (run `mindspeed-prof check {args.directory}` to "
                            f"see why)."), file=sys.stderr)
    if args.json:
        data = render_summary.summary_dict(summary)
        if memory:  # only where snapshots are: the JSON of a run without them is unchanged
            data["memory"] = render_memory.memory_dicts(memory)
        if captures:  # as memory: a run without captures keeps the JSON it always had
            data["captures"] = captures
        if pipeline:  # as memory: a job without pipeline marks keeps the JSON it always had
            data["pipeline"] = pipeline
        print(jsontext.dumps(data, default=str))
    elif args.csv:
        print(render_summary.summary_csv(summary) + render_memory.memory_csv(memory), end="")
    else:
        notes = summary.notes
        if not summary.summarised and notes:
            # why nothing was summarised goes to stderr below: the table leaves it out, so a
            # terminal shows it once, not twice
            summary.notes = notes[:-1]
        print(render_summary.summary_table(summary, steps=args.steps,
                                                   every=args.all))
        summary.notes = notes
        if memory:
            print("\n" + render_memory.memory_table(memory))
        for line in captures_lines(captures):
            print(line)
        if pipeline:
            print("\n" + safe.lines("\n".join(bubble_lines(pipeline))))
        if plotted:
            print("\n" + safe.cell(f"plot written to {plotted}"))
    if not summary.summarised:
        # Nothing summarised is a failure, whatever was found: say why where scripts look.
        print(safe.lines(f"mindspeed-prof summary: {summary.notes[-1]}"), file=sys.stderr)
        return 1
    return 0 if plotted or not args.plot else 1


def _roles(args, roots):
    from mindspeed_prof.output.roles import render as render_roles
    from mindspeed_prof.output.roles.summary import summarize_roles

    folders = ", ".join(sorted(os.path.relpath(r.path, args.directory) for r in roots))
    why = {"--plot": "the cross-role table has no per-rank breakdown to draw",
           "--run": "each role's folder is a save path of its own, with its own runs"}
    for flag, value in (("--plot", args.plot), ("--run", args.run)):
        if value:  # refused before any work, rather than ignored
            one = os.path.join(args.directory, os.path.relpath(roots[0].path, args.directory))
            raise ConfigError(f"{flag} {value}: {args.directory} holds RL role output (a save "
                              f"path per role or stage: {folders}), and {why[flag]}; give one "
                              f"role's folder, e.g. `mindspeed-prof summary {one} {flag} "
                              f"{value}`.")
    summary = summarize_roles(args.directory, roots)
    if args.json:
        print(render_roles.role_summary_json(summary))
    elif args.csv:
        print(render_roles.role_summary_csv(summary), end="")
    else:
        print(render_roles.role_summary_table(summary))
    return 0 if summary.steps else 1
