import subprocess
import sys
import threading

from mindspeed_prof.backends.errorcapture import capture_error_lines


def test_error_lines_printed_by_a_library_are_captured_and_still_shown(capsys):
    seen = []
    with capture_error_lines(seen.append):
        print("[2026-01-01 00:00:00] [INFO] [1] profiler.py: Start parsing profiling data")
        print("[2026-01-01 00:00:00] [ERROR] [1] profiler.py: Call start failed. Exception: boom")
        sys.stderr.write("half a line [ERROR] at the end")
    assert seen == ["[2026-01-01 00:00:00] [ERROR] [1] profiler.py: Call start failed. Exception: boom",
                    "half a line [ERROR] at the end"]
    out = capsys.readouterr()
    assert "Start parsing" in out.out and "Call start failed" in out.out
    assert "half a line" in out.err


RACE = """
import os, sys, threading, time
from mindspeed_prof.backends.errorcapture import capture_error_lines
sys.stdout = open(os.devnull, "w")
sys.setswitchinterval(1e-6)  # switch threads as often as possible
done = threading.Event()

def printer():  # another thread of the training process that prints
    while not done.is_set():
        print("x" * 50, "y", "z", flush=True)

thread = threading.Thread(target=printer)
thread.start()
end = time.monotonic() + 2
while time.monotonic() < end:
    with capture_error_lines(lambda line: None):
        print("[ERROR] from the call")
        garbage = [str(i) * 3 for i in range(20)]  # reuse whatever memory gets freed
done.set()
thread.join()
"""


def test_capturing_while_another_thread_prints_does_not_crash_the_process():
    # Swapping sys.stdout per call segfaulted here within 0.1 s (print() keeps a borrowed
    # pointer to the swapped-out stream); CI saw it as a SIGSEGV of the profiled rank.
    done = subprocess.run([sys.executable, "-c", RACE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stderr, done.stderr[-2000:]


def test_a_capture_collects_only_what_its_own_thread_prints(capsys):
    seen = []
    other = threading.Thread(target=lambda: print("[ERROR] printed by another thread"))
    with capture_error_lines(seen.append):
        other.start()
        other.join()
        print("[ERROR] printed by the call")
    assert seen == ["[ERROR] printed by the call"]
    assert "printed by another thread" in capsys.readouterr().out


def test_nested_captures_each_get_their_lines_and_the_outer_one_resumes(capsys):
    outer, inner = [], []
    with capture_error_lines(outer.append):
        print("[ERROR] one")
        with capture_error_lines(inner.append):
            print("[ERROR] two")
        print("[ERROR] three")
    assert (outer, inner) == (["[ERROR] one", "[ERROR] three"], ["[ERROR] two"])


def test_the_wrapped_stream_still_behaves_like_the_stream(capsys):
    import copy

    with capture_error_lines(lambda line: None):
        pass
    tee = sys.stdout
    assert type(tee).__name__ == "_Tee"  # the wrapper stays on after the capture
    assert tee.encoding and tee.writable()  # attributes come from the wrapped stream
    assert copy.copy(tee) is not None  # a copy (no __init__ run) must not recurse forever
