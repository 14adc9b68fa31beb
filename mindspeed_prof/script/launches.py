"""Recognise the commands of a launch script that start Python, and which of them train or serve.

``find_launches`` looks at every simple command (see ``scan``), and at every string the script
runs as a command (see ``embedded``), and keeps those run by torchrun,
``python -m torch.distributed.run/launch`` or ``python SCRIPT``, behind any wrapper ``program``
knows (``srun``, ``timeout``, ``nohup`` ...): where the launcher's own options end, which word is
the entry script (where ``-m mindspeed_prof.launch`` goes), and a verdict with its reason, so a
script nothing can be done with gets an error that says why.
"""

import re
from dataclasses import dataclass, replace
from functools import partial
from typing import List, Optional

from ..errors import ConfigError
from .embedded import EVAL, Body, bodies
from .program import DISTRIBUTING, basename, candidates, posix_script, runners_before
from .scan import assignments, scan
from .words import ScanError, dequote, expansion_name, line_of

LAUNCHER_MODULE = "mindspeed_prof.launch"
TRAINING, INFERENCE, LAUNCHER_ONLY = "training", "inference", "launcher only"
# BLOCKED: an entry adapt-script recognises but cannot edit where it is written.
BLOCKED, REJECTED = "blocked", "rejected"

# torch.distributed.run's options that take no value (torch 1.10 ... 2.13; `--use-env` is
# torch.distributed.launch's own).
TORCHRUN_FLAGS = frozenset({
    "-h", "--help", "--standalone", "-m", "--module", "--no-python", "--no_python",
    "--run-path", "--run_path", "--virtual-local-rank", "--virtual_local_rank",
    "--use-env", "--use_env"})
# Those that take one; an option missing from both is judged by what follows it.
TORCHRUN_VALUED = frozenset({
    "--nnodes", "--nproc-per-node", "--nproc_per_node", "--rdzv-backend", "--rdzv_backend",
    "--rdzv-endpoint", "--rdzv_endpoint", "--rdzv-id", "--rdzv_id", "--rdzv-conf", "--rdzv_conf",
    "--max-restarts", "--max_restarts", "--monitor-interval", "--monitor_interval",
    "--start-method", "--start_method", "--event-log-handler", "--event_log_handler", "--role",
    "--log-dir", "--log_dir", "-r", "--redirects", "-t", "--tee", "--local-ranks-filter",
    "--local_ranks_filter", "--duplicate-stdout-filters", "--duplicate_stdout_filters",
    "--duplicate-stderr-filters", "--duplicate_stderr_filters", "--node-rank", "--node_rank",
    "--master-addr", "--master_addr", "--master-port", "--master_port", "--local-addr",
    "--local_addr", "--logs-specs", "--logs_specs", "--numa-binding", "--numa_binding",
    "--signals-to-handle", "--signals_to_handle", "--shutdown-timeout", "--shutdown_timeout"})
_DISTRIBUTED_MODULES = ("torch.distributed.run", "torch.distributed.launch")
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)*)?")
_PYTHON_VALUED = "WXcm"  # python's one-letter options that take a value
# Only names that hold the launcher's options by convention; anything else needs its value.
_LAUNCHER_VARIABLE = re.compile(r"(?:^|_)(?:DISTRIBUTED|DIST|LAUNCHER|LAUNCH|TORCHRUN)(?:_|$)")
_NOT_TRAINING = (
    (re.compile(r"preprocess|tokeniz"), "data preprocessing"),
    (re.compile(r"convert|ckpt|checkpoint|merge|export"), "checkpoint conversion"),
    (re.compile(r"eval"), "evaluation"),
    (re.compile(r"download"), "a download"),
)
# Megatron-LM's tools/run_text_generation_server.py and examples/inference/*_inference.py,
# MindSpeed-LLM's inference.py: the window flags count requests there.
_INFERENCE = re.compile(r"infer|generat|serve|server|mcore_engine")
_TRAINING = re.compile(r"train|finetune")
# `$PYTHON pretrain_gpt.py`: an unknown variable named like this holds the program itself.
_PROGRAM_VARIABLE = re.compile(r"PYTHON|TORCHRUN|LAUNCHER", re.I)
# Launchers with conventions of their own: listed with a reason, never edited.
_UNSUPPORTED = ("deepspeed", "accelerate", "msrun")


