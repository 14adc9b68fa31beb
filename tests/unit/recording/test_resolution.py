"""What a rank would do with a config (recording/resolution.py), which show-config prints."""

import json

from mindspeed_prof.cli import main


def test_what_a_rank_would_do_is_a_typed_resolution_beside_the_plan_that_the_command_prints(
        tmp_path, capsys):
    from mindspeed_prof.config.profiler_config import ProfilerConfig
    from mindspeed_prof.config.units import ITERATION
    from mindspeed_prof.recording.resolution import Resolution, resolve_rank

    config = ProfilerConfig(profile=True, profile_backend="torch", profile_ranks=(1,),
                            profile_step_start=3, profile_step_end=5,
                            profile_save_path=str(tmp_path / "prof"))
    resolution = resolve_rank(config, ITERATION, world_size=2, layout=None, first=1, last=10,
                              exit_interval=None, window_given=True, default_notes=[],
                              ranks_text=lambda r: "+".join(map(str, r)))
    assert isinstance(resolution, Resolution)
    assert (resolution.plan.rank, resolution.backend) == (1, "torch")
    assert [(w["start"], w["end"]) for w in resolution.windows] == [(3, 5)]
    assert resolution.profiler_call.startswith("torch.profiler.profile(")
    assert not (tmp_path / "prof").exists()  # a dry run: the save path check left nothing
    # the command prints the same: its JSON report is the resolution's
    assert main(["show-config", "--json", "--world-size", "2", "--train-iters", "10",
                 "--profile-backend", "torch", "--profile-ranks", "1", "--profile-step-start",
                 "3", "--profile-step-end", "5", "--profile-save-path",
                 str(tmp_path / "prof")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["profiler_call"] == resolution.profiler_call
    assert report["backend"] == "torch"
    assert [n for n in report["notes"] if n in resolution.notes] == resolution.notes  # + defaults
