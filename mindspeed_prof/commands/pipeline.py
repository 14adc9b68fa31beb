"""``mindspeed-prof pipeline DIR [--step N] [--json]``.

Per pipeline stage (per replica: the ranks that share every coordinate but pp), the measured
bubble of a step (its schedule's span outside forward/backward compute) split into the
schedule's own warm-up/cool-down and the stall beyond it, beside the schedule's theory; and the
stage that holds the pipeline back. Read from the schedule marks written inside profiling
windows. Exit 0 when at least one stage was measured, 2 on a usage error (no marks, an unknown
step, a folder of several windows without --step: the message says what to change).
"""

from .reading import add_no_cache, run_reader

HELP = ("Per pipeline stage: the measured bubble (warm-up/cool-down and stall) beside the "
        "schedule's theory, and the stage that holds the pipeline back.")


def add_arguments(parser):
    parser.add_argument("directory", metavar="DIR",
                        help="The --profile-save-path of a profiled Megatron training run, or "
                             "one window folder (iter_5-7).")
    parser.add_argument("--step", type=int, default=None, metavar="N",
                        help="Only iteration N (default: each stage's median over the "
                             "window's steps).")
    parser.add_argument("--json", action="store_true", help="Machine-readable JSON.")
    add_no_cache(parser)


def run(args):
    from mindspeed_prof.output.render.safe import usage_errors

    with usage_errors():
        return run_reader(args, _run)


def _run(args):
    from mindspeed_prof.output.pipeline.analyze import analyze
    from mindspeed_prof.output.pipeline.render import report_dict, report_table
    from mindspeed_prof.output.render import jsontext

    report = analyze(args.directory, step=args.step)
    if args.json:
        print(jsontext.dumps(report_dict(report)))
    else:
        print(report_table(report))
    return 0
