"""ProfilerConfig -> torch_npu keyword arguments, fitted to the installed torch_npu.

torch_npu 2.6 ... 2.14 differ in which ``_ExperimentalConfig`` keywords exist (``mstx`` from 2.7,
``numa`` host metrics from 2.11, ...) and an unknown keyword raises TypeError. We read the
installed signature (feature detection, not version comparison) and drop what it lacks, naming
each dropped flag. Behaviour that no signature shows is the one place a version is compared.
"""

import inspect
import re

from ..config.profiler_config import NPU_KEYWORDS, flag_name

LEVEL_ATTR = {"level_none": "Level_none", "level0": "Level0", "level1": "Level1",
              "level2": "Level2"}
EXPORT_ATTR = {"text": "Text", "db": "Db"}


def accepted_keywords(func):
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return None  # cannot tell: pass everything
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return set(params)


def experimental_kwargs(config, tp):
    """Keyword arguments for ``tp._ExperimentalConfig`` and the flags torch_npu cannot take."""
    wanted = {
        "profiler_level": getattr(tp.ProfilerLevel, LEVEL_ATTR[config.profile_level]),
        # Always explicit: torch_npu <= 2.9 warns on every construction when it is left out.
        "export_type": [getattr(tp.ExportType, EXPORT_ATTR[t])
                        for t in config.profile_export_type.split(",")],
        "data_simplification": config.profile_data_simplification,
        "l2_cache": config.profile_l2_cache,
        "op_attr": config.profile_op_attr,
        "mstx": config.profile_mstx,
        "sys_io": config.profile_sys_io,
        "sys_interconnection": config.profile_sys_interconnection,
    }
    flag_of = {keyword: flag_name(knob) for knob, keyword in NPU_KEYWORDS.items()}
    dropped = []
    if config.profile_aic_metrics is not None:
        wanted["aic_metrics"] = getattr(tp.AiCMetrics, config.profile_aic_metrics)
    if config.profile_gc_detect_threshold is not None:
        wanted["gc_detect_threshold"] = float(config.profile_gc_detect_threshold)
    for knob in ("profile_mstx_domain_include", "profile_mstx_domain_exclude"):
        if getattr(config, knob):  # only when set: a wheel without it drops it, by name
            wanted[NPU_KEYWORDS[knob]] = list(getattr(config, knob))
    if config.profile_host_sys:
        host_values = []
        for name in config.profile_host_sys:
            value = getattr(tp.HostSystem, name.upper(), None)
            if value is None:
                dropped.append(f"--profile-host-sys {name}")
            else:
                host_values.append(value)
        if host_values:
            wanted["host_sys"] = host_values
    accepted = accepted_keywords(tp._ExperimentalConfig)
    if accepted is not None:
        for key in list(wanted):
            if key not in accepted:
                value = wanted.pop(key)
                if value not in (False, None, []) and key in flag_of:
                    dropped.append(flag_of[key])
    return wanted, dropped


def step_ids_note(config):
    """What a capture without host activity lacks, said where the user decides (start-up,
    show-config), or None. torch_npu derives step ranges from the recorded torch ops."""
    if config.profile_with_cpu:
        return None
    return ("without --profile-with-cpu torch_npu records no ProfilerStep markers, so "
            "kernel_details.csv and step_trace_time.csv carry no step ids and check cannot "
            "verify which steps were recorded; add --profile-with-cpu to get them")


def profile_kwargs(config, tp, experimental_config, schedule, on_trace_ready):
    activities = [tp.ProfilerActivity.NPU]
    if config.profile_with_cpu:
        activities.insert(0, tp.ProfilerActivity.CPU)
    kwargs = {
        "activities": activities,
        "schedule": schedule,
        "on_trace_ready": on_trace_ready,
        "record_shapes": config.profile_record_shapes,
        "profile_memory": config.profile_with_memory,
        "with_stack": config.profile_with_stack,
        "with_flops": config.profile_with_flops,
        "with_modules": config.profile_with_modules,
        "experimental_config": experimental_config,
    }
    accepted = accepted_keywords(tp.profile)
    if accepted is not None:
        kwargs = {k: v for k, v in kwargs.items() if k in accepted}
    return kwargs


def version_tuple(version):
    match = re.match(r"(\d+)\.(\d+)", str(version or ""))
    return (int(match.group(1)), int(match.group(2))) if match else None


def behaviour_notes(config, torch_npu_version):
    """What this torch_npu will silently change about the request (not visible in signatures)."""
    notes = []
    version = version_tuple(torch_npu_version)
    if (version is not None and version < (2, 10) and config.profile_level in ("level1", "level2")
            and config.profile_aic_metrics == "AiCoreNone"):
        notes.append(f"torch_npu {torch_npu_version} upgrades --profile-aic-metrics AiCoreNone to "
                     f"PipeUtilization at --profile-level {config.profile_level}; AI core metrics "
                     f"will be collected anyway.")
    return notes


# torch_npu refuses other characters in output paths, and its trace handler then silently falls
# back to "export only" mode (nothing parsed, data elsewhere). Checked before the run starts.
_PATH_OK = re.compile(r"^[A-Za-z0-9._\-/~ \u4e00-\u9fff]+$")


def unsupported_path_reason(path):
    if len(path) > 4096:
        return "is longer than 4096 characters"
    if any(len(part) > 255 for part in path.split("/")):
        return "has a component longer than 255 characters"
    if not _PATH_OK.match(path):
        bad = sorted({c for c in path if not _PATH_OK.match(c)})
        return f"contains {''.join(bad)!r}, which torch_npu refuses (letters, digits, . _ - ~ / and spaces only)"
    return None
