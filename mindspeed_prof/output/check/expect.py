"""Which files a parsed NPU capture must hold, given what it was asked to collect.

torch_npu writes each file only when it has data for it, so "missing" depends on the capture:
op_statistic.csv is normal to lack at level0, and memory files only come with profile_memory
(shared/reference/ascend_output_formats.md §4). The settings come from ``profiler_info*.json``
(what torch_npu actually used) and fall back on our manifest's ``config`` (what was asked).
"""

from dataclasses import dataclass, field
from typing import Optional

from ...config import names
from ...errors import ConfigError

LEVELS_WITH_KERNELS = ("level0", "level1", "level2")
LEVELS_WITH_STATISTICS = ("level1", "level2")
# torch_npu's BasicDbParser writes these into every db export, whatever was collected
DB_BASIC_TABLES = ("META_DATA", "RANK_DEVICE_MAP")
# what kernel_details.csv comes from (CANN's tasks; names interned in STRING_IDS)
DB_KERNEL_TABLES = ("STRING_IDS", "TASK", "COMPUTE_TASK_INFO")
DB_OPERATOR_TABLES = ("STRING_IDS", "PYTORCH_API")  # what operator_details.csv comes from


@dataclass(frozen=True)
class Expected:
    name: str
    why: str
    required: bool = True  # False: its absence is a warning, not a failed check
    alternatives: tuple = ()
    column: Optional[str] = None  # a column the file must have for this reason
    tables: tuple = ()  # (table, why) pairs: what a database must hold


@dataclass
class Settings:
    level: str = "level0"
    export_types: tuple = ("text",)
    cpu: bool = True
    npu: bool = True
    memory: bool = False
    shapes: bool = False
    notes: list = field(default_factory=list)

    def describe(self):
        return f"{self.level} {','.join(self.export_types)}"


def settings_for(info=None, config=None):
    """Merge profiler_info (wins) with the manifest's config (fills gaps), noting conflicts."""
    config = config if isinstance(config, dict) else {}
    asked = _asked(config)
    settings = Settings()
    used = {}
    if info is not None:
        # the 2023 schema has no _export_type (db export did not exist): the default applies
        used = {"level": info.level, "export_types": info.export_types or None,
                "cpu": info.cpu, "npu": info.npu, "memory": info.memory, "shapes": info.shapes}
    for key in ("level", "export_types", "cpu", "npu", "memory", "shapes"):
        value = used.get(key)
        if value is None:
            value = asked.get(key)
        if value is not None:
            setattr(settings, key, value)
        if used.get(key) is not None and asked.get(key) is not None \
                and used[key] != asked[key] and key in ("level", "export_types", "memory"):
            settings.notes.append(f"the manifest asked for {key.replace('_', ' ')} "
                                  f"{_show(asked[key])} but torch_npu recorded {_show(used[key])}")
    if info is not None and info.level is None:
        settings.notes.append("profiler_info has no known _profiler_level; expecting what "
                              f"{settings.level} writes")
    return settings


def _asked(config):
    asked = {}
    try:
        if config.get("profile_level") is not None:
            asked["level"] = names.level(config["profile_level"])
        if config.get("profile_export_type") is not None:
            asked["export_types"] = tuple(names.export_type(config["profile_export_type"])
                                          .split(","))
    except ConfigError:
        pass
    for key, knob in (("memory", "profile_with_memory"), ("shapes", "profile_record_shapes"),
                      ("cpu", "profile_with_cpu")):
        if isinstance(config.get(knob), bool):
            asked[key] = config[knob]
    return asked


def _show(value):
    return ",".join(value) if isinstance(value, tuple) else str(value)


# A light capture (level_none, DESIGN: mstx light mode) has no kernels, step times or op
# statistics; its timeline is the mstx ranges (ProfilerStep#N per unit, forwards, stages) and,
# with CPU activity, the host operators.
LIGHT_TRACE_WHY = ("level_none writes it from mstx ranges (--profile-mstx; units as "
                   "ProfilerStep#N, forwards, stages) or host operators (--profile-with-cpu); "
                   "without either it records nothing")


def light_capture_problem(settings, steps):
    """Why a parsed level_none capture does not show its units, or None."""
    if settings.level != "level_none" or steps:
        return None
    return ("a level_none capture shows its units only as ProfilerStep#N ranges, and "
            "trace_view.json has none: mstx was off (torch_npu < 2.7 has no mstx) or its "
            "'default' domain was left out (--profile-mstx-domain-include/-exclude)")


def deliverables(settings, rank=None):
    """The files (and columns) this capture should have in ASCEND_PROFILER_OUTPUT."""
    level = settings.level
    out = []
    if "text" in settings.export_types:
        out.append(Expected("trace_view.json", LIGHT_TRACE_WHY if level == "level_none"
                            else "text export always writes it"))
        if settings.npu and level in LEVELS_WITH_KERNELS:
            out.append(Expected("kernel_details.csv", f"NPU activity at {level} writes it"))
            out.append(Expected("step_trace_time.csv", "msprof-analyze cluster and "
                                "`mindspeed-prof summary` read it", required=False))
        if settings.npu and level in LEVELS_WITH_STATISTICS:
            out.append(Expected("op_statistic.csv", f"{level} writes it"))
            out.append(Expected("api_statistic.csv", f"{level} writes it", required=False))
        if settings.cpu:
            out.append(Expected("operator_details.csv", "CPU activity records torch operators"))
            if settings.shapes:
                out.append(Expected("operator_details.csv", "--profile-record-shapes "
                                    "(record_shapes) fills it", column="Input Shapes"))
        if settings.memory:
            why = "--profile-with-memory (profile_memory) writes it"
            out.append(Expected("memory_record.csv", why))
            out.append(Expected("operator_memory.csv", why))
    if "db" in settings.export_types:
        ranked = f"ascend_pytorch_profiler_{rank}.db" if rank is not None else None
        plain = "ascend_pytorch_profiler.db"
        tables = {t: "torch_npu writes it into every db export" for t in DB_BASIC_TABLES}
        if settings.npu and level in LEVELS_WITH_KERNELS:
            tables.update((t, f"NPU activity at {level}: the kernels") for t in DB_KERNEL_TABLES)
        if settings.cpu:
            tables.update((t, "CPU activity: the torch operators") for t in DB_OPERATOR_TABLES
                          if t not in tables)
        out.append(Expected(ranked or plain, "db export writes it",
                            alternatives=(plain,) if ranked else (), tables=tuple(tables.items())))
    return out
