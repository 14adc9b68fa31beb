"""The launch-script editor behind ``mindspeed-prof adapt-script``.

``words`` reads one shell word (quotes, expansions, substitutions), ``scan`` finds the simple
commands of a script with their offsets (and heredoc bodies), ``program`` walks past the wrappers
in front of a command's program (``srun``, ``timeout`` ...), ``embedded`` finds the text a script
runs (``sh -c "$CMD"``, ``eval "${CMD} --x"``, ``sbatch <<EOF``) and the steps it takes,
``launches`` tells which commands start Python and which train or serve, ``carry`` writes
PROFILE_ARGS for those steps, ``passed`` finds the options a launch already passes, ``listing``
says why nothing could be adapted and how to do it by hand, and ``adapter`` edits the text. Pure
text in, text out.
"""

from .adapter import Adaptation, adapt_script
from .launches import Launch, find_launches

__all__ = ["Adaptation", "Launch", "adapt_script", "find_launches"]
