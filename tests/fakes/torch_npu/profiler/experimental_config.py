"""_ExperimentalConfig and the string-constant "enums", with each wheel's signature and checks.

The constructor is deliberately NOT wrapped in no_exception_func, like the real one:
an unknown keyword (mstx= on 2.6.0) raises TypeError. Invalid values are reset with
the same console warnings, in the same order, as the wheel being impersonated.
"""

import warnings
from typing import Optional, Union

from torch_npu import _version
from . import _constants as C
from ._console import print_info_msg, print_warn_msg

__all__ = [
    "_ExperimentalConfig",
    "supported_profiler_level",
    "supported_ai_core_metrics",
    "supported_export_type",
    "ProfilerLevel",
    "AiCMetrics",
    "ExportType",
    "HostSystem",
]


class ProfilerLevel:
    Level0 = C.LEVEL0
    Level1 = C.LEVEL1
    Level2 = C.LEVEL2
    Level_none = C.LEVEL_NONE


class AiCMetrics:
    PipeUtilization = C.AIC_PIPE_UTILIZATION
    ArithmeticUtilization = C.AIC_ARITHMETIC_UTILIZATION
    Memory = C.AIC_MEMORY
    MemoryL0 = C.AIC_MEMORY_L0
    MemoryUB = C.AIC_MEMORY_UB
    ResourceConflictRatio = C.AIC_RESOURCE_CONFLICT_RATIO
    L2Cache = C.AIC_L2_CACHE
    MemoryAccess = C.AIC_MEMORY_ACCESS
    AiCoreNone = C.AIC_NONE


class ExportType:
    Db = C.DB
    Text = C.TEXT


class HostSystem:
    CPU = C.HOST_CPU
    MEM = C.HOST_MEM
    DISK = C.HOST_DISK
    NETWORK = C.HOST_NETWORK
    OSRT = C.HOST_OSRT
    if _version.HAS_HOST_SYS_NUMA:
        NUMA = C.HOST_NUMA


_LEVELS = (C.LEVEL0, C.LEVEL1, C.LEVEL2, C.LEVEL_NONE)
_AIC_METRICS = (
    C.AIC_L2_CACHE, C.AIC_MEMORY_L0, C.AIC_MEMORY, C.AIC_MEMORY_UB, C.AIC_PIPE_UTILIZATION,
    C.AIC_ARITHMETIC_UTILIZATION, C.AIC_RESOURCE_CONFLICT_RATIO, C.AIC_MEMORY_ACCESS, C.AIC_NONE,
)
_HOST_SYS = (C.HOST_CPU, C.HOST_MEM, C.HOST_DISK, C.HOST_NETWORK, C.HOST_OSRT) + (
    (C.HOST_NUMA,) if _version.HAS_HOST_SYS_NUMA else ()
)
_AIC_DEFAULT = C.AIC_PIPE_UTILIZATION if _version.AIC_DEFAULT_IS_PIPE_UTILIZATION else C.AIC_NONE
_EXPORT_TYPE_DEFAULT = C.TEXT if _version.EXPORT_TYPE_DEFAULT_IS_TEXT else None


def supported_profiler_level():
    return set(_LEVELS)


def supported_ai_core_metrics():
    return set(_AIC_METRICS)


def supported_export_type():
    return {C.DB, C.TEXT}


def tx_enabled(config) -> bool:
    return bool(config._msprof_tx or getattr(config, "_mstx", False))