@dataclass(frozen=True)
class Launch:
    """A command that starts Python, and what adapt-script makes of it."""
    command: object  # scan.Command
    line: int
    launcher: str  # "torchrun", "python -m torch.distributed.launch", "python", ...
    script: object  # the Token `-m mindspeed_prof.launch` goes before (None: nowhere)
    script_name: str
    verdict: str  # TRAINING, INFERENCE, LAUNCHER_ONLY, BLOCKED or REJECTED
    reason: str
    adapted: bool  # already runs under mindspeed_prof.launch
    held: Optional[Body] = None  # the string or heredoc it is written in, when the script runs one

    @property
    def statement(self):
        """The statement a definition of the flags goes before."""
        return self.command if self.held is None or self.held.literal else self.held.statement

    def describe(self):
        what = f"{self.launcher} {self.script_name}".strip()
        where = f"; in a {self.held.what()} run by {self.held.where()}" if self.held else ""
        return f"line {self.line}: {what} ({self.reason}{where})"


def find_launches(text: str, commands: Optional[list] = None,
                  found_bodies: Optional[list] = None) -> List[Launch]:
    """Every command of ``text`` that starts Python or a launcher, as ``Launch`` records, in
    source order; those written in text the script runs (``sh -c "$CMD"``, ``bash <<EOF``)
    included. ``found_bodies`` is ``embedded.bodies`` of the script, when already known."""
    commands = scan_commands(text) if commands is None else commands
    values = assignments(commands)
    found = {}
    for command in commands:
        if (launch := _inspect(text, command, values)) is not None:
            found[command.words[0].start] = launch
    if found_bodies is None:
        found_bodies = bodies(text, commands, values, posix_script(text))
    direct = set(found)  # `$(torchrun ...)` in an assignment runs where it is written
    for body in found_bodies:
        # a body nested in another comes later in source order, so the innermost one wins
        for command in body.commands or ():
            start = command.words[0].start
            if start not in direct and (launch := _inspect(text, command, body.values)):
                found[start] = _held(launch, body)
    return [found[start] for start in sorted(found)]


def _held(launch, body):
    """A launch written in ``body``: adaptable unless the text cannot carry a variable."""
    launch = replace(launch, held=body)
    if launch.script is None or launch.verdict == REJECTED:
        return launch
    if not body.expands and not body.literal and body.hows() != {EVAL}:
        return replace(launch, script=None, verdict=BLOCKED, reason=(
            f"{launch.reason}, but in single quotes, and run where a variable of this script "
            f"arrives unexpanded; write that string in double quotes"))
    return launch


def scan_commands(text):
    """``scan.scan`` with its syntax errors turned into usage errors."""
    try:
        return scan(text)
    except ScanError as exc:
        raise ConfigError(f"cannot follow the shell syntax: {exc}") from None


def command_lines(text, launch):
    """The line numbers a launch's command spans (continuations included)."""
    return set(range(launch.line, line_of(text, launch.command.words[-1].end) + 1))


def _inspect(text, command, values):
    words = command.words
    i = _program_index(words, values)
    if i is None:
        return None
    program = shown = basename(words[i].text, values)
    if program is None:  # an unknown `$PYTHON` / `$TORCHRUN`: its name tells which it is
        shown = words[i].text
        program = "python" if "PYTHON" in expansion_name(shown).upper() else "torchrun"

    def launch(launcher, script=None, verdict=REJECTED, reason="", adapted=False, name=""):
        return Launch(command, line_of(text, words[0].start), launcher, script,
                      name or (script.text if script else ""), verdict, reason, adapted)

    if program in _UNSUPPORTED:
        return launch(program, reason=f"{program} is not a launcher adapt-script edits (torchrun, "
                                      f"python -m torch.distributed.run/launch, python SCRIPT)")
    if program == "torchrun":
        return _classify(partial(launch, shown), True, words, values,
                         *_launcher_options(words, i + 1, values))
    j, module, problem = _python_options(words, i + 1)
    if problem:
        return launch(shown, reason=problem)
    if module in _DISTRIBUTED_MODULES:
        return _classify(partial(launch, f"{shown} -m {module}"), True, words, values,
                         *_launcher_options(words, j, values))
    if module == LAUNCHER_MODULE:
        return _classify(partial(launch, shown), False, words, values, j - 1, True, None)
    if module:
        return launch(f"{shown} -m {module.replace(chr(0), '…')}",
                      reason="runs a module, not a training script")
    # `srun python pretrain_gpt.py`: one Python per task of the job, as under torchrun
    distributed = bool(runners_before(words, values, i) & DISTRIBUTING)
    return _classify(partial(launch, shown), distributed, words, values, j, False, None)


