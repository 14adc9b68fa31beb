"""What a recorder tells the user beyond its errors: the plan, announced once on rank 0, and the
fix that goes with each kind of profiler failure."""

import os

from .. import log
from ..config import ranks
from ..config.ranks import short_ranks
from ..config.units import describe_window

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


def config_notes(plan, backend: str) -> list:
    """What a profiled rank says about its config once, in its manifest too."""
    config = plan.config
    notes = list(config.warnings(role_driver=plan.role is not None))
    from ..backends import kind

    notes += kind(backend).config_notes(config)
    ignored = kind(backend).ignored_flags(config)
    if ignored:
        one = len(ignored) == 1
        notes.append(f"{', '.join(ignored)} appl{'ies' if one else 'y'} only to the npu "
                     f"backend; the {backend} backend ignores {'it' if one else 'them'}.")
    return notes


def failure_fix(phase: str, owner: str) -> str:
    """The sentence appended to a profiler failure in ``phase`` ('' when there is none)."""
    return _FIX.get(phase, "").format(owner=owner)


def announce_plan(plan) -> None:
    """Rank 0 says which ranks record what, and where, before the first unit."""
    if plan.rank != 0:
        return
    config, unit, plans = plan.config, plan.unit, plan.windows
    where = os.path.abspath(plan.save_path)
    chosen = short_ranks(list(plan.selected_ranks))
    lacking = ranks.beyond(config.profile_ranks, plan.world_size)
    if lacking:
        log.warning(f"--profile-ranks {ranks.format_selection(config.profile_ranks)}: rank(s) "
                    f"{ranks.spans_text(lacking)} are beyond this job's {plan.world_size} ranks and are "
                    f"left out")
    if config.captures:
        from ..control.capture_words import rules_in_words

        rules = rules_in_words(config, unit.name, unit.plural, f"the selected rank(s) {chosen}")
        log.info(f"armed for captures: {rules} -> {where}")
        if not plans and not config.profile_trigger_file:
            return
    if config.profile_trigger_file:
        log.info(f"armed for on-demand profiling: `mindspeed-prof trigger "
                 f"{config.profile_trigger_file} --steps N` profiles the next N "
                 f"{unit.plural} on rank(s) {chosen} -> {where}")
        return
    if not plans:
        log.info(f"no window planned: none of --profile-step-start/-end, --profile-steps, "
                 f"--profile-every was given; a server records rank(s) {chosen} from POST "
                 f"/start_profile to POST /stop_profile (counted in {unit.plural}) -> {where}")
        return
    shown = ", ".join(describe_window(p, unit, plan.session_per_unit) for p in plans[:3])
    more = f" and {len(plans) - 3} more windows" if len(plans) > 3 else ""
    who = f"{plan.role}: " if plan.role else ""
    log.info(f"{who}profiling rank(s) {chosen} at {shown}{more} -> {where}")


def spans(numbers) -> str:
    """``[2, 3, 4, 7]`` -> ``2-4,7``: units as messages name them."""
    parts: list = []
    run: list = []
    for n in sorted(numbers):
        if run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [n]
    if run:
        parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(parts)


def window_cut_words(unit, reason, last_begun, window, recorded, partial=None) -> str:
    """What a run that stopped inside a window of per-unit sessions kept, from the manifest's
    own record (what is on disk), never from the plan's arithmetic; ``partial``: the unit cut
    mid-way whose session was written (a partial trace), if any."""
    start, end = window
    span = f"{start}-{end - 1}" if end is not None else f"{start}.."
    if len(recorded) == 1:
        kept = f"{unit.name} {recorded[0]} was recorded"
    else:
        kept = f"{unit.plural} {spans(recorded)} were recorded" if recorded else \
            "nothing was recorded"
    if partial is not None:  # never "nothing was recorded" beside a trace that was written
        if not recorded:
            kept = f"no {unit.name} was recorded to its end"
        kept += (f"; the partial trace of {unit.name} {partial}, cut mid-way, was written "
                 f"(check reports it as cut)")
    after = f" after {unit.name} {last_begun}" if last_begun is not None else ""
    return (f"{unit.owner} stopped ({reason}){after}, before the window of {unit.plural} {span} "
            f"completed: {kept}")


def session_cut_words(unit, reason, recorded, start, partial) -> str:
    """What a session cut short kept (``partial``: a trace of a unit cut mid-way was written)."""
    if recorded:
        return (f"{unit.owner} ended ({reason}) inside the window; {unit.plural} {recorded} were "
                f"recorded")
    if partial:
        return (f"{unit.owner} ended ({reason}) before {unit.name} {start} completed; its "
                f"partial {unit.name} was written (check reports it as cut)")
    return (f"{unit.owner} ended ({reason}) before {unit.name} {start} completed; nothing was "
            f"profiled")


def wrong_thread_words(who: str, owner_thread: int) -> str:
    import threading

    return (f"{who}: the profiler session was started on thread {owner_thread} and cannot be "
            f"stepped or stopped from thread {threading.get_ident()} (torch's profilers record "
            f"and stop on their own thread); call begin/end on the thread that does the work")
