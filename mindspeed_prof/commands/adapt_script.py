"""``mindspeed-prof adapt-script IN.sh``: write a profiling copy of a training launch script.

The flags are validated by the parser training uses before anything is written. IN.sh is never
written: an OUT.sh that is IN.sh (same path, a symlink or a hard link to it) is refused, even with
``--force``. OUT.sh is written atomically with IN.sh's mode bits, and the diff goes to stdout.
"""

import difflib
import os
import shutil
import stat
import subprocess
import sys
import tempfile

from mindspeed_prof.arguments import add_recorded_profile_flags, parse_profile_flags
from mindspeed_prof.config import ranks
from mindspeed_prof.config.window import plan_windows
from mindspeed_prof.errors import ConfigError
from mindspeed_prof.script import adapt_script
from mindspeed_prof.script.entries import no_loop_reason
from mindspeed_prof.script.launches import INFERENCE, TRAINING, scan_commands
from mindspeed_prof.script.literals import job_literals
from mindspeed_prof.script.scan import assignments

HELP = ("Write a copy of a training (or inference) launch script whose training command runs "
        "under mindspeed_prof.launch with the given --profile* flags (IN.sh is never written).")
SUFFIX = "_profile"


def add_arguments(parser):
    parser.add_argument("script", metavar="IN.sh", nargs="?",
                        help="the launch script to adapt (only read)")
    parser.add_argument("-o", "--output", metavar="OUT.sh",
                        help=f"where to write the copy (default: <IN>{SUFFIX}.sh beside IN.sh)")
    parser.add_argument("--force", action="store_true",
                        help="overwrite an existing OUT.sh (IN.sh itself is always refused)")
    parser.add_argument("--line", type=int, action="append", default=[], metavar="N",
                        help="adapt only the command on line N of IN.sh (repeatable); it may "
                             "be a launch not named like training. Default: every training "
                             "command")
    parser.add_argument("--drop-use-pytorch-profiler", action="store_true",
                        help="leave --use-pytorch-profiler out of the copy's training command "
                             "(Megatron's own torch.profiler, which the training refuses beside "
                             "mindspeed_prof's); without this, a script carrying it is refused")
    # The same definitions training uses, so --help here matches the training's --help.
    add_recorded_profile_flags(parser, description="written into PROFILE_ARGS in the copy; "
                                                   "--profile is implied")


def run(args):
    if args.script is None:
        raise ConfigError("give IN.sh before the flags: mindspeed-prof adapt-script IN.sh "
                          "--profile-ranks 0 1 (--profile-ranks takes every value up to the "
                          "next option)")
    source, output = args.script, args.output or default_output(args.script)
    text = _read(source)
    flags = profile_tokens(args.profile_argv or [])
    config = parse_profile_flags(flags, environ={}, implied_profile=True)
    _refuse_input(source, output)
    try:
        result = adapt_script(text, flags, lines=args.line,
                              drop_use_pytorch_profiler=args.drop_use_pytorch_profiler)
    except ConfigError as exc:  # its lines are IN.sh's: say which file they are in
        raise ConfigError(f"{source}: {exc}") from None
    # Before the job spends minutes building its model: flags the script's own values rule out,
    # and entries whose loop nothing hooks.
    notes = _check_against_the_script(text, result.launches, config, source,
                                      chosen_by_line=bool(args.line))
    for note in list(result.notes) + notes + config.warnings() + _path_notes(config):
        print(f"note: {note}", file=sys.stderr)
    if not result.changed:
        print(f"{source} is already adapted with these flags; nothing to do", file=sys.stderr)
        return 0
    if os.path.lexists(output) and not args.force:
        raise ConfigError(f"{output} exists; pass --force to overwrite it, or -o another path")
    _write(source, output, result.text)
    sys.stdout.writelines(_diff(text, result.text, source, output))
    where = ", ".join(str(launch.line) for launch in result.launches)
    kind = "inference" if all(l.verdict == INFERENCE for l in result.launches) else "training"
    print(f"wrote {output}: adapted the {kind} command at line{'s' * (len(result.launches) > 1)} "
          f"{where} of {source}", file=sys.stderr)
    if len(result.launches) > 1:
        print(f"note: {len(result.launches)} {kind} commands were adapted, so each one that "
              f"runs profiles; --line N adapts only the one on line N", file=sys.stderr)
    return 0


