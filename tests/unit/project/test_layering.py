"""The dependency rules of DESIGN §1, checked in fresh interpreters."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # fresh interpreters, to see what each import loads

FORBIDDEN_FOR_CORE = ("megatron", "mindspeed", "mindspeed_llm", "torch_npu", "verl",
                      "mindspeed_prof.patches", "mindspeed_prof.arguments",
                      "mindspeed_prof.integrations")


def imported_after(code):
    script = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_core_imports_neither_megatron_nor_the_integration_layers():
    modules = imported_after(
        "import mindspeed_prof, mindspeed_prof.config.profiler_config, mindspeed_prof.manager, "
        "mindspeed_prof.loop, mindspeed_prof.config.window, mindspeed_prof.backends.torch_backend")
    leaked = [m for m in modules if m.split(".")[0] in FORBIDDEN_FOR_CORE[:5]
              or m.startswith(FORBIDDEN_FOR_CORE[5:])]
    assert leaked == []


def test_the_role_driver_imports_no_integration_and_no_verl():
    modules = imported_after("import mindspeed_prof.rl, mindspeed_prof.drivers.roles")
    assert [m for m in modules if m.split(".")[0] == "verl"
            or m.startswith("mindspeed_prof.integrations")] == []


def test_the_verl_integration_imports_verl_only_in_its_worker_modules():
    # settings, steps and shape are verl-free (the unit tests run them without verl); the
    # worker imports verl, here the imitation, so the first assertion could fail.
    imitation = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "fakes",
                             "verl_imitation")
    light = imported_after("import mindspeed_prof.integrations.verl.settings, "
                           "mindspeed_prof.integrations.verl.steps, "
                           "mindspeed_prof.integrations.verl.shape")
    assert [m for m in light if m.split(".")[0] == "verl"] == []
    heavy = imported_after(f"sys.path.insert(0, {imitation!r})\n"
                           "import mindspeed_prof.integrations.verl.worker")
    assert "verl.workers.engine_workers" in heavy


def test_importing_the_package_is_cheap():
    modules = imported_after("import mindspeed_prof")
    assert "torch" not in modules and "mindspeed_prof.manager" not in modules


def test_activation_path_does_not_import_torch():
    modules = imported_after("from mindspeed_prof.patches import activate\n"
                             "activate(['--profile'], by='test')")
    assert "torch" not in modules


# The CLI's readers parse with these; a training process must never pay for them.
READER_LIBRARIES = ("pyarrow", "msgspec", "polars", "orjson", "simdjson", "ijson", "plotly")


def test_training_side_imports_none_of_the_readers_parsers():
    modules = imported_after(
        "import mindspeed_prof.autoload, mindspeed_prof.launch, mindspeed_prof.auto, "
        "mindspeed_prof.manager, mindspeed_prof.backends.torch_backend\n"
        "from mindspeed_prof.patches import activate\n"
        "activate(['--profile'], by='test')")
    assert "mindspeed_prof.manager" in modules
    assert [m for m in modules if m.split(".")[0] in READER_LIBRARIES] == []
    # nor the readers themselves, the timeline's C extension among them
    assert [m for m in modules if m.startswith("mindspeed_prof.output.timeline")] == []


def test_the_readers_do_import_their_parsers_so_the_check_above_can_fail():
    modules = imported_after("from mindspeed_prof.output.read import tracescan\n"
                             "from mindspeed_prof.output.summary import aggregate\n"
                             "aggregate.load_parsers()\ntracescan._Validator()")
    assert {"pyarrow", "msgspec", "simdjson"} <= set(modules)
    if importlib.util.find_spec("plotly") is not None:  # the report's page embeds plotly.js
        assert "plotly" in imported_after("from mindspeed_prof.output.report import write\n"
                                          "write.plotlyjs()")


def test_a_cli_command_imports_only_its_own_module(tmp_path):
    # Importing every command (the training config, the recorder, the script adapter) cost
    # `check` 70 ms before it read a byte; `mindspeed-prof --help` still lists them all.
    modules = imported_after("from mindspeed_prof import cli\n"
                             f"cli.main(['check', {str(tmp_path)!r}, '--json'])")
    assert "mindspeed_prof.commands.check" in modules
    others = ("mindspeed_prof.commands.show_config", "mindspeed_prof.commands.adapt_script",
              "mindspeed_prof.arguments", "mindspeed_prof.recording.recorder", "mindspeed_prof.script")
    assert [m for m in others if m in modules] == []


def test_the_readers_never_make_pyarrow_import_pandas(tmp_path):
    # pyarrow imports pandas (145 ms, when installed) the first time an array meets Python
    # objects. A stand-in pandas on the path records whether anyone imported it.
    fake = tmp_path / "site" / "pandas"
    fake.mkdir(parents=True)
    marker = tmp_path / "pandas_imported"
    (fake / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n__version__ = '2.2.0'\n")
    modules = imported_after(f"sys.path.insert(0, {str(fake.parent)!r})\n"
                             "from mindspeed_prof.output.summary import aggregate\n"
                             "from mindspeed_prof.output.check import file as filecheck\n"
                             "aggregate.load_parsers()\nfilecheck.load_parsers()\n"
                             "import pyarrow as pa\npa.array([1.5]).to_numpy()\n"
                             "pa.array(['x']).to_pylist()")
    assert "pyarrow" in modules
    assert not marker.exists()
    imported_after(f"sys.path.insert(0, {str(fake.parent)!r})\nimport pandas")
    assert marker.exists()  # the stand-in works: the assertion above could fail


# The package's layers (DESIGN §1/§6), lowest first: the values of what to profile, what starts
# windows at run time, the window recorder, the drivers that count units, the host touch points.
# Each imports only the layers below it; checked on the source, statically, so a violation is
# named with its file whatever is installed.
CHAIN = ("config", "control", "recording", "drivers", "patches")
# Shared leaves under the chain: everything may use them, they use nothing above `config`.
LEAVES = {"errors": (), "log": (), "version": (), "manifest_schema": (), "layout": ("config",),
          "backends": ("config", "layout", "errors", "log")}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def package_imports():
    """{(importing group, imported group): [file, ...]} for every import inside the product."""
    import ast
    import collections
    import glob

    found = collections.defaultdict(list)
    # arguments/ and patches/ are walked through their links inside the package
    for folder, package in [("mindspeed_prof", "mindspeed_prof")]:
        for path in glob.glob(os.path.join(REPO, folder, "**", "*.py"), recursive=True):
            relative = os.path.relpath(path, os.path.join(REPO, folder))[:-3].replace(os.sep, ".")
            module = f"{package}.{relative}".removesuffix(".__init__")
            own = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
            for node in ast.walk(ast.parse(open(path).read())):
                targets = []
                if isinstance(node, ast.ImportFrom):
                    base = own.split(".")[: len(own.split(".")) - node.level + 1] if node.level \
                        else []
                    target = ".".join(base + ([node.module] if node.module else []))
                    if target == "mindspeed_prof":
                        targets = [f"{target}.{alias.name}" for alias in node.names]
                    else:
                        targets = [target]
                elif isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                for target in targets:
                    if target.startswith("mindspeed_prof."):
                        pair = ((module.split(".") + ["__init__"])[1], target.split(".")[1])
                        if pair[0] != pair[1]:
                            found[pair].append(os.path.relpath(path, REPO))
    return found


def test_each_layer_imports_only_the_layers_below_it():
    edges = package_imports()
    upward = {f"{low} -> {high}": files for (low, high), files in edges.items()
              if low in CHAIN and high in CHAIN and CHAIN.index(high) > CHAIN.index(low)}
    assert upward == {}
    # the rule could fail: the layers do import downward
    assert ("recording", "control") in edges and ("drivers", "recording") in edges
    assert ("patches", "drivers") in edges and ("control", "config") in edges


def test_the_shared_leaves_import_nothing_above_the_values():
    edges = package_imports()
    wrong = {f"{low} -> {high}": files for (low, high), files in edges.items()
             if low in LEAVES and high not in LEAVES[low]}
    assert wrong == {}


def test_the_package_root_keeps_entry_points_and_shared_leaves_only():
    modules = sorted(name for name in os.listdir(os.path.join(REPO, "mindspeed_prof"))
                     if name.endswith(".py"))
    assert len(modules) <= 12, modules
    for folder in sorted(os.listdir(os.path.join(REPO, "mindspeed_prof"))):
        init = os.path.join(REPO, "mindspeed_prof", folder, "__init__.py")
        if os.path.isdir(os.path.dirname(init)) and not folder.startswith("__"):
            with open(init) as handle:
                assert handle.read().lstrip().startswith('"""'), f"{folder}/ says what it holds"


