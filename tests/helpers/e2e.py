"""Running the stand-in Megatron job under mindspeed_prof, as the end-to-end tests do: launched
as Megatron-LM's examples launch (``torchrun --nnodes 1 --node-rank 0 --master-addr 127.0.0.1
--master-port P``) unless a test names another form (``train(..., form="launch")``; see
``harness.launch.LAUNCH_FORMS``)."""

import os

from harness.launch import harness_env, run_training

LAUNCHER = ("-m", "mindspeed_prof.launch")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAKES = os.path.join(REPO, "tests", "fakes")


def profile_flags(save_path, ranks=("1",), start=3, end=5, *extra):
    return ["--profile", "--profile-ranks", *map(str, ranks), "--profile-step-start", str(start),
            "--profile-step-end", str(end), "--profile-save-path", str(save_path),
            "--profile-backend", "torch", *extra]


def env_for(tmp_path, autoload=False, **overrides):
    """Harness environment; the autoload hook is off unless a test is about it."""
    overrides.setdefault("MINDSPEED_PROF_AUTOLOAD", "1" if autoload else "0")
    return harness_env(tmp_path, **overrides)


def train(tmp_path, args, *, nproc=2, launcher=LAUNCHER, env=None, **kwargs):
    os.makedirs(tmp_path, exist_ok=True)
    return run_training(args, tmp_path=tmp_path, nproc=nproc, env=env or env_for(tmp_path),
                        launcher_prefix=launcher, **kwargs)


def tracebacks_from_training(run):
    """Traceback frames in our code, Megatron's or the script's (torchrun prints its own)."""
    return [line for line in run.stderr.splitlines()
            if line.strip().startswith("File ") and any(
                part in line for part in ("mindspeed_prof", "megatron", "pretrain_gpt", "patches/"))]


def check(save_path, *extra):
    """``mindspeed-prof check SAVE_PATH --json`` in this process: (exit code, report)."""
    import contextlib
    import io
    import json

    from mindspeed_prof import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["check", str(save_path), "--json", *map(str, extra)])
    return code, json.loads(out.getvalue())


def verdicts(report):
    """Rank -> check's verdict."""
    return {entry["rank"]: entry["verdict"] for entry in report["ranks"]}


def worker_exit_codes(run):
    """Global rank -> exit code of every worker torchrun reported as failed (signals negative)."""
    import re

    found = re.findall(r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)",
                       run.stderr)
    return {int(rank): int(code) for rank, code in found}
