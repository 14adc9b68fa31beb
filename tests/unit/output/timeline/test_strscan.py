"""The search inside a JSON string that the C rewrite's first pass stands on
(``output/timeline/_strscan.h``), checked against its definition (``strscan_check.c``) on each
path this machine can build and run: the native compiler's vector path (SSE2 on x86-64, NEON on
aarch64), the table every other CPU runs, and aarch64's NEON under qemu-user where a cross
compiler and qemu are installed (Debian: ``gcc-aarch64-linux-gnu qemu-user``; many Ascend hosts
are aarch64, and CI runs on x86-64). A path that cannot be built here skips, saying why."""

import os
import platform
import shutil
import subprocess
import sysconfig

import pytest

from helpers.ccompiler import c_compiler
from mindspeed_prof.output.timeline import write

pytestmark = pytest.mark.slow  # each test runs a compiler and the program it built

HEADER_DIR = os.path.dirname(write.__file__)
CHECK = os.path.join(os.path.dirname(__file__), "strscan_check.c")
NATIVE = c_compiler()
NATIVE_PATH = {"x86_64": "sse2", "AMD64": "sse2", "aarch64": "neon", "arm64": "neon"}.get(
    platform.machine(), "table")

TARGETS = {
    "native vector path": ([NATIVE], [], NATIVE_PATH),
    "table": ([NATIVE, "-DSTRSCAN_NO_SIMD"], [], "table"),
    "aarch64 NEON under qemu": (["aarch64-linux-gnu-gcc", "-static"], ["qemu-aarch64"], "neon"),
}


@pytest.mark.parametrize("target", list(TARGETS))
def test_skip_plain_stops_where_json_says_on_every_path(tmp_path, target):
    compiler, runner, path = TARGETS[target]
    missing = [tool for tool in (compiler[0], *runner) if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{target}: {', '.join(missing)} not installed")
    exe = str(tmp_path / "strscan_check")
    subprocess.run([*compiler, "-O2", "-Wall", "-Werror", "-I", HEADER_DIR, CHECK, "-o", exe],
                   check=True, capture_output=True, timeout=120)
    done = subprocess.run([*runner, exe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    words = done.stdout.split()
    assert words[0] == "ok" and int(words[1]) > 1_500_000, done.stdout
    assert words[2] == path  # the path meant was the one compiled


def test_the_rewrite_builds_for_aarch64_without_a_warning(tmp_path):
    """The whole C rewrite, compiled for aarch64 (the object only: this machine's Python
    headers, of the same LP64 layout), with every warning an error: no x86-only code left
    outside its guard."""
    if shutil.which("aarch64-linux-gnu-gcc") is None:
        pytest.skip("aarch64-linux-gnu-gcc not installed")
    source = os.path.join(HEADER_DIR, "_eventpatch.c")
    done = subprocess.run(
        ["aarch64-linux-gnu-gcc", "-O2", "-ffp-contract=off", "-Wall", "-Werror", "-c",
         "-I", sysconfig.get_paths()["include"], source, "-o", str(tmp_path / "eventpatch.o")],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
