"""torch_npu.profiler with the public surface of the impersonated wheel.

Like the real package, the offline parser `analyse` is NOT re-exported here; import it
from torch_npu.profiler.profiler. The import-time dynamic-profiling hook of the real
package (_NonIntrusiveProfile.init) is not reproduced.
"""

from torch_npu._C._profiler import ProfilerActivity

from . import dynamic_profile  # noqa: F401
from .experimental_config import (
    AiCMetrics,
    ExportType,
    HostSystem,
    ProfilerLevel,
    _ExperimentalConfig,
    supported_ai_core_metrics,
    supported_export_type,
    supported_profiler_level,
)
from .profiler import _KinetoProfile, profile, tensorboard_trace_handler
from .profiler_interface import supported_activities
from .scheduler import ProfilerAction
from .scheduler import Schedule as schedule

__all__ = [
    "profile", "ProfilerActivity", "supported_activities", "tensorboard_trace_handler", "schedule",
    "ProfilerAction", "_ExperimentalConfig", "supported_profiler_level", "supported_ai_core_metrics",
    "supported_export_type", "ProfilerLevel", "AiCMetrics", "ExportType", "HostSystem",
]
