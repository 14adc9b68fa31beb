"""Who makes everyone wait, and why (DESIGN §8): collectives matched across the ranks of their
group (``match.py``), arrivals on clocks aligned on collective ends (``timeline/clock.py``), the
ranks others wait for with their reason (``analyse.py``), named by the parallel layout
(``layout.py``). ``summary``, ``report`` and ``diff`` take slow ranks from here; none computes
waits of its own."""

from .analyse import analyse, kind_of
from .layout import Layout

__all__ = ["analyse", "kind_of", "Layout"]
