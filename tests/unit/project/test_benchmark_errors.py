"""A benchmark figure that did not run says why: the reader that failed, how it ended (a signal
by name) and its stderr, where a crash's cause is, kept to the end (CI, stop 40: `check` died of
SIGABRT inside figure 9 and the note kept only the start of its stdout)."""

import os
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def in_benchmarks(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_a_reader_killed_by_a_signal_is_named_with_its_stderr_before_its_stdout():
    done = in_benchmarks("""
        import sys
        from benchmarks.common import clean_env
        from benchmarks.output_run import must_pass, timed
        crash = [sys.executable, "-c", "import faulthandler, os, sys; print('{' * 5000);"
                 "sys.stderr.write('the cause\\\\n'); sys.stderr.flush(); os.abort()"]
        try:
            must_pass(timed(crash, clean_env()), crash)
        except RuntimeError as exc:
            print(str(exc))
    """)
    assert "was killed by SIGABRT" in done.stdout, done.stdout + done.stderr
    assert done.stdout.index("the cause") < done.stdout.index("--- stdout ---")
    assert "Fatal Python error: Aborted" in done.stdout  # faulthandler, from clean_env


def test_a_figure_that_did_not_run_keeps_the_end_of_its_error():
    done = in_benchmarks("""
        from benchmarks import run
        text = "python -m benchmarks.report failed\\n" + "x" * 10_000 + "\\nRuntimeError: the cause"
        print(run._ends(text))
    """)
    assert done.stdout.startswith("python -m benchmarks.report failed")
    assert done.stdout.rstrip().endswith("RuntimeError: the cause") and len(done.stdout) < 2500
