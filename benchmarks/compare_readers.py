"""Old and new readers on the same inputs: every verdict and number, compared byte for byte.

    python -m benchmarks.compare_readers OLD_CHECKOUT [--keep DIR]

Builds case folders from the test data (tests/output_fixtures: the real Ascend samples as
captures of one and two ranks, a db export, a torch trace, unparsed and unstopped captures,
manifests) and damages copies of every capture file the ways real runs do (truncated at five
points, emptied, bytes flipped with four seeds, overwritten with garbage), plus the CSV and
trace oddities the readers handle (CRLF, BOM, NUL, Latin-1, an open quote, ragged rows, NaN,
big integers, trailing data, nesting). Then ``check --json``, ``check``, ``summary --json``,
``summary --csv --top 1000`` and ``summary`` run over every case with OLD_CHECKOUT's readers
and with this checkout's twice: with the cache off, and from a cache that the same commands
filled just before (every file remembered, however small or recent). Prints each difference.
Exit 0 when there is none.
"""

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

from .common import REPO

COMMANDS = (("check", "--json"), ("check",), ("summary", "--json"),
            ("summary", "--csv", "--top", "1000"), ("summary",))
DAMAGE = (("cut1", 0.01), ("cut30", 0.3), ("cut50", 0.5), ("cut70", 0.7), ("cut99", 0.99))


def build_cases(root):
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from output_fixtures import corrupt, samples
    from output_fixtures.torch_traces import torch_trace

    cases = {}

    def case(name):
        path = os.path.join(root, name)
        os.makedirs(path)
        cases[name] = path
        return path

    samples.two_ranks(case("two_ranks"))
    samples.npu_capture(case("one_rank"), 0)
    samples.db_capture(case("db"), 0)
    samples.npu_capture(case("unparsed"), 0, raw=True, parsed=False)
    samples.npu_capture(case("not_stopped"), 0, info=None)
    samples.npu_capture(case("unranked_info"), 3, info="unranked")
    samples.npu_capture(case("no_op_statistic"), 0, op_statistic=False)
    with_manifest = case("manifest_missing_rank")
    samples.two_ranks(with_manifest)
    samples.write_manifest(with_manifest, 0, selected_ranks=[0, 1, 2])
    torch_trace(case("torch"), rank=0)
    _issue_19_cases(case)
    base = samples.npu_capture(tempfile.mkdtemp(dir=root), 0)
    files = sorted(os.path.relpath(os.path.join(d, f), base) for d, _, fs in os.walk(base)
                   for f in fs)
    # The sample's tables are small, read by the csv module; grown past SMALL_TABLE_BYTES, the
    # same tables go through pyarrow: both routes meet every damage and oddity.
    grown = _grown(samples.npu_capture(tempfile.mkdtemp(dir=root), 0), samples.OUTPUT)
    for prefix, capture, rels in (("", base, files), ("grown.", grown, [
            os.path.join(samples.OUTPUT, name) for name in GROWN])):
        for rel in rels:
            tag = prefix + rel.replace(os.sep, "_")
            for label, keep in DAMAGE:
                target = _copy(capture, case(f"{tag}.{label}"))
                corrupt.truncate(os.path.join(target, rel), keep)
            corrupt.zero_bytes(os.path.join(_copy(capture, case(f"{tag}.empty")), rel))
            for seed in range(4):
                corrupt.flip_bytes(os.path.join(_copy(capture, case(f"{tag}.flip{seed}")), rel),
                                   seed)
            corrupt.write_bytes(os.path.join(_copy(capture, case(f"{tag}.garbage")), rel),
                                os.urandom(4096))
        for label, edit in _oddities():
            path = _copy(capture, case(f"{prefix}odd.{label}"))
            edit(os.path.join(path, samples.OUTPUT))
    cases["grown"] = os.path.dirname(grown)
    trace_dir = cases["torch"]
    [trace] = [f for f in os.listdir(trace_dir) if f.endswith(".json")]
    for label, keep in DAMAGE:
        target = case(f"torch.{label}")
        shutil.copy(os.path.join(trace_dir, trace), target)
        corrupt.truncate(os.path.join(target, trace), keep)
    for seed in range(4):
        target = case(f"torch.flip{seed}")
        shutil.copy(os.path.join(trace_dir, trace), target)
        corrupt.flip_bytes(os.path.join(target, trace), seed)
    target = case("torch.gzip")
    with open(os.path.join(trace_dir, trace), "rb") as src, \
            gzip.open(os.path.join(target, trace + ".gz"), "wb") as dst:
        shutil.copyfileobj(src, dst)
    return cases


