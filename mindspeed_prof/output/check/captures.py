"""What ``check`` says of captures by themselves (``--profile-on-slow-step``/``-straggler``).

Each capture is judged as any window is (its files, its steps); this adds why it was taken, one
line from its manifest window's ``trigger``, and the verdict of a rank that was armed for
captures and took none: nothing is missing there (no anomaly, or the captures chose other
ranks), and the manifest's ``captures`` says which.
"""

from ...control.capture_words import describe


def _unit(manifest):
    unit = manifest.data.get("unit") if manifest is not None else None
    return unit if isinstance(unit, str) else "iteration"


def reason_line(window, manifest):
    """Why the capture in ``window`` (a manifest window entry) was taken; None when planned."""
    trigger = window.get("trigger") if isinstance(window, dict) else None
    if not isinstance(trigger, dict):
        return None
    line = describe(trigger, _unit(manifest))
    role = trigger.get("this_rank")
    return f"{line} (this rank: the {role})" if isinstance(role, str) else line


def nothing_captured(manifest):
    """For a rank that left no capture: the note saying why that is fine, or None when its
    manifest does not show a finished run armed for captures."""
    if manifest is None:
        return None
    data = manifest.data
    captures = data.get("captures")
    if not isinstance(captures, dict) or data.get("exit") is None or data.get("windows"):
        return None
    taken = [t for t in captures.get("taken") or () if isinstance(t, dict)]
    unit = _unit(manifest)
    if taken:
        shown = "; ".join(f"capture {t.get('capture')} ({unit} {t.get('first')}-{t.get('last')}) "
                          f"chose rank(s) {','.join(map(str, t.get('ranks') or []))}"
                          for t in taken[:3])
        return f"armed for captures, none on this rank: {shown}"
    seen = captures.get("ratios_seen") if isinstance(captures.get("ratios_seen"), dict) else {}
    parts = []
    for rule, stats in seen.items():
        if isinstance(stats, dict) and stats.get("judged"):
            parts.append(f"{rule}: {stats['judged']} judged, largest ratio "
                         f"{stats.get('largest')}x")
    judged = f" ({'; '.join(parts)})" if parts else ""
    refused = captures.get("not_captured")
    if refused:
        return (f"armed for captures, none taken: {refused} anomalies were seen but refused "
                f"(the manifest's captures says why){judged}")
    return f"armed for captures, none taken: no anomaly{judged}"
