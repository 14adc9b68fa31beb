"""The what-if analysis: the slowdown S, its attribution, M_W and M_S (the paper's Eq. 1-5).

- Recorded durations: a computation's own; a collective's transfer, from its group's last
  arrival to its end (the wait for a late peer is not the op's own time).
- Typical durations: per op type over every step, rank and stage, the mean for computations and
  the median for communication.
- S = mean step time simulated as recorded (launch delays removed) / mean step time simulated
  with every op typical.
- S of a group (one op type, DP rank or PP stage) = the same ratio with only that group kept as
  recorded and the rest typical; "fixing" the group is the converse (only it made typical), the
  step time the job would have if that group ran like the others.
- M_W: the share of the slowdown removed by fixing the worst 3 % of ranks (a rank's score is
  the smaller of its DP rank's and its stage's S), as the published artifact computes it;
  M_S: the share removed by fixing the last stage (stage partitioning imbalance).
"""

import dataclasses
import math
from typing import Dict, List, Optional, Tuple, Union

import numpy as np

from . import schema as S
from .grid import Batches, Grid, build as build_grid
from .model import DepModel, build as build_model
from .simulate import simulate
from .table import OpTable

# A transfer that seems to end more than this before its last peer arrived is a clock error.
_NEGATIVE_TRANSFER = 1e-2  # seconds
_WORST_RANKS_PERCENT = 3


@dataclasses.dataclass
class GroupEffect:
    name: str                 # "backward-compute", "3" (a DP rank or stage)
    slowdown: float           # S with only this group as recorded
    fixed_step_s: float       # mean step time with only this group made typical
    saving: float             # 1 - fixed / simulated as recorded


@dataclasses.dataclass
class Imbalance:
    value: Optional[float]    # share of the slowdown removed ("rem")
    added: Optional[float]    # share recreated by adding only the selected ops back ("add")
    selected: List[str]


@dataclasses.dataclass
class WhatIf:
    meta: S.JobMeta
    steps: List[int]
    recorded_s: List[float]   # per step: the step as recorded (first op start to last op end)
    simulated_s: List[float]  # per step: simulated as recorded, no launch delays
    ideal_s: List[float]      # per step: every op at its type's typical duration
    slowdown: float
    launch_slowdown: float
    by_optype: List[GroupEffect]
    by_dp_rank: List[GroupEffect]
    by_stage: List[GroupEffect]
    m_w: Imbalance
    m_s: Imbalance
    rows: int
    notes: List[str]


def _transfers(grid: Grid, model: DepModel) -> np.ndarray:
    """Per op, step and DP rank the duration the simulation replays (see the module doc)."""
    duration = grid.duration
    out = np.zeros((len(model.keys), *duration.shape[1:]), dtype=np.float32)
    out[:model.n_real] = duration
    end = grid.start + duration
    groups: Dict[Tuple[int, ...], None] = {}
    for i in np.flatnonzero(model.collective[:model.n_real]):
        groups.setdefault(tuple(_group_of(model, int(i))), None)
    for members in groups:
        real = [m for m in members if m < model.n_real]
        if not real:
            continue
        last_arrival = grid.start[real].max(axis=0)
        if model.dp_synced[real[0]]:
            last_arrival = last_arrival.max(axis=-1, keepdims=True)
        transfer = end[real] - last_arrival
        transfer[transfer <= -_NEGATIVE_TRANSFER] = 0.0
        out[real] = transfer
    return out


def _group_of(model: DepModel, op: int) -> List[int]:
    return model.groups[model.group_of[op]]


