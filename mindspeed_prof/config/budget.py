"""``--profile-max-gb``: estimate a profile's size before it starts, and watch it while it runs.

The estimate is deliberately simple and printed with its parts, so a user can see why a request
was refused: megabytes per profiled iteration per rank for the level, times multipliers for the
options that grow traces. The constants are rough figures from public reports of real Ascend and
GPU captures (see docs/windows.md); the live check during a window is what actually bounds the disk use.
"""

import os
import shutil

from ..errors import ConfigError

MB = 1_000_000
GB = 1_000_000_000

# MB written per profiled iteration per rank, by level (npu) or for torch.profiler.
BASE_MB = {"level_none": 5, "level0": 40, "level1": 120, "level2": 200, "torch": 10}
MULTIPLIERS = (
    ("profile_with_stack", 2.0, "--profile-with-stack"),
    ("profile_record_shapes", 1.3, "--profile-record-shapes"),
    ("profile_with_memory", 1.5, "--profile-with-memory"),
    ("profile_with_modules", 1.2, "--profile-with-modules"),
)
NPU_ONLY_MULTIPLIERS = (("profile_with_cpu", 1.5, "--profile-with-cpu"),)
# torch_npu keeps raw data and writes the parsed views beside it.
PARSED_FACTOR = 2.0


def _npu_size(config):
    """torch_npu: a base by level, its host activity, a db export beside the text, and the
    parsed views beside the raw data."""
    key = config.profile_level
    size, parts = BASE_MB[key] * MB, [f"{BASE_MB[key]} MB/iteration ({key})"]
    factors = list(MULTIPLIERS + NPU_ONLY_MULTIPLIERS)
    if config.profile_export_type == "text,db":
        factors.append((None, 1.8, "text+db export"))
    if config.profile_analyse != "offline":
        factors.append((None, PARSED_FACTOR, "parsed output"))
    return size, parts, factors


def _torch_size(config):
    return BASE_MB["torch"] * MB, [f"{BASE_MB['torch']} MB/iteration (torch)"], list(MULTIPLIERS)


# One row per backend (the names of backends.KINDS): how big a profiled iteration is.
SIZES = {"npu": _npu_size, "torch": _torch_size}


def per_iteration_bytes(config, backend):
    """(bytes per profiled iteration on one rank, the factors that made it)."""
    size, parts, factors = SIZES[backend](config)
    for knob, factor, flag in factors:
        if knob is None or getattr(config, knob):
            size *= factor
            parts.append(f"x{factor} {flag}")
    return int(size), parts


def estimate(config, backend, *, iterations, ranks):
    """Bytes for ``iterations`` profiled iterations on each of ``ranks`` ranks, with its reasoning."""
    one, parts = per_iteration_bytes(config, backend)
    total = one * iterations * ranks
    text = (f"{total / GB:.2f} GB = {iterations} iteration(s) x {ranks} rank(s) x "
            f"{one / MB:.0f} MB ({', '.join(parts)})")
    return total, text


def free_bytes(path):
    probe = path
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return shutil.disk_usage(probe or ".").free


def used_bytes(paths):
    """Bytes under the given files and folders (what a rank's windows wrote so far)."""
    total = 0
    for path in paths:
        if os.path.isfile(path):
            total += _size(path)
            continue
        for folder, _, files in os.walk(path):
            total += sum(_size(os.path.join(folder, name)) for name in files)
    return total


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class RankBudget:
    """One rank's view of ``--profile-max-gb``: its equal share of the job's budget."""

    def __init__(self, config, backend, selected_ranks):
        self.config, self.backend = config, backend
        self.selected = max(1, len(selected_ranks))
        self.limit_gb = config.profile_max_gb

    @property
    def share(self):
        return self.limit_gb * GB / self.selected

    def check_start(self, plans, save_path, ranks_on_node):
        """ConfigError when the planned windows cannot fit the budget or the free space."""
        iterations = sum(p.active for p in plans if p.end is not None)
        if not iterations:
            return
        total, reasoning = estimate(self.config, self.backend, iterations=iterations,
                                    ranks=self.selected)
        if self.limit_gb is not None and total > self.limit_gb * GB:
            raise ConfigError(f"--profile-max-gb {self.limit_gb:g} is below the estimated output: "
                              f"{reasoning}; profile fewer iterations or ranks, lower the level, "
                              f"or raise --profile-max-gb.")
        on_node = estimate(self.config, self.backend, iterations=iterations,
                           ranks=ranks_on_node)[0]
        free = free_bytes(save_path)
        if on_node > free:
            raise ConfigError(f"--profile-save-path {save_path} has {free / GB:.1f} GB free but "
                              f"this node's profiled ranks need about {on_node / GB:.1f} GB "
                              f"({reasoning}); free space or choose another --profile-save-path.")

    def allows(self, schedule, used):
        """May a window of ``schedule`` start when this rank has already written ``used`` bytes?"""
        if self.limit_gb is None or schedule.end is None:
            return True
        need = estimate(self.config, self.backend, iterations=schedule.active, ranks=1)[0]
        return used + need <= self.share

    def units_left(self, used):
        """How many more units this rank may record after writing ``used`` bytes (None: no
        budget): the same estimate ``allows`` judges a window by."""
        if self.limit_gb is None:
            return None
        one = per_iteration_bytes(self.config, self.backend)[0]
        return max(0, int((self.share - used) // one)) if one > 0 else None

    def crossed(self, used, running=()):
        """Has this rank written more than its share (``running``: the open window's files)?"""
        if self.limit_gb is None:
            return False
        return used + (used_bytes(running) if running else 0) > self.share

    def skip_reason(self, unit, schedule):
        return (f"skipping {unit.plural} {schedule.start}-{schedule.end - 1} and later windows: "
                f"this rank's share of --profile-max-gb {self.limit_gb:g} would be exceeded")

    def stop_reason(self, unit, last_recorded):
        return (f"stopping the window early after {unit.name} {last_recorded}: this rank's share "
                f"of --profile-max-gb {self.limit_gb:g} was crossed")
