"""Running the stand-in Megatron job under mindspeed_prof, as the end-to-end tests do."""

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
    if not autoload:
        overrides.setdefault("MINDSPEED_PROF_AUTOLOAD", "0")
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
