"""patches/inference.py: the engine and forward are patched when their modules load (never
imported by us), MindSpeed-LLM's generate goes through MindSpeed's patch manager and is one
request however its answer is read (returned, or streamed: consumed fully, abandoned half way,
raising), its legacy per-token forwards are labelled, class methods are patched and undone, and
a process that serves no model compute stays inert. Each scenario runs in a fresh interpreter:
imports and patches are per process."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from helpers.e2e import check, verdicts
from helpers.inference import events
from helpers.traces import manifest, step_ids, torch_traces
from mindspeed_prof.patches.registry import MARK, PatchRegistry

pytestmark = pytest.mark.slow  # Megatron's engines in a fresh interpreter, test by test

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


# MindSpeed-LLM's package (its import runs its adaptor over the MindSpeed fakes) and the stand-in of
# Megatron-LM's legacy ForwardStep its generation loop calls per token.
LLM = (FAKES, os.path.join(TESTS, "harness", "megatron_standin"))
IMPORT_LLM = "from mindspeed_llm.tasks.inference.module import MegatronModuleForCausalLM\n"


def test_mindspeed_llm_generate_is_one_request_through_mindspeeds_patch_manager(tmp_path):
    found = run_python(tmp_path, """
        import mindspeed.patch_utils as patch_utils
        from mindspeed_llm.tasks.inference.module import MegatronModuleForCausalLM
        hook_inference()
        model = MegatronModuleForCausalLM()
        for _ in range(4):
            model.generate("1 2 3", max_new_tokens=4)
        state.inference.close()
        target = "mindspeed_llm.tasks.inference.module.MegatronModuleForCausalLM.generate"
        print(json.dumps({"via_mindspeed": registry.patches[target].via_mindspeed,
                          "in_manager": target in patch_utils.MindSpeedPatchesManager.patches_info,
                          "folders": sorted(os.listdir(SAVE)),
                          "served": state.inference.requests}))
    """, *LLM)
    assert found["via_mindspeed"] and found["in_manager"]
    assert found["served"] == 4
    assert found["folders"] == ["profile_manifest_rank0.json", "req_2-2", "req_3-3"]


GENERATE_FOUR = """
    hook_inference()
    from mindspeed_llm.tasks.inference.module import MegatronModuleForCausalLM
    torch.manual_seed(0)
    model = MegatronModuleForCausalLM()
    answers = []
    for _ in range(4):
        if STREAM:
            for text in model.generate("1 2 3", max_new_tokens=5, stream=True):
                pass  # the chat task prints each text as it comes
            answers.append(text)
        else:
            answers.append(model.generate("1 2 3", max_new_tokens=5))
    state.inference.close()
    print(json.dumps(answers))