def _typical(grid: Grid, model: DepModel, recorded: np.ndarray) -> np.ndarray:
    ideal = np.zeros(len(model.keys))
    names = np.array(grid.optype)
    for optype in np.unique(names):
        ops = np.flatnonzero(names == optype)
        values = recorded[ops].reshape(-1)
        ideal[ops] = np.median(values) if optype in S.COMMUNICATION else values.mean(
            dtype=np.float64)
    return ideal


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def analyse(table: Union[OpTable, Batches], meta: S.JobMeta, source: str) -> WhatIf:
    """The what-if analysis of ``table`` (in memory, or in pieces read twice)."""
    grid = build_grid(table, source)
    model = build_model(grid, meta.dsp_size)
    recorded = _transfers(grid, model)
    ideal = _typical(grid, model, recorded)
    n_ops, n_dp = len(model.keys), grid.dp_size
    stage_of = np.array([key[2] for key in model.keys])
    attribution = np.array([S.ATTRIBUTION_TYPE.get(key[0], key[0]) for key in model.keys])

    masks: List[np.ndarray] = [np.ones((n_ops, n_dp), bool), np.zeros((n_ops, n_dp), bool)]
    groups: List[Tuple[str, str]] = []
    for name in dict.fromkeys(attribution[:model.n_real].tolist()):
        groups.append(("optype", name))
        masks.append(np.repeat((attribution == name)[:, None], n_dp, axis=1))
    for dp in range(n_dp):
        groups.append(("dp_rank", str(dp)))
        masks.append(np.repeat((np.arange(n_dp) == dp)[None, :], n_ops, axis=0))
    for stage in range(grid.pp_size):
        groups.append(("stage", str(stage)))
        masks.append(np.repeat((stage_of == stage)[:, None], n_dp, axis=1))
    adds = np.stack(masks)
    keep = np.concatenate([adds, ~adds[2:]])  # the groups added back, then each group fixed
    last_end, opt_end = simulate(model, recorded, ideal, keep)

    n_groups = len(groups)
    t_sim = float(last_end[0].mean())
    t_ideal = float(opt_end[1].mean())
    t_ideal_all = float(last_end[1].mean())
    effects: Dict[str, List[GroupEffect]] = {"optype": [], "dp_rank": [], "stage": []}
    slowdown_of: Dict[Tuple[str, str], float] = {}
    for k, (dim, name) in enumerate(groups):
        added = float(opt_end[2 + k].mean())
        fixed = float(last_end[2 + n_groups + k].mean())
        slowdown_of[(dim, name)] = _ratio(added, t_ideal)
        effects[dim].append(GroupEffect(name=name, slowdown=_ratio(added, t_ideal),
                                        fixed_step_s=fixed, saving=1 - _ratio(fixed, t_sim)))
    for dim in effects:
        effects[dim].sort(key=lambda e: -e.slowdown if math.isfinite(e.slowdown) else 0.0)

    def share(t_rem: float) -> Optional[float]:
        gap = t_sim - t_ideal_all
        return (t_sim - t_rem) / gap if gap > 0 else None

    last = str(grid.pp_size - 1)
    k_last = groups.index(("stage", last))
    m_s = Imbalance(value=share(float(last_end[2 + n_groups + k_last].mean())),
                    added=_add_share(float(last_end[2 + k_last].mean()), t_sim, t_ideal_all),
                    selected=[f"stage {last}"])
    worst = _worst_ranks(grid, slowdown_of)
    worst_mask = np.zeros((n_ops, n_dp), bool)
    for dp, stage in worst:
        worst_mask[stage_of == stage, dp] = True
    w_end, _ = simulate(model, recorded, ideal, np.stack([~worst_mask, worst_mask]))
    m_w = Imbalance(value=share(float(w_end[0].mean())),
                    added=_add_share(float(w_end[1].mean()), t_sim, t_ideal_all),
                    selected=[f"rank {grid.ranks.get((dp, stage), -1)} (DP rank {dp}, stage "
                              f"{stage})" for dp, stage in worst])

    step_span = ((grid.start + grid.duration).max(axis=(0, 2))
                 - grid.start.min(axis=(0, 2))).astype(np.float64)
    notes = list(grid.notes)
    virtual = [key for key in model.keys[model.n_real:]]
    if virtual:
        kinds = sorted({key[0] for key in virtual})
        notes.append(f"not recorded, taken as instantaneous: {', '.join(kinds)}.")
    return WhatIf(meta=meta, steps=[int(s) for s in grid.steps],
                  recorded_s=step_span.tolist(), simulated_s=last_end[0].tolist(),
                  ideal_s=opt_end[1].tolist(), slowdown=_ratio(t_sim, t_ideal),
                  launch_slowdown=_ratio(float(step_span.mean()), t_sim),
                  by_optype=effects["optype"], by_dp_rank=effects["dp_rank"],
                  by_stage=effects["stage"], m_w=m_w, m_s=m_s, rows=grid.rows, notes=notes)


def _add_share(t_add: float, t_sim: float, t_ideal: float) -> Optional[float]:
    gap = t_sim - t_ideal
    return (t_add - t_ideal) / gap if gap > 0 else None


def _worst_ranks(grid: Grid, slowdown_of: Dict[Tuple[str, str], float]) -> List[Tuple[int, int]]:
    scored = []
    for (dp, stage), rank in grid.ranks.items():
        score = min(slowdown_of.get(("dp_rank", str(dp)), math.nan),
                    slowdown_of.get(("stage", str(stage)), math.nan))
        scored.append((score if math.isfinite(score) else -math.inf, -rank, dp, stage))
    scored.sort(reverse=True)
    count = -(-len(scored) * _WORST_RANKS_PERCENT // 100)
    return [(dp, stage) for _, _, dp, stage in scored[:count]]