def _issue_19_cases(case):
    """What issue 19 changed on purpose: two jobs in one save path (the newer on fewer ranks),
    a db open elsewhere (an empty -wal, a -shm) or missing tables, two backends on one rank."""
    import sqlite3

    from output_fixtures import samples
    from output_fixtures.torch_traces import torch_trace

    runs = case("two_runs_fewer_ranks")
    start = 1_700_000_000 * 10**9
    for run_id, ranks, started in (("job-a", (0, 1), start), ("job-b", (0,), start + 10**11)):
        for rank in ranks:
            trace = torch_trace(os.path.join(runs, run_id), rank=rank, start=2, end=4)
            samples.write_run_manifest(runs, rank, run_id, started, [trace],
                                       selected_ranks=list(ranks))
    database = os.path.join(samples.db_capture(case("db_open_elsewhere"), 0), samples.OUTPUT,
                            "ascend_pytorch_profiler_0.db")
    open(database + "-wal", "wb").close()
    with open(database + "-shm", "wb") as handle:
        handle.write(bytes(32768))
    database = os.path.join(samples.db_capture(case("db_tables_dropped"), 0), samples.OUTPUT,
                            "ascend_pytorch_profiler_0.db")
    db = sqlite3.connect(database)
    db.executescript("DROP TABLE TASK; DROP TABLE META_DATA;")
    db.close()
    both = case("two_backends")
    samples.npu_capture(both, 0)
    torch_trace(both, rank=0)


GROWN = ("kernel_details.csv", "step_trace_time.csv")


def _grown(capture, output):
    """``capture`` with its GROWN tables' rows repeated past 2x SMALL_TABLE_BYTES."""
    from mindspeed_prof.output.read.csvrows import SMALL_TABLE_BYTES
    from output_fixtures import samples

    for name in GROWN:
        samples.grow_table(os.path.join(capture, output, name), 2 * SMALL_TABLE_BYTES)
    return capture


def _copy(base, target):
    shutil.rmtree(target)
    shutil.copytree(base, os.path.join(target, os.path.basename(base)))
    return os.path.join(target, os.path.basename(base))


def _edit(name, change):
    def edit(out):
        path = os.path.join(out, name)
        with open(path, "rb") as handle:
            data = handle.read()
        with open(path, "wb") as handle:
            handle.write(change(data))
    return edit