def _program_index(words, values):
    """Where python/torchrun is, or None when the command starts neither.

    Wrappers in front of it are walked past (see ``program.candidates``); an unknown
    ``$PYTHON`` or ``$TORCHRUN`` is taken for the program itself.
    """
    for j, program, name in candidates(words, values):
        if program == "torchrun" or program in _UNSUPPORTED or (
                program and _PYTHON.fullmatch(program)):
            return j
        if program is None and name and _PROGRAM_VARIABLE.search(name):
            return j
    return None


def _python_options(words, i):
    """(index after python's own options, ``-m`` module or None, why it cannot be used)."""
    while i < len(words):
        token = dequote(words[i].text)
        if not token.startswith("-") or token == "-":
            return i, None, None if token != "-" else "reads the program from stdin"
        if token.startswith("--"):
            i += 2 if token == "--check-hash-based-pycs" else 1
            continue
        for k, letter in enumerate(token[1:], start=1):
            if letter in _PYTHON_VALUED:
                value = token[k + 1:] or (dequote(words[i + 1].text) if i + 1 < len(words) else "")
                i += 1 if token[k + 1:] else 2
                if letter == "c":
                    return i, None, "runs a -c program, not a script"
                if letter == "m":
                    return i, value, None
                break
        else:
            i += 1
    return i, None, "runs no script"


def _launcher_options(words, i, values):
    """Walk torchrun's options: (script index or None, -m given, why the script was not found)."""
    module = False
    while i < len(words):
        text = words[i].text
        name = expansion_name(text)
        if name is not None:
            kind = _variable_kind(name, values)
            following = dequote(words[i + 1].text) if i + 1 < len(words) else ""
            if kind is None and following.endswith(".py") and "\0" not in following:
                kind = "options"  # `torchrun $OPTS pretrain_gpt.py`: the script is the next word
            if kind == "options":
                i += 1
                continue
            if kind == "script":
                return i, module, None
            return None, module, (f"cannot tell whether ${name} holds launcher options or the "
                                  f"training script")
        token = dequote(text)
        if not token.startswith("-"):
            return i, module, None
        option = token.split("=", 1)[0]
        if option in ("--no-python", "--no_python"):
            return None, module, "--no-python runs a program, not a Python script"
        module = module or option in ("-m", "--module")
        following = dequote(words[i + 1].text) if i + 1 < len(words) else ""
        if "=" in token or option in TORCHRUN_FLAGS:
            i += 1
        elif option in TORCHRUN_VALUED or not (following.endswith(".py") or
                                               following.startswith("-")):
            i += 2
        else:
            i += 1  # an unknown flag right before the script or another option
    return None, module, "no script after the launcher's options"


def _variable_kind(name, values):
    found = [words for _, words in values.get(name, [])]
    if found and all(w and w[0].startswith("-") and not any(x.endswith(".py") for x in w)
                     for w in found):
        return "options"
    if found and all(len(w) == 1 and w[0].endswith(".py") for w in found):
        return "script"
    return "options" if _LAUNCHER_VARIABLE.search(name) else None


def _classify(launch, distributed, words, values, index, module, problem):
    """The verdict on a launch whose script word is ``words[index]``."""
    if problem or index is None:
        return launch(reason=problem or "no script")
    script = words[index]
    adapted = module and dequote(script.text) == LAUNCHER_MODULE
    if module and not adapted:
        return launch(reason="-m runs a module; adapt-script needs a script path",
                      name=f"-m {script.text}")
    if adapted:
        if index + 1 >= len(words):
            return launch(reason=f"{LAUNCHER_MODULE} without a script")
        index += 1
    name = (basename(words[index].text, values) or "\0").lower()
    shown = words[index].text
    if "\0" in name:
        verdict = LAUNCHER_ONLY if distributed else REJECTED
        return launch(script, verdict, "the script is chosen at run time", adapted, shown)
    for pattern, what in _NOT_TRAINING:
        if pattern.search(name):
            return launch(script, REJECTED, f"looks like {what}", adapted, shown)
    if _INFERENCE.search(name):
        return launch(script, INFERENCE, "inference entry", adapted, shown)
    if _TRAINING.search(name):
        return launch(script, TRAINING, "training entry", adapted, shown)
    if not distributed:
        return launch(script, REJECTED, "not named like a training entry", adapted, shown)
    return launch(script, LAUNCHER_ONLY, "not named like training, run by a distributed launcher",
                  adapted, shown)
