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


def assert_merge_refuses(capsys, tmp_path, good, damage):
    """``merge`` on each damaged copy of the node report ``good`` (``damage``: the words the
    message must hold -> the change): exit 2, "REPORT FILE: not a node report" and those words."""
    import copy

    for said, change in damage.items():
        data = copy.deepcopy(good)
        change(data)
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(data))
        code, _, err = run_cli(capsys, "merge", bad)
        assert code == 2, said
        assert f"REPORT {bad}: not a node report" in err and said in err, err
