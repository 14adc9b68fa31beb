"""patches/inference.py: the engine and forward are patched when their modules load (never
imported by us), MindSpeed-LLM's generate goes through MindSpeed's patch manager, class methods
are patched and undone, and a process that serves no model compute stays inert. Each scenario
runs in a fresh interpreter: imports and patches are per process."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from mindspeed_prof.patches.registry import MARK, PatchRegistry

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKES = os.path.join(TESTS, "fakes")
ENGINE_MODULE = "megatron.core.inference.engines.static_engine"

# A process whose Megatron args were validated with these flags (what take_ownership leaves).
PROLOGUE = """
import json, os, sys
from mindspeed_prof import ProfilerConfig
from mindspeed_prof.patches import registry, state
from mindspeed_prof.patches.inference import hook_inference
from mindspeed_prof.drivers.base import NULL_DRIVER
state.config = ProfilerConfig(profile=True, profile_step_start=2, profile_step_end=4,
                              profile_save_path=SAVE, profile_backend="torch",
                              profile_analyse="sync")
"""


def run_python(tmp_path, body, *paths, argv=()):
    script = tmp_path / "scenario.py"
    script.write_text(f"SAVE = {str(tmp_path / 'prof')!r}\n" + textwrap.dedent(PROLOGUE)
                      + textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]),
               MINDSPEED_PROF_AUTOLOAD="0", TORCHDYNAMO_DISABLE="1")
    result = subprocess.run([sys.executable, str(script), *argv], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_engine_targets_are_patched_as_megatron_imports_them_and_unbuilt_engines_stay_inert(
        tmp_path):
    found = run_python(tmp_path, f"""
        hook_inference()
        before = {ENGINE_MODULE!r} in sys.modules
        from megatron.core.inference.engines import StaticInferenceEngine
        from megatron.core.inference.model_inference_wrappers.abstract_model_inference_wrapper \\
            import AbstractModelInferenceWrapper as Wrapper
        marks = [getattr(f, "_mindspeed_prof_patch", "") for f in (
            StaticInferenceEngine.__init__, StaticInferenceEngine.generate,
            Wrapper.run_one_forward_step)]
        # A front end or coordinator imports the engine but never builds one: nothing starts.
        print(json.dumps({{"before": before, "marks": marks, "driver": state.inference is not NULL_DRIVER,
                          "written": os.path.exists(SAVE)}}))
    """)
    assert found["before"] is False
    assert [mark.rsplit(":", 1)[1] for mark in found["marks"]] == [
        "mindspeed_prof_engine_init_wrapper", "mindspeed_prof_generate_wrapper",
        "mindspeed_prof_forward_wrapper"]
    assert (found["driver"], found["written"]) == (False, False)


FAKE_LLM = '''
import torch


class MegatronModuleForCausalLM(torch.nn.Module):
    """Shaped like MindSpeed-LLM's: generate() runs the prompt's forwards on this thread."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 8)

    def generate(self, tokens=3):
        with torch.no_grad():
            return [self.layer(torch.randn(2, 8)) for _ in range(tokens)]
