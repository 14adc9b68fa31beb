"""What a number read from a file is, decided once for every reader.

A trace's ``ts``/``dur`` (or a table's time) is a number of microseconds written as a JSON
number or as text (torch_npu writes ``"1704161511420289.011"``). It is *unreadable* when it is
no number, when it is not finite (``"nan"``, ``"inf"``, ``NaN`` or ``Infinity`` as Python's
``json`` takes them, ``1e400`` read as infinity) or when it lies past ``TIME_BOUND_US``: a
``1e308`` is finite, but the first sum or end (``ts + dur``) made of it overflows to infinity,
and no clock or duration of a profile comes near the bound (10**18 µs: 31,000 years; absolute
epoch timestamps are ~1.8e15 µs). An unreadable value is left out of what is computed, and the
reader that met it says so and counts it: it is never a crash nor a number in a verdict.
"""

import math
from typing import Optional

TIME_BOUND_US = 1e18


def time_us(value: object) -> Optional[float]:
    """``value`` as a float, or None when it is unreadable (see the module's note)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value) if -TIME_BOUND_US <= value <= TIME_BOUND_US else math.nan
    else:
        try:
            number = float(str(value).strip())
        except (TypeError, ValueError, OverflowError):
            return None
    return number if -TIME_BOUND_US <= number <= TIME_BOUND_US else None  # NaN fails both


def shown(value: object, limit: int = 24) -> str:
    """The unreadable value as a note quotes it (short; text escaped later by render/safe)."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
