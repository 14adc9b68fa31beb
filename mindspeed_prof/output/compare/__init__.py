"""Two profiles side by side (``diff_paths``): runs, windows or ranks, per step and per operator."""


def diff_paths(a: str, b: str, top: int = 10) -> dict:
    """``mindspeed-prof diff A B --json``'s dict (``compare/diff.py``)."""
    from .diff import diff_paths as _diff

    return _diff(a, b, top=top)


__all__ = ["diff_paths"]
