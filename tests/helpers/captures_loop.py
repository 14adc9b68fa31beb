"""A plain training loop whose unit times a test clock sets, so the capture rules see exactly the
times a test writes (the captures' tests and the report's)."""

import mindspeed_prof
from mindspeed_prof import ProfilerConfig


class UnitClock:
    """What ``captures`` reads as the time: the loop below moves it on by each unit's time."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def settings(save, **knobs):
    values = dict(profile=True, profile_backend="torch", profile_save_path=str(save),
                  profile_trigger_poll=1, profile_capture_warmup=3, profile_capture_cooldown=5,
                  profile_on_slow_step=2.0)
    values.update(knobs)
    return ProfilerConfig(**values)


def train(config, clock, slow, iterations=30, normal=0.1, train_iters="same"):
    """A plain loop of ``iterations``; iteration n takes slow.get(n, normal) seconds."""
    limit = iterations if train_iters == "same" else train_iters
    with mindspeed_prof.profile(config, train_iters=limit) as prof:
        for n in range(1, iterations + 1):
            clock.now += slow.get(n, normal)
            prof.step()
    return prof
