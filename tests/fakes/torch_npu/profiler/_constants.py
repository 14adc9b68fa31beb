"""String values that end up in profiler_info.json and on disk; shared by capture and parsing."""

LEVEL_NONE = "Level_none"
LEVEL0 = "Level0"
LEVEL1 = "Level1"
LEVEL2 = "Level2"

AIC_NONE = "ACL_AICORE_NONE"
AIC_PIPE_UTILIZATION = "ACL_AICORE_PIPE_UTILIZATION"
AIC_ARITHMETIC_UTILIZATION = "ACL_AICORE_ARITHMETIC_UTILIZATION"
AIC_MEMORY = "ACL_AICORE_MEMORY_BANDWIDTH"
AIC_MEMORY_L0 = "ACL_AICORE_L0B_AND_WIDTH"
AIC_MEMORY_UB = "ACL_AICORE_MEMORY_UB"
AIC_RESOURCE_CONFLICT_RATIO = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
AIC_L2_CACHE = "ACL_AICORE_L2_CACHE"
AIC_MEMORY_ACCESS = "ACL_AICORE_MEMORY_ACCESS"

TEXT = "text"
DB = "db"

HOST_CPU = "cpu"
HOST_MEM = "mem"
HOST_DISK = "disk"
HOST_NETWORK = "network"
HOST_OSRT = "osrt"
HOST_NUMA = "numa"

CPU_ACTIVITY = "ProfilerActivity.CPU"
NPU_ACTIVITY = "ProfilerActivity.NPU"

# on-disk layout
RUN_DIR_SUFFIX = "ascend_pt"
EXPORT_ONLY_DIR = "export_only_prof_dir"
ASCEND_WORK_PATH_ENV = "ASCEND_WORK_PATH"
PROFILING_WORK_DIR = "profiling_data"
FRAMEWORK_DIR = "FRAMEWORK"
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
LOG_DIR = "logs"
PROFILER_METADATA = "profiler_metadata.json"
ANALYSE_DONE = "analyse.done"
MAX_WORKER_NAME_LENGTH = 226

# analysis types understood by the parse driver
TENSORBOARD_TRACE_HANDLER = "tensorboard_trace_handler"
EXPORT_CHROME_TRACE = "export_chrome_trace"

METRIC_CPU_TIME = "self_cpu_time_total"
METRIC_NPU_TIME = "self_npu_time_total"
