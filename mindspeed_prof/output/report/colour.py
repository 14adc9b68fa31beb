"""Colour scales the reader can trust: an all-zero panel is neutral and says so, and a small
spread is never drawn as the full scale (the scale starts at zero: a 1 % difference between
ranks is 1 % of the colour range)."""

from typing import Any, Dict, List, Optional

NEUTRAL = [[0.0, "#eeeeee"], [1.0, "#eeeeee"]]


def scale(values: List[Optional[float]]) -> Dict[str, Any]:
    """plotly's ``zmin``/``zmax``/``colorscale`` for ``values`` and the words for the panel:
    from zero to the largest value; one grey when every value is zero."""
    known = [v for v in values if v is not None]
    top = max(known) if known else 0.0
    if not known or top <= 0.0 and min(known) >= 0.0:
        return {"zmin": 0.0, "zmax": 1.0, "colorscale": NEUTRAL, "zero": True,
                "says": "every value is zero: nothing to colour"}
    low = min(0.0, min(known))
    spread = (top - min(known)) / top * 100.0 if top else 0.0
    return {"zmin": low, "zmax": top, "colorscale": "YlOrRd", "zero": False,
            "says": f"colour from {low:g} to {top:.3f} ms; the cells differ by "
                    f"{spread:.1f} % of the largest"}
