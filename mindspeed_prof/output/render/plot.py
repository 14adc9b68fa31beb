"""``summary --plot FILE.png``: one stacked bar per rank of its mean step breakdown.

matplotlib is an optional extra (``pip install mindspeed_prof[plot]``), imported only here.
"""

from ...errors import ConfigError
from ..read.columns import STEP_PARTS

COLOURS = {"Computing": "#4c72b0", "Communication(Not Overlapped)": "#dd8452",
           "Free": "#bbbbbb", "step_time": "#55a868"}


def plot_breakdown(summary, path):
    if not str(path).lower().endswith(".png"):
        raise ConfigError(f"--plot {path}: give a .png file name, e.g. --plot steps.png")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("--plot needs matplotlib, which is not installed; run "
                          "`pip install matplotlib` (or mindspeed_prof[plot]).") from None
    ranks = [r for r in summary.ranks if r.step_time is not None]
    if not ranks:
        return None  # the caller says so; no data is not a usage error
    # a rank with captures of both backends has a row each: one bar each, never stacked on one
    mixed = len({r.backend for r in ranks}) > 1
    labels = [f"{r.rank} {r.backend}" if mixed else str(r.rank) for r in ranks]
    breakdowns = [r.breakdown() for r in ranks]
    figure, axes = plt.subplots(figsize=(max(4.0, 0.5 * len(ranks) + 2), 4))
    bottoms = [0.0] * len(ranks)
    for part in STEP_PARTS:
        heights = [b.get(part, 0.0) / 1000.0 if part in b else 0.0 for b in breakdowns]
        if any(heights):
            axes.bar(labels, heights, bottom=bottoms, label=part, color=COLOURS[part])
            bottoms = [a + b for a, b in zip(bottoms, heights)]
    # torch captures have a step time but no breakdown: draw it whole
    rest = [0.0 if any(p in b for p in STEP_PARTS) else b["step_time"] / 1000.0
            for b in breakdowns]
    if any(rest):
        axes.bar(labels, rest, bottom=bottoms, label="step (no breakdown)",
                 color=COLOURS["step_time"])
    axes.set_xlabel("rank")
    axes.set_ylabel("ms per step (mean)")
    axes.set_title("Step time breakdown per rank")
    axes.legend(fontsize="small")
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=120)
    except OSError as exc:
        raise ConfigError(f"--plot {path}: cannot write it ({exc.strerror}); pick a writable "
                          f"path.") from None
    finally:
        plt.close(figure)
    return path
