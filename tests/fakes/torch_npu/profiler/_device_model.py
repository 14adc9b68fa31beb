"""The pretend NPU: which torch ops launch kernels, and when those kernels run.

An op launches one kernel when its NPU implementation is a single kernel (matmul,
reductions, norms, ...), otherwise its compute leaves do; views and allocations launch
nothing, as on a real NPU. Each kernel runs inside its op's host interval, so the kernel falls in the
same ProfilerStep#N as the op that launched it; that is the property tests rely on.
"""

import zlib

from . import _constants as C

# Ops that only change metadata or allocate; they launch nothing on the device.
_NO_KERNEL_OPS = {
    "alias", "as_strided", "detach", "detach_", "empty", "empty_like", "empty_strided", "expand",
    "lift_fresh", "permute", "reshape", "_reshape_alias", "resolve_conj", "resolve_neg", "select",
    "slice", "squeeze", "t", "transpose", "unsqueeze", "view", "unflatten", "flatten", "split",
    "chunk", "narrow", "contiguous", "to", "_to_copy", "numpy_T", "result_type", "item",
    "_local_scalar_dense", "set_", "unbind", "is_nonzero", "size", "stride", "broadcast_tensors", "resize",
    "zeros", "ones", "full", "new_empty", "new_zeros", "new_empty_strided",
}
_MATMUL_TYPES = {
    "mm": "MatMulV2", "addmm": "MatMulV2", "matmul": "MatMulV2", "linear": "MatMulV2",
    "bmm": "BatchMatMulV2", "baddbmm": "BatchMatMulV2", "addbmm": "BatchMatMulV2",
}
_OP_TYPES = {
    "add": "Add", "sub": "Sub", "mul": "Mul", "div": "RealDiv", "sum": "ReduceSum", "mean": "ReduceMean",
    "copy": "Cast", "fill": "Fill", "zero": "ZerosLike", "zeros_like": "ZerosLike", "ones_like": "OnesLike",
    "normal": "StatelessRandomNormalV2", "uniform": "StatelessRandomUniformV2", "relu": "Relu",
    "gelu": "Gelu", "silu": "Swish", "softmax": "SoftmaxV2", "_softmax": "SoftmaxV2",
    "log_softmax": "LogSoftmaxV2", "_log_softmax": "LogSoftmaxV2", "layer_norm": "LayerNormV3",
    "native_layer_norm": "LayerNormV3", "mse_loss": "MseLoss", "clone": "Identity", "threshold_backward":
    "ReluGrad", "addcmul": "Addcmul", "addcdiv": "Addcdiv", "sqrt": "Sqrt", "pow": "Pow", "exp": "Exp",
    "embedding": "GatherV2", "cat": "ConcatD", "nll_loss": "NLLLoss", "dropout": "DropOutDoMask",
}
_DTYPES = {
    "float": "FLOAT", "double": "DOUBLE", "c10::Half": "FLOAT16", "c10::BFloat16": "DT_BF16",
    "long int": "INT64", "int": "INT32", "bool": "BOOL", "short int": "INT16", "signed char": "INT8",
    "unsigned char": "UINT8",
}
MAIN_STREAM_ID = 2
MODEL_ID_INVALID = 4294967295


def _base_name(op_name: str) -> str:
    return op_name.split("::")[-1]


def launches_kernel(op: dict) -> bool:
    if op.get("cat") != "cpu_op":
        return False
    base = _base_name(op["name"])
    return base.rstrip("_") not in _NO_KERNEL_OPS and base not in _NO_KERNEL_OPS


def _camel(text: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in text.strip("_").split("_") if part) or "Op"


def kernel_identity(op_name: str) -> tuple:
    """(kernel name, OP Type, Accelerator Core) for the kernel an op launches."""
    base = _base_name(op_name)
    stem = base.rstrip("_")
    api = _camel(stem)
    if stem in _MATMUL_TYPES:
        op_type = _MATMUL_TYPES[stem]
        return f"aclnn{api}_MatMulCommon_{op_type}", op_type, "AI_CORE"
    op_type = _OP_TYPES.get(stem, api)
    return f"aclnn{api}_{op_type}AiCore_{op_type}", op_type, "AI_VECTOR_CORE"


# Ops whose NPU implementation is one kernel, however the CPU kernel decomposes them;
# nothing below such an op launches its own kernel.
_SINGLE_KERNEL_OPS = set(_MATMUL_TYPES) | {
    "sum", "mean", "softmax", "_softmax", "log_softmax", "_log_softmax", "_softmax_backward_data",
    "native_layer_norm", "native_layer_norm_backward", "mse_loss", "mse_loss_backward", "embedding_dense_backward",
    "nll_loss_forward", "nll_loss_backward", "native_dropout", "gelu", "gelu_backward", "silu", "relu",
    "threshold_backward", "addcmul", "addcdiv", "cat", "clone", "embedding",
}


