"""What the commands that read a save path (check, summary, diff, timeline, report) share: the options that choose
what is read, and how a run of theirs starts (the readers' parsers checked, the cache)."""


def add_run_and_cache(parser, verb: str) -> None:
    """``--run ID`` (``verb``: "judge", "summarise") and ``--no-cache``."""
    parser.add_argument("--run", metavar="ID", default=None,
                        help=f"When several jobs wrote into DIR: {verb} the run with this run "
                             f"id (as check and summary name them) instead of the newest.")
    add_no_cache(parser)


def add_no_cache(parser) -> None:
    """``--no-cache``: every command that reads through the readers' cache takes it alike."""
    parser.add_argument("--no-cache", action="store_true",
                        help="Read every file again, ignoring what an earlier check/summary of "
                             "the same unchanged files remembered (MINDSPEED_PROF_CACHE).")


def run_reader(args, body) -> int:
    """``body(args)``, with a reader's missing parser an exit-2 usage error naming it (no
    verdict), every usage error's text escaped (render/safe.py) and the cache off under
    ``--no-cache``."""
    from mindspeed_prof.output.allocator import keep_freed_blocks
    from mindspeed_prof.output.deps import as_usage_error
    from mindspeed_prof.output.render.safe import usage_errors

    keep_freed_blocks()
    # a usage error quotes what the user typed (--role, --run) and what the folder holds (its
    # roles, units, run ids): its control characters are escaped, as every other line
    with usage_errors(), as_usage_error():
        if args.no_cache:
            from mindspeed_prof.output import cache
            cache.disable()
        return body(args)


def add_all(parser) -> None:
    """``--all``: past 32 ranks the terminal tables print the ranks with a problem first and
    the others grouped (ranges like 0-1023); this prints a row per rank instead."""
    parser.add_argument("--all", action="store_true",
                        help="A row per rank on the terminal. Past 32 ranks the tables show the "
                             "ranks with a problem first and the others grouped (0-1023).")
