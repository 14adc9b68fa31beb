"""``mindspeed-prof diff A B [--json] [--top N]``.

A and B: two save paths (two runs), two window folders, or two ranks of one run
(``DIR:rank3 DIR:rank0``: the anomaly capture's rank against its reference). Per step, matched
by number, ``summary``'s breakdown side by side and the change (B - A); then the operators (torch)
or kernels (NPU) that grew or shrank most, the new and the vanished ones, and each rank's step
time change. Exit 0 when compared, 1 when the two cannot be compared (another unit, another
backend, a side with no numbers: the reason is printed), 2 on a usage error.
"""

import sys

from .reading import add_no_cache, run_reader

HELP = "Compare two profiles (runs, windows or DIR:rankR): per-step breakdown and operators."


def add_arguments(parser):
    parser.add_argument("a", metavar="A", help="The baseline: a save path, a window folder, "
                                              "or DIR:rankR.")
    parser.add_argument("b", metavar="B", help="What is compared with it (change = B - A).")
    parser.add_argument("--top", type=int, default=10, metavar="N",
                        help="How many operators to list in each section (default 10).")
    parser.add_argument("--json", action="store_true", help="Machine-readable JSON.")
    add_no_cache(parser)


def run(args):
    return run_reader(args, _run)


def _run(args):
    from mindspeed_prof.output.compare import diff_paths
    from mindspeed_prof.output.render import jsontext, safe
    from mindspeed_prof.output.render.diff import diff_table

    data = diff_paths(args.a, args.b, top=args.top)
    if args.json:
        print(jsontext.dumps(data, default=str))
    else:
        print(diff_table(data))
    if not data["comparable"]:
        print(safe.cell(f"mindspeed-prof diff: not compared: {data['unlike'][0]}"),
              file=sys.stderr)
        return 1
    return 0
