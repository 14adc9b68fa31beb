"""JSON text as ``json.dumps(value, indent=2)`` writes it, at the C encoder's speed, and strict.

With ``indent`` set, ``json`` falls back to its pure-Python encoder: a 64-rank ``summary --json``
spent half its CPU there (0.5 s of 1.05 s, cProfile). The compact text comes from the C encoder
and msgspec re-indents it, copying every number and string token as written, so the text is
the same byte for byte. msgspec refuses lone surrogates: such a value is written by ``json``
itself, as before.

Every ``--json`` (and every JSON file the readers write) is strict JSON: ``NaN`` and
``Infinity`` are no JSON, and jq and every strict parser refuse them. The readers leave
unreadable numbers out where they read them (``read/numbers.py``); a non-finite float that
still reaches an output (a sum that overflowed, a node report written by hand) is written as
``null``, and a dict's top level states how many were (``NON_FINITE_KEY``). Only such an
output pays for the walk: the strict encoder says at once whether it is needed.
"""

import json
import math
from typing import Any, Callable, Optional, Tuple

from ..deps import need

NON_FINITE_KEY = "non_finite_as_null"  # how many non-finite numbers were written as null


def strict(value: Any) -> Tuple[Any, int]:
    """``value`` with every NaN/Infinity float made None, and how many were."""
    count = 0

    def walk(item):
        nonlocal count
        if isinstance(item, float):
            if math.isfinite(item):
                return item
            count += 1
            return None
        if isinstance(item, dict):
            return {(str(k) if isinstance(k, float) and not math.isfinite(k) else k): walk(v)
                    for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        return item

    return walk(value), count


def compact(value: Any, default: Optional[Callable[[Any], Any]] = None, **options: Any) -> str:
    """``json.dumps(value, ...)``, strict: non-finite numbers as null, their count stated."""
    try:
        return json.dumps(value, default=default, allow_nan=False, **options)
    except ValueError:
        value, count = strict(value)
        if count and isinstance(value, dict):
            value[NON_FINITE_KEY] = count
        return json.dumps(value, default=default, allow_nan=False, **options)


def dumps(value: Any, default: Optional[Callable[[Any], Any]] = None) -> str:
    """``json.dumps(value, indent=2, default=default)``, the same text, strict."""
    text = compact(value, default)
    msgspec = need("msgspec")  # the CLI's dependency, never the training side's
    try:
        return msgspec.json.format(text, indent=2)
    except msgspec.DecodeError:
        return json.dumps(json.loads(text), indent=2)
