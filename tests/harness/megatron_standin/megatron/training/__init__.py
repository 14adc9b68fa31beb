"""CPU stand-in for Megatron-LM's ``megatron.training`` (not on PyPI), over real megatron-core.

There is deliberately no ``megatron/__init__.py``: ``megatron`` stays a namespace package, so
this folder on ``PYTHONPATH`` merges with the installed ``megatron/core``.
"""

from megatron.training import _harness

# Installed here rather than by the entry script, which stays as Megatron-LM ships it.
_harness.cpu_shim.install()

from .global_vars import get_args, get_signal_handler, get_tensorboard_writer  # noqa: E402
from .initialize import initialize_megatron  # noqa: E402

# As upstream: the package re-exports pretrain, so rebinding training.pretrain later is not
# seen by scripts that imported it from here.
from .training import get_model, pretrain  # noqa: E402
from .utils import is_last_rank, print_rank_0, print_rank_last  # noqa: E402
