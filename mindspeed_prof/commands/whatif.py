"""``mindspeed-prof whatif DIR|TABLE.parquet [--meta META.yaml] [--json]``.

ByteDance's what-if analysis of stragglers (OSDI'25): every step replayed on the pipeline
schedule's dependency model, as recorded without launch delays and with every op at its type's
typical duration; the slowdown S a step pays to its stragglers, attributed to op types, DP ranks
and PP stages, and the worker (M_W) and stage (M_S) imbalance metrics, in words ("if stage 3 ran
like the others, a step would take X ms (-Y %)"). DIR is a profiled run whose windows recorded
the schedule marks (or a folder written by ``export --format straggler-analysis``); TABLE is a
table in the paper's schema (the published artifact's traces too). Exit 0 when analysed, 2 on a
usage error (no schedule marks in DIR included: the message says how to record them).
"""

import os

HELP = ("What stragglers cost a step (ByteDance's what-if analysis): the slowdown S, attributed "
        "to op types, DP ranks and PP stages, and the worker/stage imbalance M_W and M_S.")


def add_arguments(parser):
    parser.add_argument("source", metavar="DIR|TABLE.parquet",
                        help="A profiled run's --profile-save-path (or one window folder) "
                             "recorded with the schedule marks, a folder written by `export "
                             "--format straggler-analysis`, or one table in that schema.")
    parser.add_argument("--meta", metavar="META.yaml", default=None,
                        help="The job's metadata (trial_name, dp_size, pp_size, tp_size, "
                             "dsp_size, vpp_size, world_size) for a TABLE; default "
                             "meta-NAME.yaml beside trace-NAME.parquet, else read off the table.")
    parser.add_argument("--json", action="store_true", help="Machine-readable JSON (strict).")


def run(args):
    from mindspeed_prof.output.render import safe

    with safe.usage_errors():
        return _run(args)


def _run(args):
    from mindspeed_prof.output.deps import as_usage_error

    with as_usage_error():
        from mindspeed_prof.output.whatif import analysis, render, source

    table, meta, notes = source.load(args.source, args.meta)
    result = analysis.analyse(table, meta, args.source)
    result.notes[:0] = notes
    if args.json:
        from mindspeed_prof.output.render import jsontext

        # strict JSON, as every --json: a non-finite number is null, and counted
        print(jsontext.dumps(render.as_dict(result, os.path.abspath(args.source))))
    else:
        print(render.text(result, args.source))
    return 0

