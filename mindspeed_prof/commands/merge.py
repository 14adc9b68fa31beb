"""``mindspeed-prof merge REPORT... [--json|--csv]``: the job's verdict and summary from the
per-node reports that ``check DIR --node I/N --report FILE`` wrote.

Exit 0 only when every rank the job expects is valid (as ``check``), 1 otherwise, 2 on a usage
error (a file that is no node report, reports of another version).
"""

from mindspeed_prof.errors import ConfigError

HELP = ("Merge per-node reports (check --node I/N --report FILE) into the job's verdict and "
        "summary, slow ranks against the whole job's median.")


def add_arguments(parser):
    parser.add_argument("reports", nargs="+", metavar="REPORT",
                        help="The node reports, e.g. reports/node*.json.")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true",
                      help="Machine-readable: {nodes, check (as check --json), summary (as "
                           "summary --json)}.")
    form.add_argument("--csv", action="store_true", help="The summary as summary --csv.")
    from .reading import add_all
    add_all(parser)


def run(args):
    from mindspeed_prof.output.render.safe import usage_errors

    with usage_errors():
        try:
            return _run(args)
        except ConfigError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            # read_reports checks each report's shape; what slips past is still a bad report
            raise ConfigError(f"REPORT {' '.join(args.reports)}: a value of a node report is "
                              f"not what `check --report` writes ({type(exc).__name__}: "
                              f"{exc}); write the reports again with `mindspeed-prof check DIR "
                              f"--node I/N --report FILE`.") from None


def _run(args):
    from mindspeed_prof.output.job.merge import merge_reports
    from mindspeed_prof.output.render import jsontext
    from mindspeed_prof.output.render.check import check_table
    from mindspeed_prof.output.render.summary import summary_csv, summary_table

    merged = merge_reports(args.reports)
    if args.json:
        print(jsontext.dumps(merged.as_dict(), default=str))
    elif args.csv:
        print(summary_csv(merged.summary), end="")
    else:
        print(f"{merged.nodes} node report(s)\n")
        print(check_table(merged.check, every=args.all))
        print()
        print(summary_table(merged.summary, every=args.all))
    return merged.check.exit_code
