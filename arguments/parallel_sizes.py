"""Megatron's parallel-size flags, for ``show-config`` to resolve rank selectors offline.

Inside a job the selectors (``tp=0,pp=*``, ``pp-stage-leaders``, ...) resolve against every
rank's coordinates gathered from Megatron's parallel state. ``show-config`` runs no job: it takes
the same sizes the training command line carries (``--tensor-model-parallel-size`` and the
pipeline, context and expert sizes) and places the ranks as Megatron does by default (order
``tp-cp-ep-dp-pp``: tensor-parallel ranks adjacent, pipeline stages outermost; its
``--use-tp-pp-dp-mapping`` order is not modelled). ``--nproc-per-node`` numbers the nodes.
"""

from typing import Dict, Optional

from mindspeed_prof.errors import ConfigError

# Every rank's coordinates are built (a dict each): beyond this many ranks that would take
# gigabytes for a job no one runs.
MAX_LAID_OUT = 131_072

# flag -> the coordinate it sizes
SIZE_FLAGS = {
    "--tensor-model-parallel-size": "tp",
    "--pipeline-model-parallel-size": "pp",
    "--context-parallel-size": "cp",
    "--expert-model-parallel-size": "ep",
}


def add_parallel_size_flags(parser) -> None:
    """The host's parallel sizes and ranks per node, as the training command line gives them."""
    group = parser.add_argument_group(
        "parallel layout", "as on the training command line, so that rank selectors (tp=0,pp=*, "
        "pp-stage-leaders, node=0) resolve here as inside the job (Megatron's default rank "
        "order, tp-cp-ep-dp-pp)")
    for flag, key in SIZE_FLAGS.items():
        group.add_argument(flag, type=int, default=None, metavar="N",
                           help=f"Megatron's {flag} ({key}; default 1).")
    group.add_argument("--nproc-per-node", type=int, default=None, metavar="N",
                       help="torchrun's --nproc-per-node: ranks per node, for node= selectors "
                            "(default: every rank on node 0).")


def given(args) -> bool:
    """Whether any parallel-size flag (or --nproc-per-node) was given."""
    return any(getattr(args, _dest(flag)) is not None for flag in SIZE_FLAGS) or \
        args.nproc_per_node is not None


def layout_of(args, world_size: int) -> Optional[Dict[int, Dict[str, int]]]:
    """Every rank's {tp, pp, dp, cp, ep, node} from the sizes given, or None if none was.

    A size that does not fit the world size is a ConfigError naming the flags and the fix."""
    if not given(args):
        return None
    sizes = {}
    for flag, key in SIZE_FLAGS.items():
        value = getattr(args, _dest(flag))
        if value is not None and value < 1:
            raise ConfigError(f"{flag} {value} must be >= 1.")
        sizes[key] = value or 1
    per_node = args.nproc_per_node
    if per_node is not None and per_node < 1:
        raise ConfigError(f"--nproc-per-node {per_node} must be >= 1.")
    if world_size > MAX_LAID_OUT:
        raise ConfigError(f"--world-size {world_size}: the parallel-size flags lay out at most "
                          f"{MAX_LAID_OUT:,} ranks here; give a smaller --world-size, or global "
                          f"rank numbers instead of selectors.")
    tp, pp, cp, ep = sizes["tp"], sizes["pp"], sizes["cp"], sizes["ep"]
    if world_size % (tp * pp * cp):
        raise ConfigError(f"--world-size {world_size} is not a multiple of tensor x pipeline x "
                          f"context parallel sizes ({tp} x {pp} x {cp} = {tp * pp * cp}); "
                          f"give the sizes of the training command line.")
    dp = world_size // (tp * pp * cp)
    if (dp * cp) % ep:
        raise ConfigError(f"--expert-model-parallel-size {ep} does not divide the data x "
                          f"context parallel ranks ({dp} x {cp}) of --world-size {world_size}; "
                          f"give the sizes of the training command line.")
    layout = {}
    for rank in range(world_size):
        inner = rank // tp  # the rank's index past its tensor-parallel group
        layout[rank] = {"tp": rank % tp, "cp": inner % cp, "dp": (inner // cp) % dp,
                        "pp": rank // (tp * cp * dp),
                        # experts: tp-ep-dp-pp over the same ranks (expert tp = tp)
                        "ep": inner % ep,
                        "node": rank // per_node if per_node else 0}
    return layout


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")
