"""``mindspeed-prof report DIR -o FILE.html [--baseline DIR] [--top N] [--run ID]``: one
self-contained HTML file of a run: check's verdicts, rank x step heatmaps of the step time and
its parts, the per-step breakdown, slow ranks and their reason, top operators, communication
per group, the captures the run took by itself, memory peaks and, with ``--baseline``, the diff
against another run. The numbers are summary --json's. Exit 0 when the report was written and
at least one rank was summarised, 1 when it was written with nothing summarised, 2 on a usage
error. Needs plotly (``pip install 'mindspeed_prof[report]'``), imported only here.
"""

from .reading import add_run_and_cache, run_reader

HELP = ("Write one self-contained HTML report of DIR (opens offline): verdicts, rank x step "
        "heatmaps, breakdowns, slow ranks, top operators, communication, captures, memory.")


def add_arguments(parser):
    parser.add_argument("directory", metavar="DIR",
                        help="The --profile-save-path of the run, a window folder, or one "
                             "*_ascend_pt folder.")
    parser.add_argument("-o", "--output", metavar="FILE.html", required=True,
                        help="Where to write the report (one file, no network needed to open "
                             "it).")
    parser.add_argument("--baseline", metavar="DIR", default=None,
                        help="Another run's save path: add the diff of DIR against it "
                             "(as `mindspeed-prof diff BASELINE DIR`).")
    parser.add_argument("--top", type=int, default=10, metavar="N",
                        help="How many kernels / op types / operators to list (default 10).")
    add_run_and_cache(parser, "report on")


def run(args):
    return run_reader(args, _run)


def _run(args):
    from mindspeed_prof.output.report.write import write_report

    written = write_report(args.directory, args.output, top=args.top, run=args.run,
                           baseline=args.baseline)
    from mindspeed_prof.output.render import safe

    mib = 1 << 20
    print(safe.cell(f"report written to {written.path}: {written.size / mib:.1f} MiB (plotly.js "
                    f"{written.plotlyjs / mib:.1f} MiB + "
                    f"{(written.size - written.plotlyjs) / mib:.2f} MiB of page; bound "
                    f"{written.bound / mib:.1f} MiB)"))
    return 0 if written.summarised else 1
