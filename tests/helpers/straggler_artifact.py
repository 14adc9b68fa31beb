"""The published what-if analyzer (ByteDance-Seed/StragglerAnalysis), where a checkout is named:
STRAGGLER_ANALYSIS_PATH (the checkout) and STRAGGLER_ANALYSIS_PYTHON (a Python where its analyzer
runs: pandas<2.2, numpy<2, pyarrow<16). Nothing of it is in this repository."""

import json
import os
import subprocess

CHECKOUT = os.environ.get("STRAGGLER_ANALYSIS_PATH")
PYTHON = os.environ.get("STRAGGLER_ANALYSIS_PYTHON")


def their_result(table_dir, dump_dir):
    """Its analyzer's result on the table and metadata ``export`` wrote into ``table_dir``."""
    (trace,) = table_dir.glob("trace-*.parquet")
    (meta,) = table_dir.glob("meta-*.yaml")
    env = dict(os.environ, PYTHONPATH=f"{CHECKOUT}{os.pathsep}{os.path.join(CHECKOUT, 'analyzer')}")
    done = subprocess.run([PYTHON, "analyzer/wia.py", "--trace", str(trace), "--metadata",
                           str(meta), "--dump-dir", str(dump_dir)], cwd=CHECKOUT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (result,) = dump_dir.glob("*.json")
    return json.loads(result.read_text())
