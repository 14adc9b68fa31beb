"""The launch-script editor behind ``mindspeed-prof adapt-script``.

``words`` reads one shell word (quotes, expansions, substitutions), ``scan`` finds the simple
commands of a script with their offsets, ``program`` walks past the wrappers in front of a
command's program (``srun``, ``timeout`` ...), ``embedded`` finds the command strings a script runs
(``sh -c "$CMD"``, ``eval``), ``launches`` tells which commands start Python and which train or
serve, and ``adapter`` edits the text. Pure text in, text out.
"""

from .adapter import Adaptation, adapt_script
from .launches import Launch, find_launches

__all__ = ["Adaptation", "Launch", "adapt_script", "find_launches"]