def test_the_imports_users_write_still_work():
    modules = imported_after(
        "import mindspeed_prof\n"
        "from mindspeed_prof import ProfilerConfig, profile, role_profiler, ProfilerManager\n"
        "from mindspeed_prof.config import ProfilerConfig as Same\n"
        "assert Same is ProfilerConfig\n"
        "from mindspeed_prof.manager import ProfilerManager as M\n"
        "import mindspeed_prof.launch, mindspeed_prof.loop, mindspeed_prof.rl\n"
        "from mindspeed_prof.integrations.verl import TESTED_VERSIONS, UnknownVerlShape\n"
        "from mindspeed_prof.integrations.verl import settings, steps, shape\n"
        "from mindspeed_prof.arguments import add_profile_args\n"
        "from mindspeed_prof.patches import activate")
    assert "mindspeed_prof.config.profiler_config" in modules


def test_only_arguments_and_patches_join_the_package_from_the_repository_top():
    # They are links inside the package (static tools follow them); the rest of the top
    # (tests/, benchmarks/, scripts/) is not part of it, as it is not in a wheel.
    for name in ("arguments", "patches"):
        link = os.path.join(REPO, "mindspeed_prof", name)
        assert os.path.islink(link) and os.readlink(link) == os.path.join("..", name)
    script = ("import importlib, json, mindspeed_prof.arguments, mindspeed_prof.patches\n"
              "found = []\n"
              "for name in ('tests', 'benchmarks', 'scripts', 'docs'):\n"
              "    try:\n"
              "        importlib.import_module('mindspeed_prof.' + name)\n"
              "        found.append(name)\n"
              "    except ImportError:\n"
              "        pass\n"
              "print(json.dumps([found, mindspeed_prof.arguments.__file__]))")
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True, cwd=REPO)
    found, arguments_file = json.loads(out.stdout)
    assert found == []
    assert os.path.realpath(arguments_file) == os.path.join(REPO, "arguments", "__init__.py")


