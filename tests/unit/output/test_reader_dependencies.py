"""A reader's parser that cannot be imported (a `pip install --no-deps`, a clashing conda build)
is named with the command that installs it, exit 2, and no file is called corrupt for it.

Each case hides one package behind a stand-in on sys.path whose import fails, in a fresh
interpreter (the test process has the real packages loaded already)."""

import os
import subprocess
import sys

import pytest

from mindspeed_prof.output.read.csvrows import SMALL_TABLE_BYTES
from output_fixtures import samples
from output_fixtures.torch_traces import torch_trace

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# (module hidden, the pip name the message must give, a capture that needs it, command);
# "npu_big": tables past csvrows.SMALL_TABLE_BYTES, which pyarrow reads (the csv module reads
# smaller ones: a capture of small tables needs no pyarrow for check)
CASES = [
    ("pyarrow", "pyarrow>=14", "npu_big", "check"),
    ("pyarrow", "pyarrow>=14", "npu", "summary"),
    ("numpy", "numpy", "npu", "summary"),
    ("simdjson", "pysimdjson>=5", "npu", "check"),
    ("simdjson", "pysimdjson>=5", "torch", "check"),
    ("msgspec", "msgspec>=0.18", "torch", "summary"),
]


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    root = tmp_path_factory.mktemp("deps")
    samples.two_ranks(root / "npu")
    samples.grow_table(os.path.join(samples.npu_capture(root / "npu_big", 0),
                                    "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"),
                       2 * SMALL_TABLE_BYTES)
    torch_trace(root / "torch", rank=0)
    return root


def hidden(tmp_path, module, error="ImportError"):
    """A folder whose ``module`` package raises ``error`` on import."""
    folder = tmp_path / f"hide_{module}"
    (folder / module).mkdir(parents=True)
    (folder / module / "__init__.py").write_text(
        f"raise {error}('stand-in: the real {module} is hidden by the test')\n")
    return folder


def cli(hide, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hide), REPO]),
               MINDSPEED_PROF_CACHE="off")
    return subprocess.run([sys.executable, "-m", "mindspeed_prof.cli", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("module, package, capture, command", CASES)
def test_a_missing_parser_is_named_with_its_install_command_and_exits_2(
        tmp_path, captures, module, package, capture, command):
    done = cli(hidden(tmp_path, module), command, captures / capture)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"needs the Python package '{package}'" in done.stderr
    assert f'pip install "{package}"' in done.stderr
    assert "corrupt" not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


def test_the_capture_that_needs_pyarrow_reads_well_with_it(captures):
    done = cli(captures / "no_such_folder", "check", captures / "npu_big")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "valid" in done.stdout


def test_a_broken_install_that_raises_something_else_on_import_is_named_too(tmp_path, captures):
    # a clashing conda build: the import itself fails with an AttributeError, not ImportError
    done = cli(hidden(tmp_path, "pyarrow", error="AttributeError"), "check",
               captures / "npu_big")
    assert done.returncode == 2
    assert "AttributeError: stand-in" in done.stderr and "pyarrow" in done.stderr
    assert "bug" not in done.stdout + done.stderr


def test_a_parser_the_capture_does_not_need_may_be_missing(tmp_path, captures):
    # a torch trace's summary reads with msgspec only: no pyarrow needed, none asked for
    done = cli(hidden(tmp_path, "pyarrow"), "summary", captures / "torch")
    assert done.returncode == 0, done.stderr
    assert "Step time" in done.stdout
