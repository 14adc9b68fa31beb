"""A backend is one row of backends.KINDS: the core asks the row, never compares a name."""

import os
import re

import pytest

from mindspeed_prof import backends
from mindspeed_prof.config import budget
from mindspeed_prof.config.profiler_config import ProfilerConfig
from mindspeed_prof.errors import BackendUnavailable
from mindspeed_prof.recording.notices import config_notes
from mindspeed_prof.recording.plan import make_plan
from mindspeed_prof.recording.startup import check_save_path

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ASKERS = ("mindspeed_prof/config/budget.py", "mindspeed_prof/recording/notices.py",
          "mindspeed_prof/recording/startup.py", "mindspeed_prof/commands/show_config.py",
          "mindspeed_prof/recording/resolution.py")


class Spool(backends.BackendKind):
    """A third backend: it refuses paths with a space and notes every config."""

    name = "spool"
    installation = "spool"

    def usable(self):
        return True, "spool 1.0"

    def config_notes(self, config):
        return ["spool writes one file per step"]

    def ignored_flags(self, config):
        return ["--profile-with-stack"] if config.profile_with_stack else []

    def path_refusal(self, path):
        return "holds a space, which spool cannot write" if " " in path else None


@pytest.fixture
def spool(monkeypatch):
    monkeypatch.setitem(backends.KINDS, "spool", Spool())
    monkeypatch.setitem(budget.SIZES, "spool", lambda config: (1_000_000, ["1 MB (spool)"], []))


def test_no_module_that_asks_about_a_backend_compares_its_name_to_a_string():
    for path in ASKERS:
        text = open(os.path.join(REPO, path)).read()
        assert not re.search(r"\bbackend(_name)?\s*[!=]=\s*[\"']", text), path


def test_a_new_backend_row_answers_the_startup_notes_and_the_path_check(spool, tmp_path):
    config = ProfilerConfig(profile=True, profile_with_stack=True,
                            profile_save_path=str(tmp_path))
    notes = config_notes(make_plan(config), "spool")
    assert "spool writes one file per step" in notes
    assert any(n.startswith("--profile-with-stack applies only") for n in notes)
    with pytest.raises(Exception, match="holds a space"):
        check_save_path(str(tmp_path / "a b"), 0, "spool")
    assert budget.per_iteration_bytes(config, "spool") == (1_000_000, ["1 MB (spool)"])


def test_auto_takes_the_first_usable_backend_and_says_why_the_first_was_passed_over(monkeypatch):
    class Broken(Spool):
        def usable(self):
            return False, "no spool device"

    monkeypatch.setitem(backends.KINDS, "spool", Broken())
    monkeypatch.setattr(backends, "AUTO_ORDER", ("spool", "torch"))
    assert backends.choose(ProfilerConfig(profile_backend="auto")) == ("torch", "no spool device")
    with pytest.raises(BackendUnavailable, match="fix the torch_npu installation"):
        monkeypatch.setitem(backends.KINDS, "npu", type("NoNpu", (backends.NpuKind,), {
            "usable": lambda self: (False, "torch_npu is not installed")})())
        backends.choose(ProfilerConfig(profile_backend="npu"))
