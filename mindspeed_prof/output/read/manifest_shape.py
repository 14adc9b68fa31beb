"""Whether a ``profile_manifest_rank{R}.json`` has the types its schema gives each field.

A manifest says what its rank was asked to record and how it ended; ``check`` judges the rank's
files against it. One whose fields hold other types (``status: 5``, ``windows: "x"``) says
nothing that can be read, so it is treated as unreadable (its rank is not valid), never as a
manifest with nothing to say. Older manifests lack some fields: only fields present are
checked, and ``null`` where the writer writes it.
"""

from typing import Any, Optional

from ...manifest_schema import FIELDS

MAX_MANIFEST_BYTES = 64 << 20  # a manifest of thousands of windows is a few MB
MAX_RANK = 1 << 31  # a global rank: torch.distributed counts them in an int
MAX_UNIT = 1 << 62  # an iteration, request or step number

_TYPES = {name: field.types for name, field in FIELDS.items()}
_NAMES = {int: "a whole number", str: "a string", list: "a list", dict: "an object",
          type(None): "null"}


def _show(value: Any) -> str:
    if type(value) is int and value.bit_length() > 64:
        return f"a number of {len(format(value, 'x'))} hex digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _whole(value: Any) -> bool:
    return type(value) is int


def shape_problem(data: dict) -> Optional[str]:
    """What in ``data`` (a manifest's JSON object) has a type its schema never gives, or None."""
    wrong = []
    for key, types in _TYPES.items():
        if key in data and type(data[key]) not in types:
            wrong.append(f"{key} is {_show(data[key])} ({' or '.join(_NAMES[t] for t in types)} "
                         f"expected)")
    if wrong:
        return "; ".join(wrong[:4]) + (f"; and {len(wrong) - 4} more" if len(wrong) > 4 else "")
    rank = data.get("rank")
    if rank is not None and not 0 <= rank < MAX_RANK:
        return f"rank is {_show(rank)}, not a rank"
    for value in data.get("selected_ranks") or []:
        if not _whole(value) or not 0 <= value < MAX_RANK:
            return f"selected_ranks holds {_show(value)}, not a rank"
    for key in ("files",):
        if any(not isinstance(item, str) for item in data.get(key) or []):
            return f"{key} holds something other than paths"
    for index, window in enumerate(data.get("windows") or []):
        problem = _window_problem(window, index)
        if problem:
            return problem
    return None


def _window_problem(window: Any, index: int) -> Optional[str]:
    if not isinstance(window, dict):
        return f"windows[{index}] is {_show(window)}, not a window"
    for key in ("start", "end"):
        value = window.get(key)
        if value is not None and (not _whole(value) or not -1 <= value < MAX_UNIT):
            return f"windows[{index}].{key} is {_show(value)}, not an iteration number"
    for key in ("iterations_recorded", "files"):
        if key in window and not isinstance(window[key], list):
            return f"windows[{index}].{key} is {_show(window[key])}, not a list"
    for value in window.get("iterations_recorded") or []:
        if not _whole(value) or not 0 <= value < MAX_UNIT:
            return f"windows[{index}].iterations_recorded holds {_show(value)}, not an " \
                   f"iteration number"
    return None
