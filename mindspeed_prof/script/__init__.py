"""The launch-script editor behind ``mindspeed-prof adapt-script``.

``scan`` finds the simple commands of a shell script (with offsets), ``launches`` tells which of
them start Python and which train, and ``adapter`` edits the text. Pure text in, text out.
"""

from .adapter import Adaptation, adapt_script
from .launches import Launch, find_launches

__all__ = ["Adaptation", "Launch", "adapt_script", "find_launches"]
