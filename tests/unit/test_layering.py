"""The dependency rules of DESIGN §1, checked in fresh interpreters."""

import json
import subprocess
import sys

FORBIDDEN_FOR_CORE = ("megatron", "mindspeed", "mindspeed_llm", "torch_npu",
                      "mindspeed_prof.patches", "mindspeed_prof.arguments")


def imported_after(code):
    script = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_core_imports_neither_megatron_nor_the_integration_layers():
    modules = imported_after(
        "import mindspeed_prof, mindspeed_prof.config, mindspeed_prof.manager, "
        "mindspeed_prof.loop, mindspeed_prof.window, mindspeed_prof.backends.torch_backend")
    leaked = [m for m in modules if m.split(".")[0] in FORBIDDEN_FOR_CORE[:4]
              or m.startswith(FORBIDDEN_FOR_CORE[4:])]
    assert leaked == []


def test_importing_the_package_is_cheap():
    modules = imported_after("import mindspeed_prof")
    assert "torch" not in modules and "mindspeed_prof.manager" not in modules


def test_activation_path_does_not_import_torch():
    modules = imported_after("from mindspeed_prof.patches import activate\n"
                             "activate(['--profile'], by='test')")
    assert "torch" not in modules


# The CLI's readers parse with these; a training process must never pay for them.
READER_LIBRARIES = ("pyarrow", "msgspec", "polars", "orjson", "simdjson", "ijson")


def test_training_side_imports_none_of_the_readers_parsers():
    modules = imported_after(
        "import mindspeed_prof.autoload, mindspeed_prof.launch, mindspeed_prof.auto, "
        "mindspeed_prof.manager, mindspeed_prof.backends.torch_backend\n"
        "from mindspeed_prof.patches import activate\n"
        "activate(['--profile'], by='test')")
    assert "mindspeed_prof.manager" in modules
    assert [m for m in modules if m.split(".")[0] in READER_LIBRARIES] == []


def test_the_readers_do_import_their_parsers_so_the_check_above_can_fail():
    modules = imported_after("from mindspeed_prof.output import aggregate, tracescan\n"
                             "aggregate.load_parsers()\ntracescan._Validator()")
    assert {"pyarrow", "msgspec", "simdjson"} <= set(modules)
