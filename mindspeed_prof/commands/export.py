"""``mindspeed-prof export DIR --format straggler-analysis -o OUT/``.

The per-op table of a profiled run (one row per op of the pipeline schedule: dp_rank, stage,
rank, step, optype, start_ts, duration, seq_id, mc, gmc, mb_id, the column types of the paper's
published analyzer, ByteDance-Seed/StragglerAnalysis) as ``OUT/trace-NAME.parquet``, and the
job's metadata as ``OUT/meta-NAME.yaml``, so that analyzer runs on our captures unchanged
(``python analyzer/wia.py --trace OUT/trace-NAME.parquet --metadata OUT/meta-NAME.yaml``), and
``mindspeed-prof whatif OUT/`` reads them back. The rows come from the schedule marks every
window records; a capture without them is a usage error (exit 2) naming how to get them.
"""

import os
import re

from mindspeed_prof.errors import ConfigError

HELP = ("Write the per-op table of DIR's pipeline schedule (Parquet) and the job's metadata "
        "(YAML) in the schema of the straggler what-if analyzer (ByteDance, OSDI'25).")
FORMATS = ("straggler-analysis",)


def add_arguments(parser):
    parser.add_argument("directory", metavar="DIR",
                        help="The --profile-save-path of the run, or one window folder, "
                             "recorded with the schedule marks.")
    parser.add_argument("--format", choices=FORMATS, required=True,
                        help="The table's schema: straggler-analysis (the paper's artifact).")
    parser.add_argument("-o", "--output", metavar="OUT/", required=True,
                        help="The folder to write trace-NAME.parquet and meta-NAME.yaml into "
                             "(made when missing).")


def run(args):
    from mindspeed_prof.output.render import safe

    with safe.usage_errors():
        return _run(args)


def _run(args):
    import yaml

    from mindspeed_prof.output.deps import as_usage_error
    from mindspeed_prof.output.render import safe

    with as_usage_error():
        from mindspeed_prof.output.whatif.capture import from_capture
        from mindspeed_prof.output.whatif.table import write_parquet

    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise ConfigError(f"-o {args.output} is a file; give a folder (it is made when "
                          f"missing).")
    if not os.path.isdir(args.directory):
        raise ConfigError(f"DIR {args.directory} is not a directory; give the "
                          f"--profile-save-path of the profiled run.")
    table, meta, notes = from_capture(args.directory)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", meta.trial_name)[:64].strip(".") or "run"
    trace = os.path.join(args.output, f"trace-{name}.parquet")
    meta_path = os.path.join(args.output, f"meta-{name}.yaml")
    data = meta.as_dict()
    data["trial_name"] = name
    try:
        os.makedirs(args.output, exist_ok=True)
        write_parquet(table, trace)
        with open(meta_path, "w", encoding="utf-8") as handle:
            yaml.safe_dump(data, handle, sort_keys=False)
    except OSError as exc:  # /proc, a read-only folder, a full disk: one line
        from mindspeed_prof.output.outfile import cannot_write

        raise cannot_write("-o", args.output, exc, example="export/") from None
    print(safe.lines(f"{len(table)} ops of {len(set(table.step.tolist()))} steps "
                     f"(DP {meta.dp_size} x PP {meta.pp_size}) written to {trace}\n"
                     f"job metadata written to {meta_path}"))
    for note in notes:
        print(safe.lines(f"note: {note}"))
    return 0