def module_imports():
    """{module: modules of the package it imports, at any depth of its code}."""
    import ast
    import glob

    graph = {}
    for path in glob.glob(os.path.join(REPO, "mindspeed_prof", "**", "*.py"), recursive=True):
        relative = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
        module = relative.removesuffix(".__init__")
        own = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
        deps = set()
        tree = ast.parse(open(path).read())
        for node in ast.walk(tree):  # `if TYPE_CHECKING:` blocks run under the type checker only
            if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
                node.body = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = own.split(".")[: len(own.split(".")) - node.level + 1] if node.level \
                    else []
                target = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:  # `from . import x` imports the module x
                    named = f"{target}.{alias.name}"
                    folder = os.path.join(REPO, *named.split("."))
                    deps.add(named if os.path.exists(folder + ".py") or os.path.isdir(folder)
                             else target)
            elif isinstance(node, ast.Import):
                deps |= {alias.name for alias in node.names}
        graph[module] = {d for d in deps if d.startswith("mindspeed_prof.") and d != module}
    return graph


def cycles(graph):
    """The strongly connected groups of more than one module (Tarjan's, iteratively)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(root):
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
            elif child in graph and child not in index:
                index[child] = low[child] = counter[0]
                counter[0] += 1
                stack.append(child)
                on.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on:
                low[node] = min(low[node], index[child])

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_package_imports_one_way_with_no_circle():
    # The whole package, readers, recorder and patches alike, imports at any depth included
    # (a function-level import is still an arrow); imports only a type checker runs are not.
    graph = module_imports()
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]  # the finder finds one
    assert len(graph) > 200 and "mindspeed_prof.patches.dynamic_inference" in graph
    assert cycles(graph) == []


def private_reads(folder):
    """{file: [`name._attr` lines]}: a private attribute read off anything but self/cls (or
    the standard library's os._exit, sys._getframe)."""
    import ast
    import glob

    found = {}
    for path in sorted(glob.glob(os.path.join(REPO, "mindspeed_prof", folder, "*.py"))):
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__") \
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", "os", "sys")):
                found.setdefault(os.path.relpath(path, REPO), []).append(node.lineno)
    return found


def test_the_recorders_parts_and_the_control_read_no_other_objects_private_state():
    # shutdown.py, the poll and the window parts ask the recorder through public methods
    assert private_reads("recording") == {}
    assert private_reads("control") == {}
    assert "mindspeed_prof/patches/dynamic_control.py" in private_reads("patches")  # can fail
