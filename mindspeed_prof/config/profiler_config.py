"""ProfilerConfig: one validated, immutable description of what to profile.

Every field is a flag (``--profile-step-start``) and a YAML key (``profile_step_start``) of the
same name, so one grep finds all three. The core knows nothing of Megatron: ``arguments/`` turns
a parsed argparse namespace into this object. Each field's metadata holds its ``Kind`` (the
type of its values: ``kinds.py``), its --help line, its choices and, for torch_npu's own
switches, the torch_npu keyword it sets (``npu=``, for ``_ExperimentalConfig``); the torch
backend's list of NPU-only knobs and the dropped-keyword messages are derived from it.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from . import kinds, names, ranks, window
from ..errors import ConfigError
from .kinds import Kind


def _knob(default: Any, kind: Kind, help: str, **extra: Any) -> Any:
    """A config field: its default, the kind of its values and its --help line; ``npu=KEY`` marks
    a torch_npu ``_ExperimentalConfig`` keyword, ``npu_only=True`` a knob only torch_npu uses."""
    return field(default=default, metadata={"kind": kind, "help": help, **extra})


@dataclass(frozen=True, kw_only=True)
class ProfilerConfig:
    profile: bool = _knob(False, kinds.BOOL, "Turn profiling on (Megatron's flag).")
    profile_step_start: int = _knob(
        10, kinds.INT, "First profiled iteration, numbered as the training log prints it.")
    profile_step_end: int = _knob(
        12, kinds.INT, "First iteration NOT profiled; -1 profiles until training ends.")
    profile_ranks: tuple = _knob(
        (0,), kinds.RANKS, "Global ranks to profile: 0 2, 0-7, -1/all for every rank, or a "
        "selector (" + ", ".join(ranks.NAMED_SELECTORS) + ", tp=0,dp=0,pp=*, node=K).")
    profile_level: str = _knob(
        "level0", kinds.CHOICE, "torch_npu profiler level.", choices=names.LEVELS,
        npu="profiler_level")
    profile_export_type: str = _knob(
        "text", kinds.CHOICE, "torch_npu export type: text, db (or text,db).",
        choices=names.EXPORT_TYPES, npu="export_type")
    profile_data_simplification: bool = _knob(
        False, kinds.BOOL, "torch_npu data simplification: delete CANN's intermediate files "
        "after parsing.", npu="data_simplification")
    profile_with_cpu: bool = _knob(
        True, kinds.BOOL, "Record host (CPU) operators as well; on unless turned off "
        "(profile_with_cpu: false in --profile-config, or MINDSPEED_PROF_WITH_CPU=0): "
        "the NPU trace's step ids come from host activity.")
    profile_with_stack: bool = _knob(False, kinds.BOOL,
                                     "Record Python call stacks (large output).")
    profile_with_memory: bool = _knob(False, kinds.BOOL, "Record memory allocations.")
    profile_record_shapes: bool = _knob(False, kinds.BOOL, "Record operator input shapes.")
    profile_save_path: str = _knob("./profile_dir", kinds.TEXT,
                                   "Directory for every rank's output.")
    profile_config: Optional[str] = _knob(
        None, kinds.PATH, "YAML file with profile_* keys; flags on the command line win over it.")
    profile_backend: str = _knob(
        "auto", kinds.CHOICE, "auto (npu when torch_npu works, else torch), npu or torch.",
        choices=names.BACKENDS)
    profile_analyse: str = _knob(
        "async", kinds.CHOICE, "When raw NPU data is parsed: sync (blocks the rank at window "
        "end), async (child process) or offline (later, with `mindspeed-prof analyse`).",
        choices=names.ANALYSE_MODES)
    profile_aic_metrics: Optional[str] = _knob(
        None, kinds.OPTIONAL_CHOICE, "AI core metrics (level1/level2), e.g. PipeUtilization; "
        "default: torch_npu's.", choices=tuple(names.AIC_METRICS), npu="aic_metrics")
    profile_with_modules: bool = _knob(False, kinds.BOOL, "Record the Python module hierarchy.")
    profile_with_flops: bool = _knob(False, kinds.BOOL, "Estimate FLOPs of matrix operators.")
    profile_l2_cache: bool = _knob(False, kinds.BOOL, "Collect L2 cache hit rates (torch_npu).",
                                   npu="l2_cache")
    profile_op_attr: bool = _knob(False, kinds.BOOL, "Collect operator attributes (db export).",
                                  npu="op_attr")
    profile_mstx: bool = _knob(
        False, kinds.BOOL, "Enable mstx markers (torch_npu >= 2.7); our iteration, request, "
        "forward and stage labels become mstx ranges too, so --profile-level level_none "
        "--profile-mstx is a light capture that still shows them.", npu="mstx")
    profile_mstx_domain_include: tuple = _knob(
        (), kinds.NAMES, "With mstx: record only these mstx domains (ours are in 'default').",
        npu="mstx_domain_include")
    profile_mstx_domain_exclude: tuple = _knob(
        (), kinds.NAMES, "With mstx: leave these mstx domains out (e.g. communication).",
        npu="mstx_domain_exclude")
    profile_host_sys: tuple = _knob(
        (), kinds.NAMES, "Host system metrics: any of cpu, mem, disk, network, osrt, numa.",
        choices=names.HOST_SYS, npu="host_sys")
    profile_sys_io: bool = _knob(False, kinds.BOOL, "Collect NIC/RoCE data (torch_npu).",
                                 npu="sys_io")
    profile_sys_interconnection: bool = _knob(
        False, kinds.BOOL, "Collect PCIe/HCCS data (torch_npu).", npu="sys_interconnection")
    profile_gc_detect_threshold: Optional[float] = _knob(
        None, kinds.FLOAT, "Record Python GC pauses longer than this many ms (0 = all).",
        npu="gc_detect_threshold")
    profile_every: int = _knob(
        0, kinds.INT, "Repeat the window every K iterations (0: once); each window gets its "
        "own iter_{first}-{last}/ folder.")
    profile_steps: tuple = _knob(
        (), kinds.STEPS, "Explicit windows of inclusive iterations, e.g. 100-102,1100-1102; "
        "replaces --profile-step-start/-end.")
    profile_forwards: tuple = _knob(
        (), kinds.FORWARDS, "Inference: record only forwards A-B of each profiled request "
        "(static engine; 1 is its prefill); on the dynamic engine, engine steps A-B of each "
        "window started over HTTP (vLLM's delay A-1 and max B-A+1), unless the start says "
        "otherwise.")
    profile_http_allow_remote: bool = _knob(
        False, kinds.BOOL, "Servers: answer POST /start_profile and /stop_profile from other "
        "hosts too (by default only callers on this machine: 127.0.0.1, ::1); give "
        "--profile-http-token with it.")
    profile_http_token: Optional[str] = field(default=None, repr=False, metadata={
        "kind": kinds.SECRET, "help": "Servers: a shared token every caller of the profile "
        "routes sends as 'Authorization: Bearer TOKEN'; prefer MINDSPEED_PROF_HTTP_TOKEN (a "
        "command line is visible to every user of the machine)."})
    profile_trigger_file: Optional[str] = _knob(
        None, kinds.PATH, "Arm the job for on-demand profiling: `mindspeed-prof trigger FILE "
        "--steps N` profiles the next N iterations on every selected rank.")
    profile_trigger_poll: int = _knob(
        10, kinds.INT, "With --profile-trigger-file or --profile-on-*: rank 0 checks the file "
        "(and judges the recent iterations) every K iterations and shares the decision with one "
        "small collective.")
    profile_on_slow_step: Optional[float] = _knob(
        None, kinds.FLOAT, "Capture by itself: when an iteration takes more than FACTOR x the "
        "median of recent ones (e.g. 2), profile the next --profile-capture-steps iterations "
        "on the selected ranks, aligned on every rank (rank 0 decides at a poll boundary).")
    profile_on_straggler: Optional[float] = _knob(
        None, kinds.FLOAT, "Capture by itself: when one rank's own compute time (iteration "
        "time minus time waiting in collectives) exceeds FACTOR x the other ranks' median (e.g. "
        "2) and by at least 0.2 s, at two polls in a row, profile that rank and a median rank "
        "for --profile-capture-steps iterations.")
    profile_capture_steps: int = _knob(
        3, kinds.INT, "With --profile-on-slow-step/--profile-on-straggler: iterations each "
        "capture records, from the poll boundary that decides it.")
    profile_capture_warmup: int = _knob(
        20, kinds.INT, "Iterations at the start of the run that are never judged (start-up is "
        "slow); the median needs a few quiet ones after them too.")
    profile_capture_cooldown: int = _knob(
        100, kinds.INT, "At least this many iterations between the end of one capture and the "
        "start of the next.")
    profile_max_captures: int = _knob(
        3, kinds.INT, "At most this many captures per job (each in its own iter_{a}-{b}/).")
    profile_max_gb: Optional[float] = _knob(
        None, kinds.FLOAT, "Disk budget for the whole job's profile output in GB: refuse to "
        "start when the estimate exceeds it or the free space, stop a window that crosses it.")
    profile_memory_snapshot: bool = _knob(
        False, kinds.BOOL, "Record the device caching allocator's history through each "
        "profiled window and write memory_snapshot_rank{R}.pickle into the window's folder "
        "(NPU or GPU).")
    profile_memory_oom: bool = _knob(
        False, kinds.BOOL, "Record the allocator's history from start-up and write "
        "memory_oom_rank{R}.pickle when the device runs out of memory (NPU or GPU).")
    profile_memory_max_entries: int = _knob(
        100000, kinds.INT, "Allocator events kept for --profile-memory-snapshot/-oom (the "
        "newest N; each costs a few KB of host memory).")
    profile_stages: tuple = _knob(
        (), kinds.NAMES, "RL roles (role_profiler): record only these stages of a step, each "
        "occurrence as its own session under {save}/{role}/{stage}/; default: the whole step, "
        "stages as stage:NAME ranges.")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            f.metadata["kind"].check(flag_name(f.name), getattr(self, f.name),
                                     f.metadata.get("choices"), none_is_default=True)
        normalised = {
            "profile_level": names.level(self.profile_level),
            "profile_export_type": names.export_type(self.profile_export_type),
            "profile_backend": names.backend(self.profile_backend),
            "profile_analyse": names.analyse_mode(self.profile_analyse),
            "profile_aic_metrics": names.aic_metrics(self.profile_aic_metrics),
            "profile_host_sys": names.host_sys(self.profile_host_sys),
            "profile_ranks": ranks.parse_rank_tokens(self.profile_ranks),
            "profile_stages": names.stages(self.profile_stages),
            "profile_mstx_domain_include": names.mstx_domains(
                self.profile_mstx_domain_include, "--profile-mstx-domain-include"),
            "profile_mstx_domain_exclude": names.mstx_domains(
                self.profile_mstx_domain_exclude, "--profile-mstx-domain-exclude"),
        }
        for key, value in normalised.items():
            object.__setattr__(self, key, value)
        if self.profile_config is not None and not self.profile_config.strip():
            # An unset $CONFIG in a launch script: running on without the file would be a surprise.
            raise ConfigError("--profile-config is empty; give the path of a YAML file, or leave "
                              "the flag out.")
        if not self.profile_save_path.strip():
            raise ConfigError("--profile-save-path is empty; give a directory, e.g. ./profile_dir.")
        if self.profile_gc_detect_threshold is not None and self.profile_gc_detect_threshold < 0:
            raise ConfigError(f"--profile-gc-detect-threshold {self.profile_gc_detect_threshold} "
                              f"must be >= 0 (milliseconds; 0 records every GC pause).")
        if self.profile_max_gb is not None and self.profile_max_gb <= 0:
            raise ConfigError(f"--profile-max-gb {self.profile_max_gb} must be > 0 (GB of "
                              f"profile output for the whole job).")
        self._check_values()
        # How the window flags fit together only matters when a window will be planned: a
        # command that carries stale window flags and no --profile is not refused (torchtitan
        # validates its schedule only when profiling is on). Each value on its own is checked
        # whatever --profile says: a typo is a typo.
        if self.profile:
            self._check_window_relations()

    def _check_values(self) -> None:
        if self.profile_step_start < 1:
            raise ConfigError(f"--profile-step-start {self.profile_step_start} must be >= 1 "
                              f"(iterations are numbered from 1, as the training log prints "
                              f"them).")
        if self.profile_memory_max_entries < 1:
            raise ConfigError(f"--profile-memory-max-entries {self.profile_memory_max_entries} "
                              f"must be >= 1 (allocator events kept, e.g. 100000).")
        if self.profile_mstx_domain_include and self.profile_mstx_domain_exclude:
            raise ConfigError("--profile-mstx-domain-include and --profile-mstx-domain-exclude "
                              "are both set; torch_npu would use the include list only: give "
                              "one of them.")
        if self.profile_every < 0:
            raise ConfigError(f"--profile-every {self.profile_every} must be >= 0 (0 profiles "
                              f"one window).")
        if self.profile_trigger_poll < 1:
            raise ConfigError(f"--profile-trigger-poll {self.profile_trigger_poll} must be >= 1 "
                              f"(iterations between two looks at the trigger file).")
        token = self.profile_http_token
        if token is not None and (not token or any(c.isspace() or not c.isprintable()
                                                   for c in token)):
            raise ConfigError("--profile-http-token must be a non-empty token without spaces "
                              "or control characters (it travels in an HTTP header), e.g. the "
                              "output of `openssl rand -hex 16`.")
        if token is not None and not token.isascii():
            # Headers reach the servers as latin-1 text: the UTF-8 bytes a client sends for
            # 'ä' arrive as two other characters, and no client could present the token.
            raise ConfigError("--profile-http-token must be ASCII: HTTP clients send headers as "
                              "bytes that the servers read as latin-1, so a token with other "
                              "characters could never be presented; use e.g. the output of "
                              "`openssl rand -hex 16`.")
        if self.profile_trigger_file is not None and not self.profile_trigger_file.strip():
            raise ConfigError("--profile-trigger-file is empty; give the path of a file the "
                              "job can see (it need not exist yet).")
        object.__setattr__(self, "profile_steps", window.parse_step_ranges(self.profile_steps))
        object.__setattr__(self, "profile_forwards",
                           window.parse_forward_range(self.profile_forwards))
        self._check_capture_values()

    def _check_capture_values(self) -> None:
        for knob, floor in (("profile_on_slow_step", 1.0), ("profile_on_straggler", 1.0)):
            factor = getattr(self, knob)
            if factor is not None and factor <= floor:
                raise ConfigError(f"{flag_name(knob)} {factor:g} must be > 1: it is how many "
                                  f"times the median a slow one takes (e.g. 2); at 1 or below "
                                  f"ordinary ones would qualify.")
        for knob, floor in (("profile_capture_steps", 1), ("profile_max_captures", 1),
                            ("profile_capture_warmup", 0), ("profile_capture_cooldown", 0)):
            if getattr(self, knob) < floor:
                raise ConfigError(f"{flag_name(knob)} {getattr(self, knob)} must be >= {floor}.")

    @property
    def captures(self) -> bool:
        """A capture rule is on: windows open by themselves on a slow step or a straggler."""
        return self.profile_on_slow_step is not None or self.profile_on_straggler is not None

    def _check_window_relations(self) -> None:
        every, start, end = self.profile_every, self.profile_step_start, self.profile_step_end
        window.check_start_end(start, end)
        if every and self.profile_steps:
            raise ConfigError("--profile-every and --profile-steps both describe repeated windows; "
                              "use one of them.")
        if every and end == -1:
            raise ConfigError("--profile-every needs a finite window: set --profile-step-end "
                              "(-1 means until training ends, which cannot repeat).")
        if every and every < end - start:
            raise ConfigError(f"--profile-every {every} is shorter than the window "
                              f"({end - start} iterations from --profile-step-start {start} to "
                              f"--profile-step-end {end}); windows would overlap: use "
                              f"--profile-every {end - start} or more.")

    def replace(self, **changes: Any) -> "ProfilerConfig":
        return dataclasses.replace(self, **changes)

    def warnings(self, role_driver: bool = False) -> List[str]:
        """Combinations torch_npu would silently change, and knobs this run ignores, said
        plainly. ``role_driver``: the config of an RL role (role_profiler), where the role
        driver, not the user, decides what applies."""
        notes = []
        if self.profile_stages and not role_driver:
            notes.append(f"--profile-stages {','.join(self.profile_stages)} applies only to RL "
                         f"roles (role_profiler); a training or inference run ignores it and "
                         f"records whole iterations or requests: remove it.")
        tuned = [flag_name(k) for k in CAPTURE_KNOBS
                 if getattr(self, k) != KNOBS[k].default] if not self.captures else []
        if tuned:
            notes.append(f"{', '.join(tuned)} appl{'ies' if len(tuned) == 1 else 'y'} only "
                         f"with --profile-on-slow-step or --profile-on-straggler; without "
                         f"either no capture is taken.")
        level = self.profile_level
        if self.profile_aic_metrics not in (None, "AiCoreNone") and level in ("level0", "level_none"):
            notes.append(f"--profile-aic-metrics {self.profile_aic_metrics} is ignored at "
                         f"--profile-level {level}: torch_npu resets it to AiCoreNone; use "
                         f"--profile-level level1 to collect AI core metrics.")
        if level == "level_none" and not self.profile_mstx:
            notes.append("--profile-level level_none records nothing without mstx: torch_npu "
                         "(>= 2.7) turns --profile-mstx on by itself.")
        notes.extend(_mstx_notes(self))
        if self.profile_op_attr and "db" not in self.profile_export_type:
            notes.append("--profile-op-attr needs --profile-export-type db; torch_npu drops it "
                         "with text export.")
        if self.profile_http_allow_remote and not self.profile_http_token:
            notes.append("--profile-http-allow-remote without --profile-http-token: any host "
                         "that reaches the server's port can start profile windows; set a "
                         "shared token (MINDSPEED_PROF_HTTP_TOKEN).")
        if not self.profile_ranks and self.profile_with_stack:
            notes.append("--profile-with-stack on every rank makes very large output; consider "
                         "--profile-ranks 0 or --profile-with-modules.")
        return notes

    def as_dict(self) -> Dict[str, Any]:
        data = dataclasses.asdict(self)
        data["profile_ranks"] = [ranks.item_json(item) for item in self.profile_ranks]
        data["profile_host_sys"] = list(self.profile_host_sys)
        data["profile_steps"] = [list(r) for r in self.profile_steps]
        data["profile_forwards"] = [list(r) for r in self.profile_forwards]
        data["profile_stages"] = list(self.profile_stages)
        if self.profile_http_token is not None:
            data["profile_http_token"] = "(set)"  # a secret: never in a manifest or a report
        data["profile_mstx_domain_include"] = list(self.profile_mstx_domain_include)
        data["profile_mstx_domain_exclude"] = list(self.profile_mstx_domain_exclude)
        return data


# The mstx domain our own ranges (units, forwards, stages) are recorded in: torch_npu's own
# default, where its ProfilerStep ranges (>= 2.10) and dataloader ranges go too.
MSTX_DOMAIN = "default"


def _mstx_notes(config: ProfilerConfig) -> List[str]:
    domains = config.profile_mstx_domain_include or config.profile_mstx_domain_exclude
    if not domains:
        return []
    if not config.profile_mstx and config.profile_level != "level_none":
        return ["--profile-mstx-domain-include/-exclude apply only with --profile-mstx; "
                "torch_npu clears them without it: add --profile-mstx."]
    include = config.profile_mstx_domain_include
    if (include and MSTX_DOMAIN not in include) or MSTX_DOMAIN in config.profile_mstx_domain_exclude:
        return [f"the mstx domain {MSTX_DOMAIN!r} is left out, and mindspeed_prof's iteration, "
                f"request, forward and stage ranges are in it: they will not be recorded "
                f"(add {MSTX_DOMAIN} to --profile-mstx-domain-include to keep them)."]
    return []


KNOBS = {f.name: f for f in dataclasses.fields(ProfilerConfig)}
CAPTURE_KNOBS = ("profile_capture_steps", "profile_capture_warmup", "profile_capture_cooldown",
                 "profile_max_captures")
# torch_npu's own switches: knob -> the ``_ExperimentalConfig`` keyword it sets.
NPU_KEYWORDS: Dict[str, str] = {name: f.metadata["npu"] for name, f in KNOBS.items()
                                if "npu" in f.metadata}


def flag_name(knob: str) -> str:
    """``profile_step_start`` -> ``--profile-step-start``."""
    return "--" + knob.replace("_", "-")


def describe_kind(f: "dataclasses.Field[Any]") -> str:
    """What a value of knob ``f`` must be, in words (for messages)."""
    return f.metadata["kind"].describe(f.metadata.get("choices"))