'''


def fake_mindspeed_llm(tmp_path):
    package = tmp_path / "llm" / "mindspeed_llm" / "tasks" / "inference"
    package.mkdir(parents=True)
    for folder in (package, package.parent, package.parent.parent):
        (folder / "__init__.py").write_text("")
    (package / "module.py").write_text(FAKE_LLM)
    return str(tmp_path / "llm")


def test_mindspeed_llm_generate_is_one_request_through_mindspeeds_patch_manager(tmp_path):
    found = run_python(tmp_path, """
        import mindspeed.patch_utils as patch_utils
        from mindspeed_llm.tasks.inference.module import MegatronModuleForCausalLM
        hook_inference()
        model = MegatronModuleForCausalLM()
        for _ in range(4):
            model.generate()
        state.inference.close()
        target = "mindspeed_llm.tasks.inference.module.MegatronModuleForCausalLM.generate"
        print(json.dumps({"via_mindspeed": registry.patches[target].via_mindspeed,
                          "in_manager": target in patch_utils.MindSpeedPatchesManager.patches_info,
                          "folders": sorted(os.listdir(SAVE)),
                          "served": state.inference.requests}))
    """, fake_mindspeed_llm(tmp_path), FAKES)  # only MindSpeed-LLM's inference module
    assert found["via_mindspeed"] and found["in_manager"]
    assert found["served"] == 4
    assert found["folders"] == ["profile_manifest_rank0.json", "req_2-2", "req_3-3"]


def test_generate_inside_a_training_loop_is_no_request(tmp_path):
    found = run_python(tmp_path, """
        from mindspeed_llm.tasks.inference.module import MegatronModuleForCausalLM
        hook_inference()
        state.training = True  # a patched train() is running (RL rollouts inside training)
        for _ in range(4):
            MegatronModuleForCausalLM().generate()
        print(json.dumps({"driver": state.inference is not NULL_DRIVER,
                          "written": os.path.exists(SAVE)}))
    """, fake_mindspeed_llm(tmp_path))
    assert found == {"driver": False, "written": False}


def test_a_save_path_that_cannot_be_written_stops_the_first_request_with_exit_code_2(tmp_path):
    (tmp_path / "prof").write_text("a file where the save path should be")
    script = tmp_path / "scenario.py"
    script.write_text(f"SAVE = {str(tmp_path / 'prof')!r}\n" + textwrap.dedent(PROLOGUE)
                      + textwrap.dedent("""
        from mindspeed_llm.tasks.inference.module import MegatronModuleForCausalLM
        hook_inference()
        MegatronModuleForCausalLM().generate()
        print("generated")
    """))
    env = dict(os.environ, PYTHONPATH=fake_mindspeed_llm(tmp_path), MINDSPEED_PROF_AUTOLOAD="0")
    result = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "generated" not in result.stdout
    (line,) = [l for l in result.stderr.splitlines() if "--profile-save-path" in l]
    assert "is not writable on rank 0" in line and "Traceback" not in result.stderr


def test_a_spawned_child_of_a_profiled_process_is_not_armed(tmp_path):
    """The dynamic server starts its HTTP front end and coordinator as multiprocessing children."""
    child = tmp_path / "front_end.py"
    child.write_text(textwrap.dedent("""
        import json, multiprocessing, sys

        def report(queue):
            from mindspeed_prof.patches import state
            queue.put({"activated_by": state.activated_by})

        if __name__ == "__main__":
            context = multiprocessing.get_context("spawn")
            queue = context.Queue()
            process = context.Process(target=report, args=(queue,))
            process.start()
            found = queue.get(timeout=60)
            process.join()
            from mindspeed_prof.patches import state
            found["parent"] = state.activated_by
            print(json.dumps(found))
    """))
    env = dict(os.environ, MINDSPEED_PROF_AUTOLOAD="0")
    result = subprocess.run([sys.executable, "-m", "mindspeed_prof.launch", str(child),
                             "--profile", "--profile-save-path", str(tmp_path / "prof")],
                            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found == {"activated_by": None, "parent": "launcher"}
    assert not (tmp_path / "prof").exists()


class Host:
    def method(self, x):
        return x + 1


def test_a_class_method_target_is_wrapped_and_undone(monkeypatch):
    module = type(sys)("inference_patch_host")
    module.Host = Host
    monkeypatch.setitem(sys.modules, "inference_patch_host", module)
    original = Host.method
    calls = []

    def probe_wrapper(func):
        def wrapped(*args):
            calls.append(args[1:])
            return func(*args)
        return wrapped

    registry = PatchRegistry()
    registry.register("inference_patch_host.Host.method", probe_wrapper)
    registry.ensure()
    assert Host().method(1) == 2 and calls == [(1,)]
    assert getattr(Host.method, MARK).endswith(":probe_wrapper")
    registry.undo()
    assert Host.method is original


@pytest.fixture(autouse=True)
def _no_leftover_patches(undo_patches):
    yield
