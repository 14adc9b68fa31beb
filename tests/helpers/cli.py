"""Running ``mindspeed-prof`` commands in-process, as the command-line tests do."""

import json

from mindspeed_prof.cli import main


def run_cli(capsys, command, *args):
    """(exit code, stdout, stderr) of ``mindspeed-prof COMMAND ARGS...``."""
    code = main([command, *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_cli_json(capsys, command, *args):
    """(exit code, parsed JSON) of ``mindspeed-prof COMMAND ARGS... --json``."""
    code, out, _ = run_cli(capsys, command, *args, "--json")
    return code, json.loads(out)


def rank_entry(report, rank):
    """The entry of ``rank`` in a check or summary JSON report."""
    return next(r for r in report["ranks"] if r["rank"] == rank)
