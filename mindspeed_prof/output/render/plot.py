"""``summary --plot FILE.png``: one stacked bar per rank of its mean step breakdown; past
``MAX_BARS`` ranks one bar per band of consecutive ranks (the band's mean, a mark at its slowest
rank's step time), so the picture stays within ``MAX_WIDTH_IN`` inches at any job size.

matplotlib is an optional extra (``pip install mindspeed_prof[plot]``), imported only here.
"""

from ...errors import ConfigError
from ..read.columns import STEP_PARTS

MAX_BARS = 64
MAX_WIDTH_IN = 16.0  # 1,920 pixels at the 120 dpi written
DPI = 120
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
    banded = len(ranks) > MAX_BARS
    slowest = None
    if banded:
        labels, breakdowns, slowest = _bands(ranks, breakdowns)
    figure, axes = plt.subplots(figsize=(min(MAX_WIDTH_IN, max(4.0, 0.5 * len(labels) + 2)), 4))
    bottoms = [0.0] * len(labels)
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
    if slowest is not None:
        axes.plot(labels, slowest, linestyle="none", marker="_", markersize=8, color="black",
                  label="band's slowest rank")
        axes.tick_params(axis="x", labelrotation=90, labelsize="x-small")
    axes.set_xlabel("ranks (bands of consecutive rows)" if banded else "rank")
    axes.set_ylabel("ms per step (mean)")
    axes.set_title(f"Step time breakdown, {len(ranks)} ranks in {len(labels)} bands (band mean)"
                   if banded else "Step time breakdown per rank")
    axes.legend(fontsize="small")
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=DPI)
    except OSError as exc:
        raise ConfigError(f"--plot {path}: cannot write it ({exc.strerror}); pick a writable "
                          f"path.") from None
    finally:
        plt.close(figure)
    return path


def _bands(ranks, breakdowns):
    """At most MAX_BARS bands of consecutive rows: each band's label (``0-15``), its mean
    breakdown, and its slowest row's step time in ms (a slow rank stays visible)."""
    size = -(-len(ranks) // MAX_BARS)
    labels, means, slowest = [], [], []
    for start in range(0, len(ranks), size):
        band, parts = ranks[start:start + size], breakdowns[start:start + size]
        labels.append(f"{band[0].rank}-{band[-1].rank}" if len(band) > 1 else str(band[0].rank))
        keys = {key for part in parts for key in part}
        means.append({key: sum(p[key] for p in parts if key in p) /
                      sum(1 for p in parts if key in p) for key in keys})
        slowest.append(max(p["step_time"] for p in parts) / 1000.0)
    return labels, means, slowest
