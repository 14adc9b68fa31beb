"""patches/dynamic_inference.py on megatron-core 0.17, 0.18 and 0.19 (the same targets, by the
same names, in each): the dynamic engine's targets are patched
when its modules load (never imported by us), a process that imports the engine but builds none
(a front end, the coordinator) creates no driver and writes nothing, and without ``--profile*``
on the command line nothing is patched at all. Each scenario runs in a fresh interpreter."""

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap

import pytest

try:
    from packaging.version import Version

    _CORE = Version(importlib.metadata.version("megatron-core"))
except (ImportError, importlib.metadata.PackageNotFoundError):
    _CORE = None

pytestmark = [
    pytest.mark.current_megatron,
    pytest.mark.skipif(_CORE is None or _CORE < Version("0.17"),
                       reason=f"the dynamic engine's hooks need megatron-core >= 0.17 (found "
                              f"{_CORE or 'none'}): the Python 3.12 leg (0.19), or the opt-in "
                              f"envs of 0.17/0.18"),
]

ENGINE = "megatron.core.inference.engines.dynamic_engine"


def run_python(tmp_path, body, argv=()):
    script = tmp_path / "scenario.py"
    script.write_text(f"SAVE = {str(tmp_path / 'prof')!r}\n" + textwrap.dedent(body))
    env = dict(os.environ, MINDSPEED_PROF_AUTOLOAD="0", TORCHDYNAMO_DISABLE="1")
    result = subprocess.run([sys.executable, str(script), *argv], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_command_line_with_profile_patches_the_engine_when_megatron_imports_it(tmp_path):
    found = run_python(tmp_path, f"""
        import json, os, sys
        from mindspeed_prof.patches import activate, state
        from mindspeed_prof.drivers.base import NULL_DRIVER
        activate(sys.argv[1:], by="auto")
        before = {ENGINE!r} in sys.modules
        from megatron.core.inference.engines import DynamicInferenceEngine as E
        from megatron.core.inference.text_generation_controllers.text_generation_controller \\
            import TextGenerationController as C
        marks = [getattr(f, "_mindspeed_prof_patch", "").rsplit(":", 1)[-1] for f in (
            E.__init__, E.async_step, E.schedule_requests, E.run_engine_with_coordinator,
            E._run_coroutine_sync, C.dummy_forward, C._dynamic_step_forward_logits)]
        # Imported, never built (a front end, the coordinator): no driver, nothing written.
        print(json.dumps({{"before": before, "marks": marks,
                          "driver": state.engine is not NULL_DRIVER,
                          "written": os.path.exists(SAVE)}}))
    """, argv=["--profile", "--profile-save-path", str(tmp_path / "prof")])
    assert found["before"] is False
    assert found["marks"] == [
        "mindspeed_prof_dynamic_engine_init_wrapper", "mindspeed_prof_engine_step_wrapper",
        "mindspeed_prof_schedule_requests_wrapper", "mindspeed_prof_engine_loop_wrapper",
        "mindspeed_prof_sync_step_wrapper", "mindspeed_prof_dummy_forward_wrapper",
        "mindspeed_prof_forward_logits_wrapper"]
    assert (found["driver"], found["written"]) == (False, False)


def test_without_profile_flags_nothing_is_patched(tmp_path):
    found = run_python(tmp_path, f"""
        import json, sys
        from mindspeed_prof.patches import activate
        armed = activate(sys.argv[1:], by="auto")
        from megatron.core.inference.engines import DynamicInferenceEngine as E
        import torch
        print(json.dumps({{"armed": armed,
                          "marks": [getattr(f, "_mindspeed_prof_patch", None) for f in (
                              E.__init__, E.async_step, E.schedule_requests, torch.cuda.cudart)]}}))
    """, argv=["--port", "5000"])
    assert found == {"armed": False, "marks": [None, None, None, None]}
