"""A plain training loop under ``mindspeed_prof.profile`` and the configuration it runs with,
shared by the unit tests of windows, backends and the manager: each file says only what its
runs have in common beyond these defaults (``functools.partial(config, ...)``)."""

import torch

from mindspeed_prof import ProfilerConfig, profile

MODEL = torch.nn.Linear(32, 32)


def config(tmp_path, **knobs):
    """Profiling on with the torch backend, saved under tmp_path/prof, raw data parsed at the
    window's end (sync: what a test reads is on disk when the loop returns); knobs, named as
    ProfilerConfig's fields, set the rest or override these."""
    values = dict(profile=True, profile_save_path=str(tmp_path / "prof"), profile_backend="torch",
                  profile_analyse="sync")
    values.update(knobs)
    return ProfilerConfig(**values)


def train_one_step():
    """One forward and backward of a tiny model: enough operators for a trace to hold."""
    MODEL(torch.randn(4, 32)).sum().backward()


def run_loop(cfg, iterations=6, *, first=1, between=None, fail_at=None, **where):
    """Iterations first .. first+iterations-1 (a resumed loop starts past 1), each a training
    step then ``prof.step()``; between(iteration) runs at the iteration's start (a trigger, a
    file written), and iteration fail_at raises before its step, as a crashing training would.
    where: profile()'s rank, world_size and parallel layout."""
    with profile(cfg, train_iters=first + iterations - 1, first_iteration=first, **where) as prof:
        for iteration in range(first, first + iterations):
            if iteration == fail_at:
                raise RuntimeError(f"boom at {iteration}")
            if between:
                between(iteration)
            train_one_step()
            prof.step()