def _is_single_kernel(op: dict) -> bool:
    return op.get("cat") == "cpu_op" and _base_name(op["name"]).rstrip("_") in _SINGLE_KERNEL_OPS


def _children_by_thread(ops: list) -> dict:
    """index -> child indexes, from time nesting of the ops of each thread."""
    children = {index: [] for index in range(len(ops))}
    by_thread = {}
    for index, op in enumerate(ops):
        by_thread.setdefault(op["tid"], []).append(index)
    for indexes in by_thread.values():
        indexes.sort(key=lambda i: (ops[i]["ts_ns"], -ops[i]["dur_ns"]))
        stack = []
        for index in indexes:
            start = ops[index]["ts_ns"]
            while stack and ops[stack[-1]]["ts_ns"] + ops[stack[-1]]["dur_ns"] <= start:
                stack.pop()
            if stack:
                children[stack[-1]].append(index)
            stack.append(index)
    return children


def _launching_ops(ops: list) -> list:
    """Indexes of ops that launch a kernel: the innermost single-kernel op, else compute leaves."""
    children = _children_by_thread(ops)
    has_child = {index for index, kids in children.items() if kids}
    owns_below = {}

    def single_kernel_below(index):
        if index not in owns_below:
            owns_below[index] = any(_is_single_kernel(ops[kid]) or single_kernel_below(kid)
                                    for kid in children[index])
        return owns_below[index]

    covered, launching = set(), []
    for index in sorted(range(len(ops)), key=lambda i: (ops[i]["ts_ns"], -ops[i]["dur_ns"])):
        if index in covered:
            continue
        if _is_single_kernel(ops[index]) and not single_kernel_below(index):
            launching.append(index)
            pending = list(children[index])
            while pending:
                kid = pending.pop()
                covered.add(kid)
                pending.extend(children[kid])
        elif index not in has_child and launches_kernel(ops[index]):
            launching.append(index)
    return launching


def _tensor_inputs(op: dict) -> list:
    dims = op.get("input_dims") or []
    types = op.get("input_types") or []
    found = []
    for shape, dtype in zip(dims, types):
        if dtype in _DTYPES:
            found.append((shape, _DTYPES[dtype]))
    return found


def _shape_text(shapes: list) -> str:
    return ";".join(",".join(str(dim) for dim in shape) for shape in shapes)


def _stable_int(text: str, low: int, high: int) -> int:
    return low + zlib.crc32(text.encode("utf-8")) % (high - low + 1)


def build_kernels(ops: list) -> list:
    """Kernels in launch order; each carries the connection id (cid) of its op."""
    streams, task_ids, kernels = {}, {}, []
    for index in _launching_ops(ops):
        op = ops[index]
        stream = streams.setdefault(op["tid"], MAIN_STREAM_ID + len(streams))
        task_ids[stream] = task_ids.get(stream, 0) + 1
        name, op_type, core = kernel_identity(op["name"])
        inputs = _tensor_inputs(op)
        shapes = [shape for shape, _ in inputs]
        dtypes = [dtype for _, dtype in inputs]
        kernels.append({
            "cid": op["cid"],
            "name": name,
            "op_type": op_type,
            "task_type": core,
            "stream_id": stream,
            "task_id": task_ids[stream],
            "start_ns": op["ts_ns"] + op["dur_ns"] // 4,
            "dur_ns": max(op["dur_ns"] // 2, 1),
            "block_dim": _stable_int(name, 1, 48),
            "input_shapes": _shape_text(shapes),
            "input_dtypes": ";".join(dtypes),
            "input_formats": ";".join("ND" for _ in dtypes),
            "output_shapes": _shape_text(shapes[:1]),
            "output_dtypes": ";".join(dtypes[:1]),
            "output_formats": "ND" if dtypes else "",
        })
    return kernels


def build_api_events(ops: list, kernels: list, level: str) -> list:
    """Host-side CANN API calls (Level1: AscendCL, Level2: plus runtime launches)."""
    if level not in (C.LEVEL1, C.LEVEL2):
        return []
    by_cid = {op["cid"]: op for op in ops}
    events = []
    for kernel in kernels:
        op = by_cid.get(kernel["cid"])
        if op is None:
            continue
        start = op["ts_ns"] + op["dur_ns"] // 8
        end = max(kernel["start_ns"], start + 1)
        api = kernel["name"].split("_")[0]
        events.append({"level": "acl", "name": api, "start_ns": start, "end_ns": end,
                       "tid": op["tid"], "cid": kernel["cid"]})
        if level == C.LEVEL2:
            events.append({"level": "runtime", "name": "KernelLaunch", "start_ns": start + (end - start) // 2,
                           "end_ns": end, "tid": op["tid"], "cid": kernel["cid"]})
    return events
