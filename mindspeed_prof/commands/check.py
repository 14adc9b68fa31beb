"""``mindspeed-prof check DIR [--ranks R...] [--json]``: is every rank's profile usable?

Exit 0 only when every expected rank is valid, 1 when any is not (or nothing was found),
2 on a usage error. A broken file is a verdict, never a traceback.
"""

from mindspeed_prof import ranks
from mindspeed_prof.errors import ConfigError

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


def expected_ranks(tokens):
    if tokens is None:
        return None
    try:
        selected = ranks.parse_rank_tokens(tokens)
    except ConfigError as exc:  # the grammar's message names training's flag; this one is --ranks
        raise ConfigError(str(exc).replace(ranks.FLAG, "--ranks", 1)) from None
    if not selected or not all(isinstance(r, int) for r in selected):
        raise ConfigError(f"--ranks {' '.join(tokens)}: give global ranks (0 2 5) or ranges "
                          f"(0-7); 'all' and selectors need the job's layout, which check "
                          f"does not know.")
    return list(selected)


def run(args):
    from mindspeed_prof.output.check.directory import check_directory
    from mindspeed_prof.output.render.check import check_json, check_table
    from mindspeed_prof.output.read.roles import role_roots

    roots = role_roots(args.directory)
    if roots:  # RL output: a verdict per (role, rank)
        from mindspeed_prof.output.render import roles as render_roles
        from mindspeed_prof.output.check.roles import check_roles

        result = check_roles(args.directory, roots, expected_ranks(args.ranks))
        print(render_roles.role_check_json(result) if args.json
              else render_roles.role_check_table(result))
        return result.exit_code
    report = check_directory(args.directory, expected_ranks(args.ranks))
    print(check_json(report) if args.json else check_table(report))
    return report.exit_code
