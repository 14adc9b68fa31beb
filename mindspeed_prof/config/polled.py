"""What starts windows while the job runs, as the plan sees it: one row per source (a trigger).

The plan needs three answers of each: whether the config turns it on (then every rank takes
part in the poll every ``--profile-trigger-poll`` units, and every window gets a folder of its
own), and whether it takes the place of the flags' repeated windows (``--profile-every``) or
only of the one default window. ``window.py`` and ``recording/plan.py`` ask this table, never a
source by name. A new source is a row here and one module in ``control/``: its ``part``
(``control/poll_exchange.PollPart``, named ``"module:Class"``, built with the plan and the
reporter) adds its entries to the poll's one exchange and, from what every rank sent, returns
the ``WindowRequest`` for the recorder's one door, ``request_window``. The trigger file and the
capture rules share one built-in part (``control/captures.CapturePoll``: a trigger request
takes a poll's place of a capture), so their rows name none.
"""

from dataclasses import dataclass
from typing import Any, Callable, Optional


@dataclass(frozen=True)
class PolledSource:
    name: str
    on: Callable[[Any], bool]  # the config turns it on
    instead_of_every: bool  # its windows replace --profile-every's (else only the default one)
    # "module:Class" of its share of the poll (None: the built-in part, control/captures.py);
    # a name, not the class, so config/ imports nothing above it and nothing loads unless on
    part: Optional[str] = None


SOURCES = (
    PolledSource("the trigger file (--profile-trigger-file)",
                 lambda config: bool(config.profile_trigger_file), instead_of_every=True),
    PolledSource("captures by themselves (--profile-on-*)",
                 lambda config: bool(config.captures), instead_of_every=False),
)


def polled(config: Any) -> bool:
    """A source of run-time windows is on: every rank polls."""
    return any(source.on(config) for source in SOURCES)


def replaces_every(config: Any) -> bool:
    """A source that is on takes the place of ``--profile-every``'s windows."""
    return any(source.instead_of_every and source.on(config) for source in SOURCES)
