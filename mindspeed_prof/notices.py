"""What a recorder tells the user beyond its errors: the plan, announced once on rank 0, and the
fix that goes with each kind of profiler failure."""

import os

from . import log
from .units import describe_window

# What a user does about a profiler failure, by phase ({owner} goes on without profiling here).
_FIX = {
    "start": "; {owner} continues without profiling on this rank: check that the profiler "
             "works here (torch / torch_npu and CANN versions match), or try the other "
             "--profile-backend",
    "step": "; {owner} continues, this rank's window is cut short: profile again, or try the "
            "other --profile-backend if it repeats",
    "stop": "; {owner} continues, this rank's trace may be missing or partial: profile again, "
            "or try the other --profile-backend if it repeats",
}


def failure_fix(phase: str, owner: str) -> str:
    """The sentence appended to a profiler failure in ``phase`` ('' when there is none)."""
    return _FIX.get(phase, "").format(owner=owner)


def announce_plan(recorder, plans) -> None:
    """Rank 0 says which ranks record what, and where, before the first unit."""
    if recorder.rank != 0:
        return
    config, unit = recorder.config, recorder.unit
    where = os.path.abspath(recorder.save_path)
    chosen = short_ranks(recorder.selected_ranks)
    if config.profile_trigger_file:
        log.info(f"armed for on-demand profiling: `mindspeed-prof trigger "
                 f"{config.profile_trigger_file} --steps N` profiles the next N "
                 f"{unit.plural} on rank(s) {chosen} -> {where}")
        return
    shown = ", ".join(describe_window(p, unit, recorder.session_per_unit) for p in plans[:3])
    more = f" and {len(plans) - 3} more windows" if len(plans) > 3 else ""
    who = f"{recorder.role}: " if recorder.role else ""
    log.info(f"{who}profiling rank(s) {chosen} at {shown}{more} -> {where}")


def short_ranks(selected) -> str:
    """``0-7`` or ``0,3``: a rank list as log lines show it."""
    if not selected:
        return "none"
    if selected == list(range(selected[0], selected[-1] + 1)) and len(selected) > 2:
        return f"{selected[0]}-{selected[-1]}"
    return ",".join(str(r) for r in selected)
