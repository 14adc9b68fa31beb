"""Run a MindSpeed / MindSpeed-LLM entry script on the CPU (the opt-in real tier).

``real_mindspeed.wrapper`` copies this file next to the run with SCRIPT and HARNESS filled in, so
it runs as a plain script (``python run_x.py ARGS``, ``-m mindspeed_prof.launch run_x.py ARGS``,
or plain torchrun for autoload). It serves the torch_npu/torchair/acl stubs, applies the CPU fixes
of the real-Megatron tier, then runs SCRIPT as ``__main__`` with its folder first on sys.path.
At exit it prints one ``REPORT_TAG`` line: MindSpeed's feature list and which of our wrappers sit
on the training loop's functions, what the tests check besides the trace.
"""

import atexit
import json
import os
import runpy
import sys

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = None
REPORT_TAG = "REAL_TIER_REPORT "
LOOP = ("megatron.training.training.train", "megatron.training.training.train_step",
        "mindspeed_llm.training.training.train")


def report():
    from mindspeed_prof.patches.registry import markers

    manager = sys.modules.get("mindspeed.features_manager.features_manager")
    features = [f.feature_name for f in manager.MindSpeedFeaturesManager.FEATURES_LIST] \
        if manager else None
    chains = {}
    for target in LOOP:
        module_name, attr = target.rsplit(".", 1)
        if module_name in sys.modules:
            chains[target] = markers(getattr(sys.modules[module_name], attr, None))
    line = REPORT_TAG + json.dumps({"rank": os.environ.get("RANK"), "features": features,
                                    "chains": chains}) + "\n"
    # One write(2) of under PIPE_BUF bytes: print() writes the text and its newline apart, and
    # the other rank's report, printed at the same moment, landed between them (seen in the tier).
    sys.stderr.flush()
    os.write(2, line.encode())


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(HARNESS, "real_mindspeed"))
    import npu_stubs

    npu_stubs.install()
    sys.path.insert(0, os.path.join(HARNESS, "real_megatron"))
    import run_pretrain_gpt

    run_pretrain_gpt.apply_cpu_fixes()
    sys.path.remove(os.path.join(HARNESS, "real_megatron"))
    sys.path.remove(os.path.join(HARNESS, "real_mindspeed"))
    atexit.register(report)
    sys.argv[0] = SCRIPT
    sys.path[0] = os.path.dirname(SCRIPT)
    runpy.run_path(SCRIPT, run_name="__main__")
