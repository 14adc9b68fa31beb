"""Run the harness's ``pretrain_gpt.py`` as ``__main__``, then record what the process looks like.

Used by figure 1 as the training script, both bare (``python THIS ARGS``) and under the launcher
(``python -m mindspeed_prof.launch THIS ARGS``), so the two runs differ only by the launcher. On the
way out it writes JSON to ``$BENCH_FINGERPRINT_OUT``:

* ``attributes``: every callable in every loaded ``megatron*`` / ``torch.profiler*`` module (and
  the functions of classes defined there), as ``module.attr -> defining module.qualname@file``;
* ``marked``: those whose ``__wrapped__`` chain carries mindspeed_prof's patch mark, or whose code
  lives in mindspeed_prof;
* ``registry``: patches mindspeed_prof's registry holds (0 when it was never imported);
* ``meta_path``: import hooks of mindspeed_prof's in ``sys.meta_path``;
* ``step_cpu_ns``: the process's CPU time between successive training-log lines, i.e. per
  iteration. Read off the log as it is written (stdout is observed, nothing of Megatron's is
  touched): CPU time, unlike the log's wall time, does not grow when other work on a shared
  machine takes the core away.
"""

import inspect
import json
import os
import runpy
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS = os.path.join(REPO, "tests", "harness")
OUR_CODE = (os.path.join(REPO, "mindspeed_prof") + os.sep, os.path.join(REPO, "patches") + os.sep,
            os.path.join(REPO, "arguments") + os.sep, f"{os.sep}mindspeed_prof{os.sep}")
SCOPES = ("megatron", "torch.profiler", "torch.autograd.profiler", "mindspeed")
MARK = "_mindspeed_prof_patch"


def _describe(obj):
    code = getattr(obj, "__code__", None)
    where = f"@{code.co_filename}:{code.co_firstlineno}" if code is not None else ""
    name = getattr(obj, "__qualname__", type(obj).__name__)
    return f"{getattr(obj, '__module__', '?')}.{name}{where}"


def _ours(obj):
    seen = set()
    while obj is not None and id(obj) not in seen:
        seen.add(id(obj))
        # Instance dictionaries only: placeholder classes for missing optional dependencies
        # answer any getattr.
        attrs = getattr(obj, "__dict__", None)
        attrs = attrs if isinstance(attrs, dict) else {}
        if attrs.get(MARK) is not None:
            return True
        code = obj.__code__ if inspect.isfunction(obj) else None
        if code is not None and any(part in code.co_filename for part in OUR_CODE):
            return True
        obj = attrs.get("__wrapped__")
    return False


def _callables(module):
    for name, value in list(vars(module).items()):
        if callable(value):
            yield name, value
            if inspect.isclass(value) and value.__module__ == module.__name__:
                for attr, member in list(vars(value).items()):
                    if callable(member):
                        yield f"{name}.{attr}", member


def fingerprint():
    attributes, marked = {}, []
    for module_name, module in sorted(sys.modules.items()):
        if module is None or not any(module_name == scope or module_name.startswith(scope + ".")
                                     for scope in SCOPES):
            continue
        for name, value in _callables(module):
            key = f"{module_name}.{name}"
            attributes[key] = _describe(value)
            if _ours(value):
                marked.append(key)
    registry = sys.modules.get("mindspeed_prof.patches.state")
    hooks = [type(f).__module__ for f in sys.meta_path
             if type(f).__module__.startswith("mindspeed_prof")]
    return {"attributes": attributes, "marked": marked,
            "registry": len(registry.registry.patches) if registry else 0, "meta_path": hooks}


class StepClock:
    """Stands in for stdout; notes the process CPU time at every iteration log line."""

    MARK = "elapsed time per iteration"

    def __init__(self, stream):
        self.stream = stream
        self.stamps = []

    def write(self, text):
        if self.MARK in text:
            self.stamps.append(time.process_time_ns())
        return self.stream.write(text)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def main():
    script = os.path.join(HARNESS, "pretrain_gpt.py")
    sys.argv[0] = script
    sys.path[0] = HARNESS
    clock = sys.stdout = StepClock(sys.stdout)
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        sys.stdout = clock.stream
        record = fingerprint()
        record["step_cpu_ns"] = [b - a for a, b in zip(clock.stamps, clock.stamps[1:])]
        with open(os.environ["BENCH_FINGERPRINT_OUT"], "w") as handle:
            json.dump(record, handle)


if __name__ == "__main__":
    main()