def _check_against_the_script(text, launches, config, source, chosen_by_line):
    """ConfigError (exit 2, with the fix) for flags the script's own literals rule out, and for
    a training entry that runs no loop we hook (a note instead when --line chose it)."""
    values = assignments(scan_commands(text))
    folders = [os.path.dirname(os.path.abspath(source)), os.getcwd()]
    notes = []
    for launch in launches:
        found = job_literals(text, launch, launch.held.values if launch.held else values)
        where = f"{source} line {launch.line}"
        lacking = ranks.beyond(config.profile_ranks, found.world_size or 0) \
            if found.world_size else []
        if lacking:
            raise ConfigError(
                f"{where}: --profile-ranks {ranks.format_selection(config.profile_ranks)} names "
                f"rank(s) {ranks.spans_text(lacking)}, but the job starts {found.world_size} "
                f"ranks ({found.world_words}), numbered 0-{found.world_size - 1}: choose ranks "
                f"among them (-1 for every rank)")
        if launch.verdict == TRAINING and found.train_iters is not None:
            try:
                plan_windows(config, first_iteration=1, train_iters=found.train_iters)
            except ConfigError as exc:
                raise ConfigError(f"{where} trains {found.train_iters} iterations "
                                  f"({found.train_iters_words}): {exc}") from None
        why = no_loop_reason(launch.script_name, folders) if launch.verdict == TRAINING \
            else None
        if why is None:
            continue
        said = (f"{where}: {why}; mindspeed_prof hooks Megatron's training loop "
                f"(megatron.training pretrain/train), so the copy would profile nothing")
        if chosen_by_line:
            notes.append(f"{said} (adapted anyway: --line chose it)")
        else:
            raise ConfigError(f"{said}. Profile that trainer with its own profiler settings, or "
                              f"call mindspeed_prof.profile() in its loop; --line {launch.line} "
                              f"adapts it anyway")
    return notes


def default_output(source):
    root, ext = os.path.splitext(source)
    return f"{root}{SUFFIX}{ext or '.sh'}"


def profile_tokens(typed):
    """``--profile`` first (implied), then the flags as typed."""
    return typed if "--profile" in typed else ["--profile"] + list(typed)


def _read(path):
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}; give the path of a launch "
                          f"script") from None
    # surrogateescape keeps any non-UTF-8 byte as it was, so untouched text stays byte-identical.
    return data.decode("utf-8", "surrogateescape")


def _refuse_input(source, output):
    same = os.path.realpath(source) == os.path.realpath(output)
    if not same and os.path.exists(output):
        same = os.path.samefile(source, output)  # a hard link shares the inode
    if same:
        raise ConfigError(f"refusing to write {output}: it is {source} itself (or a link to it), "
                          f"which adapt-script never modifies; give another path with -o")
    if os.path.isdir(output):
        raise ConfigError(f"{output} is a directory; give a file path with -o")
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        raise ConfigError(f"cannot write {output}: directory {folder} does not exist")


def _write(source, output, text):
    folder = os.path.dirname(os.path.abspath(output))
    try:
        handle, temp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(output)}.",
                                        suffix=".tmp")
    except OSError as exc:
        raise ConfigError(f"cannot write {output}: {exc.strerror}; choose another path with "
                          f"-o") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(text.encode("utf-8", "surrogateescape"))
        os.chmod(temp, stat.S_IMODE(os.stat(source).st_mode))
        _check_syntax(source, temp)
        os.replace(temp, output)  # a symlink at OUT is replaced, never followed
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def _check_syntax(source, temp):
    """Refuse to write a copy bash cannot parse when the original parses (a bug of ours)."""
    bash = shutil.which("bash")
    if bash is None or _bash_parses(bash, temp) or not _bash_parses(bash, source):
        return
    raise ConfigError(f"the adapted copy of {source} fails `bash -n` although {source} passes; "
                      f"nothing was written. Please report this with the script, and add the "
                      f"flags by hand meanwhile")


def _bash_parses(bash, path):
    completed = subprocess.run([bash, "-n", path], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=30, check=False)
    return completed.returncode == 0


def _path_notes(config):
    relative = [value for value in (config.profile_config,) if value and not os.path.isabs(value)]
    return [f"--profile-config {value} is relative: the training resolves it from the directory "
            f"it runs in" for value in relative]


def _diff(old, new, source, output):
    for line in difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                     fromfile=source, tofile=output):
        yield line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