class _ExperimentalConfig:
    if _version.HAS_MSTX:
        def __init__(
            self,
            profiler_level: int = C.LEVEL0,
            aic_metrics: int = _AIC_DEFAULT,
            l2_cache: bool = False,
            msprof_tx: bool = False,
            mstx: bool = False,
            data_simplification: bool = True,
            record_op_args: bool = False,
            op_attr: bool = False,
            gc_detect_threshold: Optional[float] = None,
            export_type: Union[str, list] = _EXPORT_TYPE_DEFAULT,
            host_sys: Optional[list] = None,
            mstx_domain_include: Optional[list] = None,
            mstx_domain_exclude: Optional[list] = None,
            sys_io: bool = False,
            sys_interconnection: bool = False,
        ):
            self._setup(dict(locals()))
    else:
        def __init__(
            self,
            profiler_level: int = C.LEVEL0,
            aic_metrics: int = _AIC_DEFAULT,
            l2_cache: bool = False,
            msprof_tx: bool = False,
            data_simplification: bool = True,
            record_op_args: bool = False,
            op_attr: bool = False,
            gc_detect_threshold: float = None,
            export_type: Union[str, list] = _EXPORT_TYPE_DEFAULT,
            host_sys: list = None,
            mstx_domain_include: list = None,
            mstx_domain_exclude: list = None,
            sys_io: bool = False,
            sys_interconnection: bool = False,
        ):
            self._setup(dict(locals()))

    def _setup(self, given: dict) -> None:
        # Attribute creation order is observable: __dict__ is dumped to profiler_info.json.
        level, aic = given["profiler_level"], given["aic_metrics"]
        if (_version.UPGRADES_AICORE_NONE_ABOVE_LEVEL0 and level not in (C.LEVEL_NONE, C.LEVEL0)
                and aic == C.AIC_NONE):
            aic = C.AIC_PIPE_UTILIZATION
        self._profiler_level = level
        self._aic_metrics = aic
        self._l2_cache = given["l2_cache"]
        self._msprof_tx = given["msprof_tx"]
        if _version.HAS_MSTX:
            self._mstx = given["mstx"]
        self._data_simplification = given["data_simplification"]
        self.record_op_args = given["record_op_args"]
        self._export_type = self._export_type_as_list(given["export_type"])
        self._host_sys = given["host_sys"] if given["host_sys"] else []
        self._op_attr = given["op_attr"]
        self._gc_detect_threshold = given["gc_detect_threshold"]
        self._mstx_domain_include = given["mstx_domain_include"] or []
        self._mstx_domain_exclude = given["mstx_domain_exclude"] or []
        self._sys_io = given["sys_io"]
        self._sys_interconnection = given["sys_interconnection"]
        self._check_params()
        self._check_mstx_domains()
        self._check_host_sys()

    @property
    def export_type(self):
        return self._export_type

    @property
    def with_gc(self):
        return self._gc_detect_threshold is not None

    @property
    def gc_detect_threshold(self):
        return self._gc_detect_threshold

    @staticmethod
    def _export_type_as_list(export_type) -> list:
        if not export_type:
            print_warn_msg(f"Invalid parameter export_type: {export_type}, reset it to text.")
            return [C.TEXT]
        if isinstance(export_type, str):
            return [export_type]
        if isinstance(export_type, list):
            try:
                return list(set(export_type))
            except Exception as error:
                print_warn_msg(
                    f"Invalid parameter export_type: {export_type}, reset it to text. Error is {error}")
                return [C.TEXT]
        print_warn_msg(f"Invalid parameter export_type: {export_type}, reset it to text.")
        return [C.TEXT]

    def _reset_unless_bool(self, attr: str, name: str, default=False, reset_word="False") -> None:
        if not isinstance(getattr(self, attr), bool):
            print_warn_msg(
                f"Invalid parameter {name}, which must be of {_version.BOOL_WORD} type, "
                f"reset it to {reset_word}.")
            setattr(self, attr, default)

    def _check_params(self) -> None:
        if self._profiler_level in (C.LEVEL0, C.LEVEL_NONE) and self._aic_metrics != C.AIC_NONE:
            print_warn_msg(
                "Please use level1 or level2 if you want to collect aic metrics, reset aic metrics to None!")
            self._aic_metrics = C.AIC_NONE
        self._reset_unless_bool("_l2_cache", "l2_cache")
        self._reset_unless_bool("_msprof_tx", "msprof_tx")
        if _version.HAS_MSTX:
            self._check_mstx_flags()
        if self._data_simplification is not None:
            self._reset_unless_bool("_data_simplification", "data_simplification", True, "default")
        self._reset_unless_bool("record_op_args", "record_op_args")
        if self._profiler_level not in _LEVELS:
            print_warn_msg("Invalid parameter profiler_level, reset it to ProfilerLevel.Level0.")
            self._profiler_level = C.LEVEL0
        if self._aic_metrics not in _AIC_METRICS:
            print_warn_msg("Invalid parameter aic_metrics, reset it to default.")
            self._aic_metrics = C.AIC_NONE if self._profiler_level == C.LEVEL0 else C.AIC_PIPE_UTILIZATION
        self._reset_unless_bool("_op_attr", "op_attr")
        if not all(item in (C.TEXT, C.DB) for item in self._export_type):
            print_warn_msg("Invalid parameter export_type, reset it to text.")
            self._export_type = [C.TEXT]
        if self._op_attr and C.DB not in self._export_type:
            print_warn_msg("op_attr switch is invalid with export type set as text.")
            self._op_attr = False
        self._check_gc_threshold()
        self._reset_unless_bool("_sys_io", "sys_io")
        self._reset_unless_bool("_sys_interconnection", "sys_interconnection")

    def _check_mstx_flags(self) -> None:
        if self._msprof_tx:
            warnings.warn(
                "The parameter msprof_tx will be deprecated. Please use the new parameter mstx instead.")
        self._reset_unless_bool("_mstx", "mstx")
        if self._profiler_level == C.LEVEL_NONE and not self._mstx and not self._msprof_tx:
            self._mstx = True
            print_warn_msg("Parameter mstx or msprof_tx must be True if profiler_level is set to Level_none.")

    def _check_gc_threshold(self) -> None:
        threshold = self._gc_detect_threshold
        if threshold is None:
            return
        if not isinstance(threshold, (int, float)):
            print_warn_msg("Parameter gc_detect_threshold is not int or float type, reset it to default.")
            self._gc_detect_threshold = None
        elif threshold < 0.0:
            print_warn_msg("Parameter gc_detect_threshold can not be negative, reset it to default.")
            self._gc_detect_threshold = None
        elif threshold == 0.0:
            print_info_msg("Parameter gc_detect_threshold is set to 0, it will collect all gc events.")

    def _check_mstx_domains(self) -> None:
        if not tx_enabled(self):
            if self._mstx_domain_include or self._mstx_domain_exclude:
                if _version.HAS_MSTX:
                    print_warn_msg(
                        "mstx_domain_include and mstx_domain_exclude are valid when msprof_tx or mstx is True.")
                else:
                    print_warn_msg(
                        "mstx_domain_include and mstx_domain_exclude are only valid when msprof_tx is True.")
            self._mstx_domain_include = []
            self._mstx_domain_exclude = []
            return
        self._mstx_domain_include = self._checked_domains(self._mstx_domain_include, "mstx_domain_include")
        self._mstx_domain_exclude = self._checked_domains(self._mstx_domain_exclude, "_mstx_domain_exclude")
        if self._mstx_domain_include and self._mstx_domain_exclude:
            print_warn_msg(
                "Parameter mstx_domain_include and mstx_domain_exclude can not be both set, "
                "only mstx_domain_include will work.")
            self._mstx_domain_exclude = []

    @staticmethod
    def _checked_domains(domains, content_name: str):
        # content_name keeps the real wheel's leading underscore in the exclude message.
        if not domains:
            return domains
        if not isinstance(domains, list):
            print_warn_msg(
                f"Invalid parameter {content_name.lstrip('_')}, which must be of list type, reset it to default.")
            domains = []
        if any(not isinstance(domain, str) for domain in domains):
            print_warn_msg(
                f"Invalid parameter {content_name}, which contents must be of str type, reset it to default.")
            return []
        return list(set(domains))

    def _check_host_sys(self) -> None:
        if not isinstance(self._host_sys, list):
            print_warn_msg("Invalid parameter host_sys, which must be of list type, reset it to empty.")
            self._host_sys = []
        if not all(item in _HOST_SYS for item in self._host_sys):
            print_warn_msg("Invalid parameter host_sys, reset it to empty.")
            self._host_sys = []
        self._host_sys = list({str(item) for item in self._host_sys})
