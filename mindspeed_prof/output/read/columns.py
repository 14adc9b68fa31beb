"""The key columns of each ASCEND_PROFILER_OUTPUT table, with every name they have had.

A file missing a required column cannot be summarised (or read by msprof-analyze), so it is
corrupt; optional columns are used when present. Names come from the torch_npu and CANN
releases in shared/reference/ascend_output_formats.md §5 and the real samples.
"""

from .csvtable import Column

STEP = Column("Step Id", ("Step ID", "Step Id&Step ID"), required=False)
DEVICE = Column("Device_id", ("Device Id", "Device ID"), required=False)

KERNEL_DETAILS = (
    Column("Name", ("Op Name",)),
    Column("Type", ("OP Type",), required=False),
    Column("Accelerator Core", ("Task Type",), required=False),
    Column("Duration(us)", ("Task Duration(us)",)),
    STEP,
    Column("Start Time(us)", ("Task Start Time(us)",), required=False),
    Column("Block Num", ("Block Dim",), required=False),
)

# What the summary reads: fewer columns, fewer fields split per row.
KERNEL_SUMMARY = KERNEL_DETAILS[:2] + KERNEL_DETAILS[3:4]

OP_STATISTIC = (
    Column("OP Type", ("Op Type",)),
    Column("Core Type", (), required=False),
    Column("Count"),
    Column("Total Time(us)"),
    Column("Avg Time(us)", (), required=False),
    Column("Ratio(%)", (), required=False),
    DEVICE,
)

# The step-time components, in msprof-analyze's column order.
STEP_COMPONENTS = (
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
    "Preparing",
)
# Computing + Communication(Not Overlapped) + Free cover the step without double counting.
STEP_PARTS = ("Computing", "Communication(Not Overlapped)", "Free")

STEP_TRACE_TIME = (
    Column("Step", ("Step ID", "Step Id")),
    DEVICE,
    *(Column(name, required=name in STEP_PARTS) for name in STEP_COMPONENTS),
)

OPERATOR_DETAILS = (
    Column("Name"),
    Column("Input Shapes", (), required=False),
    Column("Host Self Duration(us)", (), required=False),
)

MEMORY_RECORD = (
    Column("Component"),
    Column("Timestamp(us)"),
    Column("Total Reserved(MB)"),
)

OPERATOR_MEMORY = (
    Column("Name"),
    Column("Size(KB)"),
)

NPU_MODULE_MEM = (
    Column("Component"),
    Column("Total Reserved(MB)"),
)

API_STATISTIC = (
    Column("API Name"),
    Column("Time(us)"),
)

TASK_TIME = (
    Column("kernel_name"),
    Column("task_time(us)"),
)

BY_FILE = {
    "kernel_details.csv": KERNEL_DETAILS,
    "op_statistic.csv": OP_STATISTIC,
    "step_trace_time.csv": STEP_TRACE_TIME,
    "operator_details.csv": OPERATOR_DETAILS,
    "memory_record.csv": MEMORY_RECORD,
    "operator_memory.csv": OPERATOR_MEMORY,
    "npu_module_mem.csv": NPU_MODULE_MEM,
    "api_statistic.csv": API_STATISTIC,
    "task_time.csv": TASK_TIME,
}


def for_file(name):
    """The key columns of a table by its file name; () for tables we only check for shape."""
    return BY_FILE.get(name, ())