def _oddities():
    kd, tv = "kernel_details.csv", "trace_view.json"
    ragged = lambda d: d.replace(b"\n", b",extra\n", 3)  # noqa: E731
    yield "csv_crlf", _edit(kd, lambda d: d.replace(b"\n", b"\r\n"))
    yield "csv_bom", _edit(kd, lambda d: b"\xef\xbb\xbf" + d)
    yield "csv_nul", _edit(kd, lambda d: d[:len(d) // 2] + b"\x00" + d[len(d) // 2:])
    yield "csv_latin1", _edit(kd, lambda d: d.replace(b"Cast", b"C\xe4st", 1))
    yield "csv_open_quote", _edit(kd, lambda d: d.rstrip(b"\n") + b',"open\n')
    yield "csv_ragged", _edit(kd, ragged)
    yield "csv_lone_cr", _edit(kd, lambda d: d.replace(b"Cast", b"Ca\rst", 1))
    yield "csv_nan", _edit(kd, lambda d: d.replace(b",496.8508,", b",NaN,", 1))
    yield "csv_tab_duration", _edit(kd, lambda d: d.replace(b",496.8508,", b",496.8508\t,", 1))
    yield "csv_na_duration", _edit(kd, lambda d: d.replace(b",496.8508,", b",N/A,"))
    yield "step_trace_na", _edit("step_trace_time.csv", lambda d: d.replace(b",", b",N/A", 2))
    yield "trace_nan", _edit(tv, lambda d: d.replace(b'"dur":', b'"dur":NaN,"d2":', 3))
    yield "trace_bigint", _edit(tv, lambda d: d.replace(b'"pid":', b'"pid":123456789012345678901'
                                                                    b'234567890,"p2":', 2))
    yield "trace_bom", _edit(tv, lambda d: b"\xef\xbb\xbf" + d)
    yield "trace_trailing", _edit(tv, lambda d: d + b" trailing")
    yield "trace_nested", _edit(tv, lambda d: d.replace(b'"args":{', b'"args":{"deep":' + b"[" * 60
                                                        + b"]" * 60 + b",", 5))
    yield "trace_escapes", _edit(tv, lambda d: d.replace(b'"name":"', b'"name":"\\u00e9\\n\\"', 5))
    yield "trace_lone_surrogate", _edit(tv, lambda d: d.replace(b'"name":"', b'"name":"\\ud800',
                                                                1))


WORKER = r"""
import contextlib, io, json, os, sys
import mindspeed_prof
assert os.path.dirname(os.path.dirname(os.path.abspath(mindspeed_prof.__file__))) == os.getcwd(), (
    "the readers compared must be the checkout's own", mindspeed_prof.__file__)
from mindspeed_prof.cli import main
cases, commands, mode, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
if mode == "cached":
    from mindspeed_prof.output import cache
    cache.MIN_BYTES, cache.RACY_SECONDS = 1, 0.0
def run(path, command):
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main([command[0], path, *command[1:]])
        except SystemExit as exc:
            code = exc.code
    return [code, stdout.getvalue(), stderr.getvalue()]
results = {}
for name, path in sorted(cases.items()):
    if mode == "cached":
        for command in commands:
            run(path, command)  # fill the cache
    results[name] = {" ".join(c): run(path, c) for c in commands}
with open(out, "w") as handle:
    json.dump(results, handle)
"""


def run_readers(checkout, cases, mode, out, cache_dir):
    env = dict(os.environ, PYTHONPATH=checkout, MINDSPEED_PROF_CACHE=cache_dir if mode ==
               "cached" else "off")
    # cwd: `python -c` puts the working directory first on sys.path, ahead of PYTHONPATH; run
    # from this checkout's root (as `-m benchmarks.compare_readers` is), both sides would
    # import this checkout's readers and compare them with themselves
    subprocess.run([sys.executable, "-c", WORKER, json.dumps(cases), json.dumps(COMMANDS), mode,
                    out], env=env, check=True, cwd=checkout)
    with open(out) as handle:
        return json.load(handle)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="a checkout of the older readers")
    parser.add_argument("--keep", metavar="DIR", help="build the cases here and keep them")
    options = parser.parse_args(argv)
    root = options.keep or tempfile.mkdtemp(prefix="mindspeed_prof_compare_")
    try:
        cases = build_cases(os.path.join(root, "cases"))
        old = run_readers(os.path.abspath(options.old), cases, "off",
                          os.path.join(root, "old.json"), "")
        differences = 0
        for mode in ("off", "cached"):
            new = run_readers(REPO, cases, mode, os.path.join(root, f"new_{mode}.json"),
                              os.path.join(root, "cache"))
            for name in sorted(cases):
                for command, result in old[name].items():
                    if new[name][command] != result:
                        differences += 1
                        print(f"DIFFERENT ({mode}) {name}: {command}\n  old: {result}\n"
                              f"  new: {new[name][command]}")
        print(f"{len(cases)} cases x {len(COMMANDS)} commands, new readers with the cache off "
              f"and from a full cache: {differences} differences")
        return 1 if differences else 0
    finally:
        if not options.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
