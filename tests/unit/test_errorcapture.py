import sys

from mindspeed_prof.errorcapture import capture_error_lines


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
