"""Figure 6 (autoload): interpreter start-up with the ``.pth`` hook installed vs without it.

The package is built as a wheel from a copy of this checkout and installed, as a user's
non-editable ``pip install`` would, into throwaway venvs under the temp folder (made with
``--without-pip`` from the base interpreter). ``python -c pass`` then starts from a venv
alternately with ``mindspeed_prof_autoload.pth`` in its site-packages and with the file renamed
away, so the two start-ups differ only by the presence of that one file (the package itself is
installed in both). The rename happens between timed runs. Two venvs:

* typical: also holds setuptools' ``distutils-precedence.pth`` (and its ``_distutils_hack``),
  which every venv with setuptools has; it runs code before ours;
* bare: ours is the only ``.pth`` that runs code, so it also pays for the first compile of the
  process (site.py exec()s ``.pth`` lines; the parser's first use costs ~60 us).
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from .common import REPO, Row, emit_rows, interleave, median, now_ns, spread_text

TARGET = 1.01
PTH = "mindspeed_prof_autoload.pth"
SOURCES = ("setup.py", "pyproject.toml", "README.md", "mindspeed_prof", "arguments", "patches")
SETUPTOOLS_HOOK = ("distutils-precedence.pth", "_distutils_hack")


def _run(command, **kwargs):
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed (exit {done.returncode})\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done


def build_wheel(tmp):
    """A wheel of this checkout, built from a copy (no build/ or egg-info in the checkout)."""
    source = os.path.join(tmp, "src")
    os.makedirs(source)
    for name in SOURCES:
        path = os.path.join(REPO, name)
        if os.path.isdir(path):
            shutil.copytree(path, os.path.join(source, name),
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(path, source)
    wheels = os.path.join(tmp, "wheels")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
          "-q", "-w", wheels, source])
    [wheel] = glob.glob(os.path.join(wheels, "mindspeed_prof-*.whl"))
    return wheel


def install_into_venv(tmp, wheel, name="venv", setuptools_hook=False):
    """``wheel`` installed into a new venv; returns (venv python, .pth path)."""
    venv = os.path.join(tmp, name)
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", "--without-pip", venv])
    python = os.path.join(venv, "bin", "python")
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
                ).stdout.strip()
    _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
          site, wheel])
    ours = sysconfig.get_paths()["purelib"]
    if setuptools_hook:
        for item in SETUPTOOLS_HOOK:
            path = os.path.join(ours, item)
            if not os.path.exists(path):
                raise RuntimeError(f"setuptools' {item} is not in {ours}: no typical venv to copy")
            (shutil.copytree if os.path.isdir(path) else shutil.copy)(path,
                                                                      os.path.join(site, item))
    # The package's dependencies (torch, yaml) from this environment, behind the installed copy;
    # a path line, present in both A and B, that runs no code.
    with open(os.path.join(site, "zz_dependencies.pth"), "w") as handle:
        handle.write(ours + "\n")
    pth = os.path.join(site, PTH)
    if not os.path.isfile(pth):
        raise RuntimeError(f"the wheel installed no {PTH} into {site}")
    return python, pth


def _start_ups(python, pth, pairs, env):
    """(without, with) start-up times of ``python -c pass``, the .pth toggled between runs."""
    parked = pth + ".off"

    def start(with_pth):
        def run(i):
            if with_pth and os.path.exists(parked):
                os.rename(parked, pth)
            elif not with_pth and os.path.exists(pth):
                os.rename(pth, parked)
            begin = now_ns()
            subprocess.run([python, "-c", "pass"], env=env, check=True)
            return now_ns() - begin
        return run

    without, with_hook = interleave(start(False), start(True), pairs, warmup=5)
    if os.path.exists(parked):
        os.rename(parked, pth)
    return without, with_hook


def measure(quick=False, pth_file=None):
    """``pth_file``: time this file in place of the installed hook (what-if for a new line)."""
    pairs = 30 if quick else 300
    tmp = tempfile.mkdtemp(prefix="mindspeed_prof_bench_autoload_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "MINDSPEED_PROF_"))}
    what = f"{os.path.basename(pth_file)} (what-if)" if pth_file else "the .pth hook"
    rows = []
    try:
        wheel = build_wheel(tmp)
        for name, label, hook in (("typical", "venv with setuptools' .pth", True),
                                  ("bare", "bare venv, no other code .pth", False)):
            python, pth = install_into_venv(tmp, wheel, name, setuptools_hook=hook)
            if pth_file:
                shutil.copy(pth_file, pth)
            probe = "import sys; print(sum(m.startswith('mindspeed_prof') for m in sys.modules))"
            idle, armed = (_run([python, "-c", probe, *flag], env=env).stdout.strip()
                           for flag in ((), ("--profile",)))
            without, with_hook = _start_ups(python, pth, pairs, env)
            ratio = median(with_hook) / median(without)
            added_us = (median(with_hook) - median(without)) / 1000
            rows.append(Row(
                figure="6 autoload",
                compared=f"`python -c pass` start-up, {label}: {what} installed vs not",
                value=ratio, unit="x",
                spread=spread_text([b / a for a, b in zip(without, with_hook)]),
                target=f"<= {TARGET}", ok=ratio <= TARGET,
                note=(f"{pairs} interleaved start-ups each; without {median(without) / 1e6:.1f} "
                      f"ms, difference {added_us:+.0f} us; mindspeed_prof modules the hook "
                      f"loads: {idle} without --profile, {armed} with it")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pth", metavar="FILE",
                        help="time FILE in place of the packaged .pth (to try a shorter line)")
    options = parser.parse_args()
    emit_rows(measure(options.quick, options.pth))


if __name__ == "__main__":
    main()
