"""Replaying the schedule: every step of every DP replica at once, many what-ifs at once.

One simulation is one choice, per op and DP rank, between the op's recorded duration and its
type's typical one; K of them run together as one array (ops x K x steps x DP ranks), walking
the dependency model level by level, so the Python loop runs once per level whatever the number
of steps, replicas and what-ifs. Steps are independent: they go through in slices sized to a
fixed memory budget, so memory stays flat however long the table.
"""

from typing import List, Tuple

import numpy as np

from .model import DepModel

BUDGET_BYTES = 32 << 20  # the simulation's working array, per slice of steps


def _prepared(model: DepModel) -> List[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per level: its ops, their ready_on padded to one width (repeating the first: max is
    unchanged) and which of them wait for the slowest DP replica."""
    out = []
    for ops in model.levels:
        width = max(len(model.ready_on[i]) for i in ops)
        padded = np.array([model.ready_on[i] + [model.ready_on[i][0]] *
                           (width - len(model.ready_on[i])) for i in ops])
        out.append((ops, padded, np.flatnonzero(model.dp_synced[ops])))
    return out


def simulate(model: DepModel, recorded: np.ndarray, ideal: np.ndarray,
             keep: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Step times of K what-ifs, each relative to its step's start.

    ``recorded``: (ops, steps, dp) the durations as recorded (a collective's: its transfer,
    from its group's last arrival to its end); ``ideal``: (ops,) typical durations; ``keep``:
    (K, ops, dp) True where what-if k keeps the recorded duration. Returns ``(last_end,
    optimizer_end)``, each (K, steps): the end of the step's last op, and of its optimizer."""
    n_ops, n_steps, n_dp = recorded.shape
    n_sims = keep.shape[0]
    levels = _prepared(model)
    keep_t = np.ascontiguousarray(keep.transpose(1, 0, 2))[:, :, None, :]  # ops, K, 1, dp
    # float32 as the artifact's tables: half the memory traffic, ~0.1 us at a 1 s step
    ideal_b = ideal.astype(np.float32)[:, None, None, None]
    optimizer = np.array([i for i, key in enumerate(model.keys) if key[0] == "optimizer"])
    modeled = np.flatnonzero(model.modeled)
    everything = modeled.size == n_ops  # then a view, not a copy of the whole array
    per_step = (n_ops + 1) * n_sims * n_dp * 4
    chunk = max(1, min(n_steps, BUDGET_BYTES // max(per_step, 1)))
    last_end = np.empty((n_sims, n_steps))
    opt_end = np.empty((n_sims, n_steps))
    ends = np.empty((n_ops + 1, n_sims, chunk, n_dp), dtype=np.float32)
    for lo in range(0, n_steps, chunk):
        hi = min(n_steps, lo + chunk)
        width = hi - lo
        end = ends[:, :, :width] if width < chunk else ends
        end[model.start] = 0.0
        rec = recorded[:, lo:hi, None, :].astype(np.float32).transpose(0, 2, 1, 3)  # ops,1,w,dp
        for ops, padded, synced in levels:
            if padded.shape[1] == 1:
                ready = end[padded[:, 0]]
            else:
                ready = end[padded].max(axis=1)
            if synced.size:
                ready[synced] = ready[synced].max(axis=-1, keepdims=True)
            ready += np.where(keep_t[ops], rec[ops], ideal_b[ops])
            end[ops] = ready
        last_end[:, lo:hi] = (end[:n_ops] if everything else end[modeled]).max(axis=(0, 3))
        opt_end[:, lo:hi] = (end[optimizer].max(axis=(0, 3)) if optimizer.size
                             else last_end[:, lo:hi])
    return last_end, opt_end
