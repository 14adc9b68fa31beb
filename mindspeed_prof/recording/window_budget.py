"""The disk budget the recorder's windows run under (a part of ``WindowRecorder``).

The job's budget (``--profile-max-gb``, checked against the planned windows at start-up), or,
while a window asked for over HTTP with no length and no ``--profile-max-gb`` runs, that
window's own (``http_control.WindowBudget``). ``used()`` counts what this rank's finished
windows wrote (the manifest lists them).
"""

from typing import Any, Callable, Optional, Sequence, Tuple

from ..config import budget
from ..config.window import StepSchedule, WindowRequest
from ..control import http_control

_UNSET: Any = object()


class WindowBudget:
    def __init__(self, used: Callable[[], int]) -> None:
        self.used = used
        self.limit: Any = None  # config.budget.RankBudget, or an asked window's own
        self._planned: Any = _UNSET  # the job's budget, while a window has one of its own

    def for_captures(self, config: Any, backend: str, ranks: Sequence[int]) -> None:
        """A straggler capture may choose a rank the plan does not: it keeps a share too."""
        if self.limit is None and config.captures and config.profile_max_gb is not None:
            self.limit = budget.RankBudget(config, backend, list(ranks))

    @property
    def watched(self) -> bool:
        """A running session is judged after each unit (a limit in GB applies)."""
        return self.limit is not None and self.limit.limit_gb is not None

    def allows(self, schedule: StepSchedule) -> bool:
        return self.limit is None or self.limit.allows(schedule, self.used())

    def crossed(self, running_outputs: Any) -> bool:
        return self.limit.crossed(self.used(), running_outputs)

    def skip_reason(self, unit: Any, schedule: StepSchedule) -> str:
        return str(self.limit.skip_reason(unit, schedule))

    def stop_reason(self, unit: Any, last_recorded: int) -> str:
        return str(self.limit.stop_reason(unit, last_recorded))

    def room(self, unit: Any) -> Optional[Tuple[int, str]]:
        """What this rank tells the poll of its room for a capture (``captures.Room``)."""
        limit = self.limit
        left = limit.units_left(self.used()) if limit is not None else None
        if left is None:
            return None
        return left, (f"its share of --profile-max-gb {limit.limit_gb:g} holds "
                      f"{left} more {unit.name if left == 1 else unit.plural}")

    def own_for(self, config: Any, backend: str, request: WindowRequest) -> None:
        """The budget the window ``request`` opens runs under: the job's, or a default one of
        its own (an HTTP start with no length and no --profile-max-gb)."""
        if self._planned is _UNSET:
            self._planned = self.limit
        gb = http_control.default_budget_gb(config, request)
        self.limit = self._planned if gb is None else http_control.WindowBudget(
            config, backend, gb, self.used())

    def end_own(self) -> None:
        """The asked window's own budget ends with it: the job's applies again."""
        if self._planned is not _UNSET:
            self.limit = self._planned
