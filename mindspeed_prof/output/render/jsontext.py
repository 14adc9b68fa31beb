"""JSON text as ``json.dumps(value, indent=2)`` writes it, at the C encoder's speed.

With ``indent`` set, ``json`` falls back to its pure-Python encoder: a 64-rank ``summary --json``
spent half its CPU there (0.5 s of 1.05 s, cProfile). The compact text comes from the C encoder
and msgspec re-indents it, copying every number and string token as written, so the text is
the same byte for byte. msgspec refuses what ``json`` writes and JSON does not allow (NaN,
Infinity, lone surrogates): such a value is written by ``json`` itself, as before.
"""

import json
from typing import Any, Callable, Optional

from ..deps import need


def dumps(value: Any, default: Optional[Callable[[Any], Any]] = None) -> str:
    """``json.dumps(value, indent=2, default=default)``, the same text."""
    compact = json.dumps(value, default=default)
    msgspec = need("msgspec")  # the CLI's dependency, never the training side's
    try:
        return msgspec.json.format(compact, indent=2)
    except msgspec.DecodeError:
        return json.dumps(value, indent=2, default=default)
