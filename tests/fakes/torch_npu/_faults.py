"""Failure injection for tests, read from the environment at the moment of each call.

FAKE_TORCH_NPU_FAIL is a comma list of points; see tests/fakes/README.md for what
each point breaks. Reading at call time (not import time) lets one test arm a
failure with monkeypatch.setenv after the fake has been imported.
"""

import os
import time

FAIL_ENV = "FAKE_TORCH_NPU_FAIL"
PARSE_DELAY_ENV = "FAKE_TORCH_NPU_PARSE_DELAY_S"
POINTS = ("import", "start", "step", "stop", "parse", "finalize")


class InjectedFailure(RuntimeError):
    """Raised at an armed point; the profiler's swallow path turns it into an [ERROR] line."""


def armed_points() -> set:
    raw = os.environ.get(FAIL_ENV, "")
    points = {part.strip() for part in raw.split(",") if part.strip()}
    unknown = sorted(points - set(POINTS))
    if unknown:
        # A misspelt point would otherwise make a failure test pass vacuously.
        raise ValueError(
            f"{FAIL_ENV}={raw!r} names unknown point(s) {', '.join(unknown)}; "
            f"valid points are {', '.join(POINTS)}."
        )
    return points


def is_armed(point: str) -> bool:
    return point in armed_points()


def fail_if_armed(point: str, what: str) -> None:
    if is_armed(point):
        raise InjectedFailure(f"{what} (injected by {FAIL_ENV}={point})")


def parse_delay_seconds() -> float:
    raw = os.environ.get(PARSE_DELAY_ENV, "")
    if not raw:
        return 0.0
    try:
        delay = float(raw)
    except ValueError as err:
        raise ValueError(f"{PARSE_DELAY_ENV}={raw!r} must be a number of seconds.") from err
    return max(delay, 0.0)


def sleep_for_parse_delay() -> None:
    delay = parse_delay_seconds()
    if delay:
        time.sleep(delay)
