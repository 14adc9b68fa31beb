"""Figure 1 (off): the launcher on a command line without ``--profile`` flags.

The harness's ``pretrain_gpt.py`` (CPU stand-in for megatron.training over real megatron-core,
the small GPT) trains as rank 0 of a world of 1, bare (A) and under ``python -m
mindspeed_prof.launch`` (B). A and B run at the same time, one core each, so whatever else loads
the machine loads both; pairs repeat, the one started first alternating. Compared:

* patched attributes: callables of the loaded megatron / torch.profiler modules that differ
  between the two processes, plus any carrying mindspeed_prof's patch mark, registry entries and
  import hooks (target 0);
* step time: per pair, B's median CPU time per iteration over A's (the process CPU time between
  successive training-log lines, which other load on the machine does not inflate); the figure
  is the median over pairs. The note gives the same ratio for the log's wall-clock "elapsed time
  per iteration". "Within noise" means within what pairs of two bare runs (A/A, run between the
  A/B pairs) show, and at least 1 %.

In full mode one more launcher run, with ``--profile`` on the last iteration, shows that the count
is not blind: it must find the patches that profiling installs.
"""

import concurrent.futures
import json
import os
import re
import socket
import subprocess
import sys
import tempfile

from .common import REPO, STANDIN_DIR, Row, clean_env, figure_main, median, spread_text

ENTRY = os.path.join(REPO, "benchmarks", "entries", "fingerprinted_pretrain.py")
STEP_RE = re.compile(r"elapsed time per iteration \(ms\): ([0-9.]+)")
SKIP_FIRST = 3  # the first iterations warm up allocators and caches


def _port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _train(launcher, iterations, tmp, index, extra=()):
    sys.path.insert(0, os.path.join(REPO, "tests", "harness"))
    from launch import default_args

    out = os.path.join(tmp, f"fingerprint{index}.json")
    prefix = ["-m", "mindspeed_prof.launch"] if launcher else []
    command = [sys.executable, *prefix, ENTRY, *default_args(train_iters=iterations),
               *map(str, extra)]
    env = clean_env(PYTHONPATH=os.pathsep.join(filter(None, [STANDIN_DIR,
                                                             os.environ.get("PYTHONPATH")])),
                    RANK=0, WORLD_SIZE=1, LOCAL_RANK=0, MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=_port(), BENCH_FINGERPRINT_OUT=out)
    done = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    steps = [float(m) for m in STEP_RE.findall(done.stdout)]
    if done.returncode != 0 or len(steps) != iterations:
        raise RuntimeError(f"{' '.join(command)} failed (exit {done.returncode}, "
                           f"{len(steps)} steps logged)\n{done.stdout[-2000:]}\n"
                           f"{done.stderr[-3000:]}")
    with open(out) as handle:
        fingerprint = json.load(handle)
    return {"steps": steps[SKIP_FIRST:], "cpu": fingerprint.pop("step_cpu_ns")[SKIP_FIRST:],
            "fingerprint": fingerprint}


def _patched(bare, launched):
    """Attributes that differ from the bare process, or that are ours, plus registry/hooks."""
    a, b = bare["attributes"], launched["attributes"]
    differing = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    marked = sorted(set(launched["marked"]) - set(differing))
    return differing + marked, launched["registry"], len(launched["meta_path"])


def _side_by_side(first, second, iterations, tmp, tag):
    """Two trainings at once; ``first``/``second`` say whether each runs under the launcher.
    Returns them in that order."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(_train, launcher, iterations, tmp, f"{tag}{k}")
                   for k, launcher in enumerate((first, second))]
        return [f.result() for f in futures]


def _pair_ratio(a, b, key="cpu"):
    return median(b[key]) / median(a[key])


def measure(quick=False):
    with tempfile.TemporaryDirectory(prefix="mindspeed_prof_bench_off_") as tmp:
        return _measure(quick, tmp)


def _measure(quick, tmp):
    pairs, aa_pairs, iterations = (1, 0, 8) if quick else (6, 3, 40)
    if not quick:
        _side_by_side(False, True, iterations, tmp, "warmup")  # caches, bytecode
    bare_runs, launched_runs, ratios, wall_ratios, aa_ratios = [], [], [], [], []
    for i in range(pairs):
        launched_first = i % 2 == 1
        runs = _side_by_side(launched_first, not launched_first, iterations, tmp, f"ab{i}")
        bare, launched = runs[::-1] if launched_first else runs
        bare_runs.append(bare)
        launched_runs.append(launched)
        ratios.append(_pair_ratio(bare, launched))
        wall_ratios.append(_pair_ratio(bare, launched, "steps"))
        if i < aa_pairs:
            aa_ratios.append(_pair_ratio(*_side_by_side(False, False, iterations, tmp, f"aa{i}")))

    reference = bare_runs[0]["fingerprint"]
    counts = []
    for run in launched_runs:
        names, registry, hooks = _patched(reference, run["fingerprint"])
        counts.append((len(names) + registry + hooks, names, registry, hooks))
    # Bare runs against each other: differences there would be nondeterminism, not patches.
    baseline = max(len(_patched(reference, r["fingerprint"])[0]) for r in bare_runs)
    worst = max(counts, key=lambda c: c[0])
    detail = (f"{len(reference['attributes'])} callables compared; bare-vs-bare differences "
              f"{baseline}; registry entries {worst[2]}, import hooks {worst[3]}")
    if worst[1]:
        detail += f"; e.g. {', '.join(worst[1][:4])}"
    if not quick:
        probe = _train(True, iterations, tmp, "probe", extra=(
            "--profile", "--profile-step-start", iterations, "--profile-step-end",
            iterations + 1, "--profile-save-path", os.path.join(tmp, "profile")))
        names, registry, hooks = _patched(reference, probe["fingerprint"])
        detail += (f"; the same count with --profile: "
                   f"{len(names) + registry + hooks} ({registry} registry entries)")
    rows = [Row(figure="1 off", compared="patched attributes: launcher without --profile vs bare",
                value=worst[0], unit="count", spread=f"{len(launched_runs)} runs",
                target="0", ok=worst[0] == 0, note=detail)]

    ratio = median(ratios)
    noise = max([0.01] + [abs(r - 1) for r in aa_ratios])
    aa_text = (f"A/A pairs {', '.join(f'{r:.3f}' for r in aa_ratios)}" if aa_ratios
               else "no A/A pairs in quick mode")
    rows.append(Row(
        figure="1 off", compared="CPU time per step: launcher without --profile vs bare loop",
        value=ratio, unit="x", spread=spread_text(ratios), target="1.00 +- noise",
        ok=abs(ratio - 1) <= noise,
        note=(f"{pairs} concurrent process pairs x {iterations - SKIP_FIRST} steps; bare step "
              f"{median([median(r['cpu']) for r in bare_runs]) / 1e6:.1f} ms CPU; noise +-"
              f"{noise * 100:.1f} % ({aa_text}; floor 1 %); wall-clock ratio "
              f"{median(wall_ratios):.3f} ({spread_text(wall_ratios)})")))
    return rows


if __name__ == "__main__":
    figure_main(measure, __doc__)
