"""The manifest's schema, once: ``profile_manifest_rank{R}.json``'s fields, their types and meaning.

The recorder writes it (``recording/manifest.py``) and the readers judge a manifest against it
(``output/read/manifest_shape.py``); a field is added here or nowhere (``tests/unit/recording/
test_manifest_schema.py`` fails on a key the writer sets that this table lacks). A leaf: it imports
nothing, so the training side and the readers share it at no cost.
"""

from typing import Dict, NamedTuple, Tuple

VERSION = 1
STATUSES = ("armed", "running", "parsing", "unparsed", "complete", "cut", "failed", "incomplete")

_INT, _STR, _LIST, _DICT, _NONE = int, str, list, dict, type(None)


class Field(NamedTuple):
    types: Tuple[type, ...]
    meaning: str


FIELDS: Dict[str, Field] = {
    "schema": Field((_INT,), "this table's VERSION"),
    "tool": Field((_STR,), '"mindspeed_prof"'),
    "tool_version": Field((_STR,), "the writer's version"),
    "rank": Field((_INT,), "the global rank"),
    "world_size": Field((_INT, _NONE), "the job's ranks"),
    "local_rank": Field((_INT, _NONE), "the rank on its host"),
    "hostname": Field((_STR, _NONE), "the host"),
    "pid": Field((_INT, _NONE), "the process"),
    "run_id": Field((_STR, _NONE), "what the job's ranks share: torchrun's run id, else SLURM's "
                                   "job.step, else one agreed through the job's store, else "
                                   "host-pid"),
    "run_id_source": Field((_STR, _NONE), "where run_id came from: torchelastic | slurm | "
                                          "job-store | process (this rank's own, shared with no "
                                          "other); the readers go by it, never by run_id's "
                                          "spelling"),
    "selected_ranks": Field((_LIST, _NONE), "resolved global ranks of the job (null: unknown)"),
    "backend": Field((_STR, _NONE), '"npu" | "torch"'),
    "config": Field((_DICT, _NONE), "the ProfilerConfig as a dict"),
    "unit": Field((_STR, _NONE), 'what the windows count: "iteration", "request", "RL step", '
                                 '"engine step"'),
    "role": Field((_STR, _NONE), "the RL role that wrote it"),
    "stage": Field((_STR, _NONE), "the RL stage that wrote it"),
    "first_iteration": Field((_INT, _NONE), "the first unit this process ran (null: unknown)"),
    "train_iters": Field((_INT, _NONE), "the last unit it could run (null: unknown)"),
    "windows": Field((_LIST,), "one entry per profiler session (WINDOW_FIELDS)"),
    "planned": Field((_LIST,), "with a session per unit (requests, RL steps): one entry per "
                               "window the plan opened (PLANNED_FIELDS)"),
    "parallel": Field((_DICT, _NONE), "{tensor_model_parallel_size, ..., rank, world_size}"),
    "versions": Field((_DICT, _NONE), "{python, torch, torch_npu, cann, megatron_core, "
                                      "mindspeed}"),
    "status": Field((_STR,), "one of STATUSES (cut: every file written, but a window was cut "
                             "short)"),
    "exit": Field((_DICT, _NONE), "{reason, detail}: how the run ended (null: the process died "
                                  "before it could say, e.g. SIGKILL)"),
    "exit_events": Field((_DICT, _NONE), "{signals, children_ended, console_writes_lost}: what "
                                         "reached the process while it flushed"),
    "errors": Field((_LIST,), "[{time, phase, message}]"),
    "warnings": Field((_LIST,), "[{time, phase, message}]"),
    "files": Field((_LIST,), "every output path, relative to the save path"),
    "started_at": Field((_STR, _NONE), "when the rank armed (local time, seconds)"),
    "started_ns": Field((_INT, _NONE), "the same in ns: orders two runs that started in the "
                                       "same second"),
    "updated_at": Field((_STR, _NONE), "the last write"),
    "requests_served": Field((_INT,), "inference: requests this process started"),
    "units_run": Field((_INT,), "the dynamic engine: engine steps this process ran"),
    "last_unit": Field((_INT, _NONE), "the dynamic engine: the last engine step's number"),
    "window_cut": Field((_DICT, _NONE), "inference: {start, end, last_served} of a request "
                                        "window the server never completed"),
    "captures": Field((_DICT, _NONE), "with --profile-on-*: {rules, taken, not_captured, "
                                      "judged, ...}"),
    "memory_oom": Field((_LIST,), "out-of-memory events the memory history recorded"),
}

WINDOW_FIELDS: Dict[str, str] = {
    "start": "the first unit of the window",
    "end": "the first unit not in it (null: to the end)",
    "dir": "its folder, relative to the save path",
    "status": "running | complete | cut | failed",
    "iterations_recorded": "the units recorded, whatever the unit (the key keeps its first name)",
    "files": "its output paths",
    "cut": "{reason, in_progress} when the run ended inside the window: in_progress is the unit "
           "that had begun (its ProfilerStep is partial), null when none had",
    "never_ran": "a unit the loop began (its profiler step opened) that never ran: left out of "
                 "torch traces; check discounts it in NPU ones",
    "started_by": "who asked for the window: {by: flags | trigger | capture | http | "
                  "another source's name, ...} (http: the step it was asked before, delay, max, "
                  "prefix)",
    "stopped_early": "who ended it before its end (a budget, an HTTP stop)",
    "trigger": "why a window no plan asked for was taken: {rule: request, request} or a capture "
               "rule's evidence {rule: slow step|straggler, factor, median_s, ...}, or "
               "{by, seen_at} for another source of config/polled.py",
    "units": "engine steps: [{n, kind, prefill_requests, decode_requests, tokens, latency_ms, "
             "finished_requests}] for each recorded step",
}

PLANNED_FIELDS: Dict[str, str] = {
    "start": "the first unit of the planned window",
    "end": "the first unit not in it",
    "status": "running until its last unit ends, then complete; cut when the process ended "
              "inside it or a unit failed",
    "recorded": "units recorded",
    "skipped": "units not recorded",
    "refused": "units another session in the process kept from starting",
    "cut": "how it was cut",
    "recorded_elsewhere": "units another window recorded: [{unit, window, started_by, prefix}]",
    "started_by": "who asked for the window (as WINDOW_FIELDS)",
    "stopped_early": "who stopped it on request before its end",
}
