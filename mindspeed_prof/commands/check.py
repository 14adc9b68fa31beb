"""``mindspeed-prof check DIR [--ranks R...] [--json] [--run ID] [--node I/N|auto --report FILE]``: is every
rank's profile usable?

Exit 0 only when every expected rank is valid, 1 when any is not (or nothing was found),
2 on a usage error. A broken file is a verdict, never a traceback. With ``--node``, only this
node's share of the ranks is checked; ``--report`` writes it, with its summary numbers, for
``mindspeed-prof merge``.
"""

from mindspeed_prof.config import ranks
from mindspeed_prof.errors import ConfigError

from .reading import add_all, add_run_and_cache, run_reader

HELP = ("Check every rank's profiler output under DIR: valid, cut (the run ended inside the "
        "window), not stopped, unparsed, incomplete, corrupt or missing.")


def add_arguments(parser):
    parser.add_argument("directory", metavar="DIR",
                        help="The --profile-save-path of the run, a window folder, or one "
                             "*_ascend_pt folder.")
    parser.add_argument("--ranks", nargs="+", metavar="R", default=None,
                        help="Ranks that must be there (0 2 5, 0-7); default: those the "
                             "manifests expect, plus every rank found.")
    parser.add_argument("--json", action="store_true", help="Machine-readable output.")
    add_all(parser)
    parser.add_argument("--node", metavar="I/N", default=None,
                        help="Check only node I's share of N (0-based; the ranks split into N "
                             "contiguous runs, as launchers number them): one task per node "
                             "checks the job in the time one node takes. 'auto': I and N from "
                             "srun (SLURM_PROCID/SLURM_NTASKS) or torchrun (RANK/WORLD_SIZE).")
    parser.add_argument("--report", metavar="FILE", default=None,
                        help="Also write this node's verdicts and summary numbers as a "
                             "mergeable JSON report ('{node}' in FILE: the node's index); "
                             "`mindspeed-prof merge FILE...` gives the job's verdict and "
                             "summary.")
    add_run_and_cache(parser, "judge")


def expected_ranks(tokens):
    if tokens is None:
        return None
    try:
        selected = ranks.parse_rank_tokens(tokens)
    except ConfigError as exc:  # the grammar's message names training's flag; this one is --ranks
        raise ConfigError(str(exc).replace(ranks.FLAG, "--ranks", 1)) from None
    if not selected or len(ranks.global_ranks(selected)) != len(selected):
        raise ConfigError(f"--ranks {' '.join(tokens)}: give global ranks (0 2 5) or ranges "
                          f"(0-7); 'all' and selectors need the job's layout, which check "
                          f"does not know.")
    return list(ranks.expand(selected))  # bounded: no rank past ranks.MAX_WORLD_SIZE


def run(args):
    from mindspeed_prof.output.render.safe import usage_errors

    with usage_errors():
        return run_reader(args, _run)


def _run(args):
    from mindspeed_prof.output.check.directory import check_directory
    from mindspeed_prof.output.render.check import check_json, check_table
    from mindspeed_prof.output.read.roles import role_roots

    from mindspeed_prof.output.job.share import parse_share

    share = parse_share(args.node)
    roots = role_roots(args.directory)
    if roots and (share is not None or args.report):
        raise ConfigError(f"--node/--report: {args.directory} holds RL role output, which "
                          f"node reports do not cover yet; check it on one machine.")
    if share is not None or args.report:
        return _node(args, share)
    if roots:  # RL output: a verdict per (role, rank)
        from mindspeed_prof.output.roles import render as render_roles
        from mindspeed_prof.output.roles.check import check_roles

        result = check_roles(args.directory, roots, expected_ranks(args.ranks), run=args.run)
        print(render_roles.role_check_json(result) if args.json
              else render_roles.role_check_table(result))
        return result.exit_code
    report = check_directory(args.directory, expected_ranks(args.ranks), run=args.run)
    print(check_json(report) if args.json else check_table(report, every=args.all))
    return report.exit_code


def _node(args, share):
    from mindspeed_prof.output.job.node_report import node_report, write_report
    from mindspeed_prof.output.outfile import refuse_input
    from mindspeed_prof.output.render.check import check_json, check_table

    if args.report:  # never over a file the readers read (refused before any reading)
        refuse_input("--report", args.report.replace("{node}", "0"), [args.directory])

    report, _, data = node_report(args.directory, share, expected_ranks(args.ranks),
                                  run=args.run)
    print(check_json(report) if args.json else check_table(report, every=args.all))
    if args.report:
        written = write_report(data, args.report)
        if not args.json:
            from mindspeed_prof.output.render.safe import cell
            print(cell(f"node report written to {written}"))
    return report.exit_code