"""


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "returned"])
def test_a_mindspeed_llm_generation_is_one_request_with_its_legacy_forwards_labelled(tmp_path,
                                                                                     stream):
    answers = run_python(tmp_path, f"import torch\nSTREAM = {stream}\n"
                         + textwrap.dedent(GENERATE_FOUR), *LLM)
    save = tmp_path / "prof"
    assert [os.path.basename(os.path.dirname(t)) for t in torch_traces(save)] == [
        "req_2-2", "req_3-3"]
    for trace in torch_traces(save):
        names = [e["name"] for e in events(trace)]
        # One forward per new token (5), inside the request: the first prefill, then decode.
        assert (names.count("prefill"), names.count("decode")) == (1, 4)
        assert names.count("aten::addmm") == 5
    assert manifest(save, 0)["status"] == "complete"
    assert check(save)[0] == 0
    unprofiled = run_python(tmp_path, f"import torch\nSTREAM = {stream}\n"
                            "state.config = ProfilerConfig()\n"
                            + textwrap.dedent(GENERATE_FOUR), *LLM)
    assert answers == unprofiled and len(set(answers)) == 1


def _second_stream(tmp_path, body):
    """Requests 1-4 of ``model``; request 2 is a stream that ``body`` consumes its own way."""
    return run_python(tmp_path, textwrap.dedent("""
        hook_inference()
        from mindspeed_llm.tasks.inference.module import MegatronModuleForCausalLM
        model = MegatronModuleForCausalLM()
        said = {}
        model.generate("1 2 3", max_new_tokens=5)
    """) + textwrap.dedent(body) + textwrap.dedent("""
        model.generate("1 2 3", max_new_tokens=5)
        model.generate("1 2 3", max_new_tokens=5)
        # No close(): the flush at exit writes the manifest, as for inference.py. A suspended
        # generator left to interpreter teardown crashes under the CPU shim's device mode (the
        # harness's; plain torch does not), so the script drops its stream itself.
        globals().pop("stream", None)
        print(json.dumps(said))
    """), *LLM)


ABANDONED = {
    "closed": """
        stream = model.generate("1 2 3", max_new_tokens=5, stream=True)
        next(stream), next(stream)
        stream.close()
    """,
    "dropped": """
        stream = model.generate("1 2 3", max_new_tokens=5, stream=True)
        next(stream), next(stream)
        del stream  # garbage: Python closes it
    """,
    "left for the next request": """
        stream = model.generate("1 2 3", max_new_tokens=5, stream=True)
        next(stream), next(stream)
    """,
}


@pytest.mark.parametrize("how", list(ABANDONED))
def test_a_stream_abandoned_half_way_cuts_its_request_and_the_next_ones_are_recorded(tmp_path,
                                                                                     how):
    _second_stream(tmp_path, ABANDONED[how])
    save = tmp_path / "prof"
    data = manifest(save, 0)
    (planned,) = data["planned"]
    assert (planned["status"], planned["cut"]) == ("cut", {"reason": "abandoned",
                                                           "in_progress": 2})
    assert planned["recorded"] == [3]
    assert data["exit"]["reason"] == "process exit"  # an unread stream is no way to end
    traces = {os.path.basename(os.path.dirname(t)): t for t in torch_traces(save)}
    names = [e["name"] for e in events(traces["req_2-2"])]
    assert (names.count("prefill"), names.count("decode")) == (1, 1)  # the two items read
    assert [step_ids(t) for t in traces.values()] == [[2], [3]]
    code, report = check(save)
    assert code == 1 and verdicts(report) == {0: "cut"}


@pytest.mark.parametrize("stream", [True, False], ids=["while-streaming", "inside-the-call"])
def test_a_generation_that_raises_cuts_its_request_and_the_error_reaches_the_caller(tmp_path,
                                                                                    stream):
    said = _second_stream(tmp_path, f"""
        try:
            for text in model.generate(" ".join(["1"] * 14), max_new_tokens=5, stream={stream}):
                pass
        except ValueError as error:
            said["caught"] = str(error)
    """)
    assert said == {"caught": "Length of prompt + tokens_to_generate longer than allowed"}
    save = tmp_path / "prof"
    data = manifest(save, 0)
    (planned,) = data["planned"]
    assert (planned["status"], planned["cut"]["reason"]) == ("cut", "exception")
    assert any("request 2 ended early (ValueError: Length of prompt" in w["message"]
               for w in data["warnings"])
    code, report = check(save)
    assert code == 1 and verdicts(report) == {0: "cut"}


def test_generate_inside_a_training_loop_is_no_request(tmp_path):
    found = run_python(tmp_path, """
        from mindspeed_llm.tasks.inference.module import MegatronModuleForCausalLM
        hook_inference()
        state.training = True  # a patched train() is running (RL rollouts inside training)
        for _ in range(4):
            MegatronModuleForCausalLM().generate("1 2", max_new_tokens=2)
        print(json.dumps({"driver": state.inference is not NULL_DRIVER,
                          "written": os.path.exists(SAVE)}))
    """, *LLM)
    assert found == {"driver": False, "written": False}


def test_a_save_path_that_cannot_be_written_stops_the_first_request_with_exit_code_2(tmp_path):
    (tmp_path / "prof").write_text("a file where the save path should be")
    script = tmp_path / "scenario.py"
    script.write_text(f"SAVE = {str(tmp_path / 'prof')!r}\n" + textwrap.dedent(PROLOGUE)
                      + textwrap.dedent("""
        from mindspeed_llm.tasks.inference.module import MegatronModuleForCausalLM
        hook_inference()
        MegatronModuleForCausalLM().generate("1 2", max_new_tokens=2)
        print("generated")
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(LLM), MINDSPEED_PROF_AUTOLOAD="0")
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


@pytest.mark.parametrize("server", [True, False], ids=["server", "offline"])
def test_a_process_that_imported_megatrons_text_generation_server_is_a_server(tmp_path, server):
    found = run_python(tmp_path, f"""
        if {server}:
            import megatron.core.inference.text_generation_server  # what the server tool imports
        hook_inference()
        from mindspeed_llm.tasks.inference.module import MegatronModuleForCausalLM
        MegatronModuleForCausalLM().generate("1 2", max_new_tokens=2)
        state.inference.close("signal", "SIGTERM")  # before the window of requests 2-3
        print(json.dumps(None))
    """, *LLM)
    owner = "the server" if server else "the inference process"
    assert f"{owner} ended (signal) before request 2; nothing was profiled" in [
        w["message"] for w in manifest(tmp_path / "prof", 0)["warnings"]]
