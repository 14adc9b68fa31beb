"""What each schedule transition does, as a table keyed by (previous, next) action.

`None` as the next action means stop(). The table is the observable contract:
run directories are created on entering WARMUP/RECORD, on_trace_ready runs when
leaving RECORD_AND_SAVE, and stopping during WARMUP deletes the run directory.
"""

from functools import partial

from ._console import print_warn_msg
from .scheduler import ProfilerAction as A


class ProfActionController:
    def __init__(self, prof, prof_if, on_trace_ready=None) -> None:
        self.prof = prof
        self.prof_if = prof_if
        self.on_trace_ready = on_trace_ready
        self.action_map = self._build_action_map()

    def transit_action(self, prev_action, current_action) -> None:
        for action in self.action_map.get((prev_action, current_action), []):
            action()

    def _trace_ready(self) -> None:
        if self.on_trace_ready:
            self.on_trace_ready(self.prof)

    def _build_action_map(self) -> dict:
        p = self.prof_if

        def warn(message):
            return partial(print_warn_msg, message)

        close = [p.stop_trace, p.finalize_trace, self._trace_ready]
        return {
            (A.NONE, A.NONE): [],
            (A.NONE, A.WARMUP): [p.init_trace, p.warmup_trace],
            (A.NONE, A.RECORD): [p.init_trace, p.start_trace],
            (A.NONE, A.RECORD_AND_SAVE): [p.init_trace, p.start_trace],
            (A.WARMUP, A.NONE): [warn("Incorrect schedule: WARMUP followed by NONE"),
                                 p.start_trace, p.stop_trace, p.finalize_trace],
            (A.WARMUP, A.WARMUP): [],
            (A.WARMUP, A.RECORD): [p.start_trace],
            (A.WARMUP, A.RECORD_AND_SAVE): [p.start_trace],
            (A.RECORD, A.NONE): [warn("Incorrect schedule: RECORD followed by NONE"),
                                 p.stop_trace, p.finalize_trace],
            (A.RECORD, A.WARMUP): [warn("Incorrect schedule: RECORD followed by WARMUP"),
                                   p.stop_trace, p.finalize_trace],
            (A.RECORD, A.RECORD): [],
            (A.RECORD, A.RECORD_AND_SAVE): [],
            (A.RECORD_AND_SAVE, A.NONE): close,
            (A.RECORD_AND_SAVE, A.WARMUP): close + [p.init_trace, p.warmup_trace],
            (A.RECORD_AND_SAVE, A.RECORD): close + [p.init_trace, p.start_trace],
            (A.RECORD_AND_SAVE, A.RECORD_AND_SAVE): close + [p.init_trace, p.start_trace],
            (A.WARMUP, None): [
                warn("Incorrect schedule: Stop profiler while current state is WARMUP "
                     "which will result in empty parsed data."),
                p.finalize_trace, p.delete_prof_dir],
            (A.RECORD, None): [
                warn("Incorrect schedule: Stop profiler while current state is RECORD "
                     "which may result in incomplete parsed data."),
                *close],
            (A.RECORD_AND_SAVE, None): [
                warn("Stop profiler while current state is RECORD_AND_SAVE, "
                     "perhaps the scheduling cycle has not yet completed."),
                *close],
        }
