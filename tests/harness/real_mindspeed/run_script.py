"""Run a MindSpeed / MindSpeed-LLM entry script on the CPU (the opt-in real tier).

``real_mindspeed.wrapper`` copies this file next to the run with SCRIPT and HARNESS filled in, so
it runs as a plain script (``python run_x.py ARGS``, ``-m mindspeed_prof.launch run_x.py ARGS``,
or plain torchrun for autoload). It serves the torch_npu/torchair/acl stubs, applies the CPU fixes
of the real-Megatron tier, then runs SCRIPT as ``__main__`` with its folder first on sys.path.
At exit it prints one ``REPORT_TAG`` line: MindSpeed's feature list and which of our wrappers sit
on the training loop's functions, what the tests check besides the trace.
"""

import atexit
import importlib.abc
import importlib.util
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


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``fix(module)`` right after the module ``name`` is first executed, wherever it is
    imported from (nothing is imported early: import order is the host's)."""

    def __init__(self, name, fix):
        self.name, self.fix = name, fix

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        execute, fix = spec.loader.exec_module, self.fix

        def exec_then_fix(module):
            execute(module)
            fix(module)

        spec.loader.exec_module = exec_then_fix
        return spec


def _no_cuda_assertion(communication):
    # Megatron-LM's legacy broadcasts (MindSpeed-LLM's tokenize_prompts(broadcast=True) on the
    # chat path and with TP>1) assert tensor.is_cuda; on the CPU every tensor is a CPU tensor.
    communication._is_cuda = lambda tensor: None


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(HARNESS, "real_mindspeed"))
    import npu_stubs

    npu_stubs.install()
    sys.path.insert(0, os.path.join(HARNESS, "real_megatron"))
    import run_pretrain_gpt

    run_pretrain_gpt.apply_cpu_fixes()
    sys.path.remove(os.path.join(HARNESS, "real_megatron"))
    sys.path.remove(os.path.join(HARNESS, "real_mindspeed"))
    sys.meta_path.insert(0, _AfterImport("megatron.inference.text_generation.communication",
                                         _no_cuda_assertion))
    atexit.register(report)
    sys.argv[0] = SCRIPT
    sys.path[0] = os.path.dirname(SCRIPT)
    runpy.run_path(SCRIPT, run_name="__main__")
