"""Run the benchmarks and print one table: ``python benchmarks/run.py [--quick] [--only 1,3]``.

Each figure runs in a process of its own (one Megatron, one profiler, one CPU shim per process)
and reports rows: what was compared, the measured ratio or value, its spread, the target and
pass/MISS. ``--quick`` is a smoke mode (tiny sizes, a few repetitions): it shows that every
figure runs and prints, its numbers are not meant to meet the targets. Exit status: 0 every
target met, 1 some target missed, 2 some figure failed to run.
"""

import argparse
import concurrent.futures
import dataclasses
import importlib.metadata
import json
import os
import platform
import sys
import time

if __package__ in (None, ""):  # run as a script: benchmarks/ is sys.path[0], the repo is not
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import Row, run_worker  # noqa: E402

FIGURES = {
    1: ("off", "off: profiling not requested"),
    2: ("hook_cost", "armed, idle: the train_step hook"),
    3: ("in_window", "in the window: vs hand-written torch.profiler"),
    4: ("window_end", "window end: stop and export"),
    5: ("output_tools", "check + summary on >= 1 GB"),
    6: ("autoload", "autoload .pth at interpreter start-up"),
    7: ("window_end_stack", "window end of a 6-step shapes + stack window"),
    8: ("captures", "captures armed, no anomaly: the hook and the poll's collective"),
    9: ("report", "report beside check on the same files; its size at 1,024 ranks"),
    10: ("output_analysis", "timeline and diff beside check on the same files"),
    11: ("whatif", "whatif beside the paper's published analyzer"),
    12: ("waits", "the wait analysis beside summary on 64 ranks"),
}


def machine():
    """One line about where this ran."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = ""
    try:
        with open("/proc/meminfo") as handle:
            kib = int(next(line.split()[1] for line in handle if line.startswith("MemTotal")))
        memory = f", {kib / 2**20:.0f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        pass
    versions = []
    for name in ("torch", "megatron-core", "msprof-analyze"):
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return (f"{os.cpu_count()} x {cpu}{memory}; Python {platform.python_version()}, "
            f"{', '.join(versions)}")


def load():
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


# Figures that share one process (and one model) when both are asked for.
SHARED = {(3, 4): ("windows", "in the window and at its end")}


def run_figure(number, quick):
    module, title = FIGURES[number] if isinstance(number, int) else SHARED[number]
    label = str(number) if isinstance(number, int) else "+".join(map(str, number))
    started = time.monotonic()
    print(f"[{label}] {title} ...", file=sys.stderr, flush=True)
    try:
        rows = run_worker(module, ["--quick"] if quick else [])
    except Exception as exc:  # noqa: BLE001 - one broken figure must not hide the others
        rows = [Row(figure=f"{label} {module}", compared=title, value=float("nan"), unit="",
                    spread="", target="", ok=False, failed=True,
                    note=f"did not run: {_ends(str(exc))}")]
    print(f"[{label}] done in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return rows


def _ends(text, head=400, tail=2000):
    """The failed command (its start) and the cause (its end) of a long error."""
    return text if len(text) <= head + tail else f"{text[:head]}\n[...]\n{text[-tail:]}"


def run_figures(numbers, quick, jobs=1):
    """Rows of every figure, in figure order. ``jobs`` > 1 runs figures side by side, which
    disturbs their timings: for the smoke mode only."""
    units = list(numbers)
    for group in SHARED:
        if all(n in units for n in group):
            units[units.index(group[0])] = group
            for n in group[1:]:
                units.remove(n)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda n: run_figure(n, quick), units))
    return [row for rows in results for row in rows]


def table(rows):
    """Plain text: one line per row, then the notes."""
    head = ("#", "FIGURE", "COMPARED", "MEASURED", "SPREAD", "TARGET", "RESULT")
    lines = [(str(i), r.figure, r.compared, r.measured(), r.spread, r.target or "-", r.verdict)
             for i, r in enumerate(rows, 1)]
    widths = [max(len(str(x)) for x in column) for column in zip(head, *lines)]
    out = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip()
           for line in [head, *lines]]
    out.append("")
    out.extend(f"[{i}] {r.note}" for i, r in enumerate(rows, 1) if r.note)
    return "\n".join(out)


def markdown(rows):
    out = ["| # | figure | compared | measured | spread | target | result |",
           "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        cells = (str(i), r.figure, r.compared, r.measured(), r.spread, r.target or "-",
                 f"**{r.verdict}**" if r.ok is False else r.verdict)
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    out.append("")
    out.extend(f"{i}. {r.note}" for i, r in enumerate(rows, 1) if r.note)
    return "\n".join(out) + "\n"


def parse_only(text):
    try:
        numbers = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        numbers = []
    if not numbers or any(n not in FIGURES for n in numbers):
        raise argparse.ArgumentTypeError(
            f"--only {text}: give figure numbers from {min(FIGURES)}-{max(FIGURES)}, "
            f"comma-separated, e.g. --only 2,6")
    return numbers


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="benchmarks/run.py", description=__doc__.splitlines()[0],
        epilog="Figures: " + "; ".join(f"{n} {t}" for n, (_, t) in FIGURES.items()))
    parser.add_argument("--quick", action="store_true",
                        help="smoke mode: tiny sizes, checks that every figure runs and prints "
                             "(its numbers are not comparable with the targets)")
    parser.add_argument("--only", type=parse_only, default=sorted(FIGURES), metavar="N,N",
                        help="run only these figures (default: all)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="run N figures at once (with --quick only: side-by-side figures "
                             "disturb each other's timings)")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    options = parser.parse_args(argv)
    if options.jobs != 1 and not options.quick:
        parser.error("--jobs applies to --quick only: figures running side by side disturb "
                     "each other's timings")
    if options.jobs < 1:
        parser.error(f"--jobs {options.jobs} must be >= 1")

    started, load_before = time.monotonic(), load()
    rows = run_figures(options.only, options.quick, options.jobs)
    elapsed = time.monotonic() - started
    mode = ("quick smoke mode: numbers NOT comparable with the targets" if options.quick
            else "full run")
    header = (f"mindspeed_prof benchmarks ({mode}), {elapsed:.0f} s\nmachine: {machine()}\n"
              f"load average (1/5/15 min) before {load_before}, after {load()}\n")
    print(header)
    print(table(rows))
    if options.markdown:
        with open(options.markdown, "w") as handle:
            handle.write("\n".join(f"{line}  " for line in header.splitlines()) + "\n\n"
                         + markdown(rows))
    if options.json:
        with open(options.json, "w") as handle:
            json.dump([dataclasses.asdict(r) for r in rows], handle, indent=1)
    if any(r.failed for r in rows):
        return 2
    return 1 if any(r.ok is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
