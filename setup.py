"""Packaging for mindspeed_prof.

``arguments/`` and ``patches/`` live at the top of the repository (one place for every flag, one
place for every Megatron/MindSpeed touch point) and are linked into the package
(``mindspeed_prof/arguments``, ``mindspeed_prof/patches``), so they install inside it and nothing
named ``arguments`` or ``patches`` lands at the top of site-packages. The autoload hook is a ``.pth``
file copied into the wheel's root by ``build_py``, which is how it reaches site-packages in a
regular (non-editable) install.
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

PTH_FILE = "mindspeed_prof_autoload.pth"
HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithAutoload(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, PTH_FILE)
        self.copy_file(os.path.join(HERE, "mindspeed_prof", "autoload", PTH_FILE), target,
                       preserve_mode=0)

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, PTH_FILE)]


# What both test legs import beside their megatron-core.
TEST_COMMON = [
    "pytest",
    # pytest.ini runs the suite on 2 workers (-n 2; the e2e jobs on one of them: tests/conftest.py)
    "pytest-xdist",
    "hypothesis",
    # Megatron's text-generation server (tests/harness/inference) and its engine's progress bar;
    # megatron-core imports them lazily, so it does not require them.
    "flask",
    "flask-restful",
    "tqdm",
    # megatron-core 0.19's dynamic text-generation server (tests/harness/dynamic)
    "quart",
    "hypercorn",
    "pyzmq",
    "msgpack",
    # megatron-core's attention calls einops.rearrange; the wheel imports it optionally (a
    # clean 3.12 leg without it crashed every dynamic-engine forward with a None call)
    "einops",
]


# The timeline's event rewrite in C (mindspeed_prof/output/timeline/_eventpatch.c). Optional:
# where no compiler is found the build goes on without it and `timeline` runs its Python path.
# -ffp-contract=off: the rounding of ts (round(x, 3), as Python rounds) counts on each product
# being rounded where the source rounds it, never fused by the compiler.
EVENT_PATCH = Extension(
    "mindspeed_prof.output.timeline._eventpatch",
    sources=["mindspeed_prof/output/timeline/_eventpatch.c"],
    depends=["mindspeed_prof/output/timeline/_strscan.h"],  # rebuilt when it changes; in the sdist
    extra_compile_args=[] if sys.platform == "win32" else ["-O2", "-ffp-contract=off"],
    optional=True,
)


def read_version():
    with open(os.path.join(HERE, "mindspeed_prof", "version.py")) as handle:
        scope = {}
        exec(handle.read(), scope)
        return scope["__version__"]


setup(
    name="mindspeed_prof",
    version=read_version(),
    description="NPU/torch profiling for Megatron-LM and MindSpeed training, driven by --profile* flags",
    long_description=open(os.path.join(HERE, "README.md")).read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=[
        "mindspeed_prof",
        "mindspeed_prof.autoload",
        "mindspeed_prof.backends",
        "mindspeed_prof.commands",
        "mindspeed_prof.config",
        "mindspeed_prof.control",
        "mindspeed_prof.drivers",
        "mindspeed_prof.integrations",
        "mindspeed_prof.integrations.verl",
        "mindspeed_prof.output",
        "mindspeed_prof.output.check",
        "mindspeed_prof.output.compare",
        "mindspeed_prof.output.job",
        "mindspeed_prof.output.memory",
        "mindspeed_prof.output.read",
        "mindspeed_prof.output.render",
        "mindspeed_prof.output.pipeline",
        "mindspeed_prof.output.summary",
        "mindspeed_prof.output.report",
        "mindspeed_prof.output.roles",
        "mindspeed_prof.output.timeline",
        "mindspeed_prof.output.waits",
        "mindspeed_prof.output.whatif",
        "mindspeed_prof.recording",
        "mindspeed_prof.script",
        "mindspeed_prof.arguments",
        "mindspeed_prof.patches",
    ],
    package_data={"mindspeed_prof.autoload": [PTH_FILE]},
    cmdclass={"build_py": BuildWithAutoload},
    ext_modules=[EVENT_PATCH],
    # pysimdjson, msgspec, pyarrow, numpy: the CLI's readers (check/summary); imported lazily,
    # never by the training side (tests/unit/project/test_layering.py). isal: `timeline`
    # compresses with ISA-L (3.6x zlib's speed, the same gzip format; without it timeline costs
    # 1.3-1.5x check's CPU after check instead of 1.0x: BENCHMARKS.md 10e), on the machines it
    # publishes wheels for (x86-64, aarch64: Kunpeng hosts); zlib elsewhere.
    install_requires=["torch", "pyyaml", "pysimdjson>=5", "msgspec>=0.18", "pyarrow>=14",
                      "numpy",
                      'isal>=1.0; platform_machine in "x86_64 AMD64 aarch64 arm64"'],
    extras_require={
        # What the demos import (scripts/demo_imports.py checks it before torchrun):
        # megatron-core; `mindspeed-prof report`, whose page embeds plotly.js (scripts/demo.sh);
        # Megatron's text-generation server, Flask and flask-restful, and its engine's progress
        # bar, tqdm (scripts/demo_inference.sh); and matplotlib for `summary --plot` on their
        # output.
        "demo": ["megatron-core==0.16.1", "matplotlib", "plotly>=5", "flask", "flask-restful",
                 "tqdm"],
        "plot": ["matplotlib"],
        # `mindspeed-prof report` embeds plotly.js in its page; plotly (~15 MB, with narwhals)
        # is imported by that command alone, so training images need not carry it
        "report": ["plotly>=5"],
        # ISA-L where the platform marker above leaves it out (kept for old install commands)
        "fast": ["isal>=1.0"],
        "test": ["megatron-core==0.16.1", "mypy", "msprof-analyze", "matplotlib", "plotly>=5",
                 *TEST_COMMON],
        # The Python 3.12 leg (scripts/test_current_megatron.sh): today's megatron-core, which
        # needs Python >= 3.12; plotly for the report page its wait-analysis test reads.
        "test-current": ["megatron-core==0.19.2", "plotly>=5", *TEST_COMMON],
    },
    entry_points={"console_scripts": ["mindspeed-prof = mindspeed_prof.cli:main"]},
)
