"""What a usage error must be: exit 2, one message naming the flag or key and saying what to do,
no traceback; and the CLI run in this process to get one."""

import contextlib
import io
import re

from mindspeed_prof import cli

FIX = re.compile(r"\b(use|give|pick|choose|did you mean|expected|must be|write|fix|drop|set|"
                 r"merge|move|any of|one of|valid keys|leave it out|required|see .*--help)\b", re.IGNORECASE)


def run_cli(*argv):
    """(exit code, stderr) of ``mindspeed-prof ARGV`` run in this process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main([str(a) for a in argv])
        except SystemExit as exc:  # argparse's own errors
            code = exc.code
    return code, err.getvalue()


def assert_usage_error(code, err, names):
    """Exit 2; the message names one of ``names`` and says what to do; no traceback."""
    assert code == 2, err
    assert "Traceback" not in err, err
    message = err.strip().splitlines()[-1]
    assert any(name in message for name in names), f"{names} not in: {message}"
    assert FIX.search(message), f"no fix in: {message}"
