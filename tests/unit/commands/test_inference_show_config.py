"""``show-config --unit request``: the window is in requests, each in its own session and folder,
and a server's unknown end is said, not checked."""

import json

from helpers.npu import fake_npu  # noqa: F401 - fixture
from mindspeed_prof.cli import main


def run(capsys, *argv):
    code = main(["show-config", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_request_windows_are_shown_in_requests_with_one_session_per_request(capsys, tmp_path):
    code, out, _ = run(capsys, "--unit", "request", "--world-size", "2", "--profile-step-start",
                       "2", "--profile-step-end", "4", "--profile-ranks", "-1",
                       "--profile-backend", "torch", "--profile-save-path", tmp_path / "p")
    assert code == 0
    assert "window:    requests 2-3\n" in out
    assert "schedule(wait=0, warmup=0, active=1, repeat=1, skip_first=2)" in out
    assert f"{tmp_path / 'p' / 'req_2-2'}/rank0." in out
    assert "a server has no known last request" in out


def test_json_names_the_unit(capsys, tmp_path):
    code, out, _ = run(capsys, "--unit", "request", "--json", "--profile-every", "10",
                       "--profile-step-start", "2", "--profile-step-end", "4",
                       "--profile-save-path", tmp_path / "p")
    report = json.loads(out)
    assert code == 0 and report["unit"] == "request" and report["window_count"] is None
    assert report["windows"][1]["describe"] == "requests 12-13"


def test_a_last_iteration_is_refused_for_requests(capsys):
    code, _, err = run(capsys, "--unit", "request", "--train-iters", "5")
    assert code == 2
    assert "--train-iters and --exit-interval do not apply with --unit request" in err


def test_npu_call_names_the_capture_after_its_rank_and_request(capsys, tmp_path, fake_npu):
    code, out, _ = run(capsys, "--unit", "request", "--profile-step-start", "2",
                       "--profile-step-end", "4", "--profile-backend", "npu",
                       "--profile-save-path", tmp_path / "p")
    assert code == 0
    assert "worker_name='rank0_req2'" in out


def test_a_server_without_window_flags_plans_no_window_and_waits_for_http(capsys, tmp_path):
    code, out, _ = run(capsys, "--unit", "engine-step", "--world-size", "2", "--profile-ranks",
                       "-1", "--profile-backend", "torch", "--profile-save-path", tmp_path / "p")
    assert code == 0
    assert "window:    none planned (no window flags given)\n" in out
    assert "http:      POST /start_profile (also /v1/) records from the next engine step until " \
           "POST /stop_profile" in out
    assert "Megatron's built-in 10/12 are not one; a server waits for POST /start_profile" in out
    assert f"{tmp_path / 'p' / 'estep_1-end'}/rank0." in out


def test_window_flags_from_the_environment_or_the_yaml_file_plan_the_window(capsys, tmp_path,
                                                                           monkeypatch):
    yaml_file = tmp_path / "p.yaml"
    yaml_file.write_text("profile_step_start: 4\nprofile_step_end: 6\n")
    code, out, _ = run(capsys, "--unit", "engine-step", "--profile-config", yaml_file,
                       "--profile-backend", "torch", "--profile-save-path", tmp_path / "p")
    assert code == 0 and "window:    engine steps 4-5 (warm-up at 3)\n" in out
    monkeypatch.setenv("MINDSPEED_PROF_STEP_START", "3")  # the end is the default's: 12
    code, out, _ = run(capsys, "--unit", "engine-step", "--profile-backend", "torch",
                       "--profile-save-path", tmp_path / "p")
    assert code == 0 and "window:    engine steps 3-11 (warm-up at 2)\n" in out
    assert "none planned" not in out


def test_profile_forwards_sets_the_http_start_defaults_on_the_dynamic_engine(capsys, tmp_path):
    code, out, _ = run(capsys, "--unit", "engine-step", "--profile-forwards", "2-4",
                       "--profile-backend", "torch", "--profile-save-path", tmp_path / "p",
                       "--json")
    report = json.loads(out)
    assert code == 0 and report["window"] is None
    assert (report["http"]["delay"], report["http"]["max"]) == (1, 3)


def test_training_keeps_megatrons_default_window(capsys, tmp_path):
    code, out, _ = run(capsys, "--profile-backend", "torch", "--profile-save-path", tmp_path / "p")
    assert code == 0 and "window:    iterations 10-11 (warm-up at 9)\n" in out


def test_show_config_says_who_may_call_the_profile_routes_and_the_http_windows_budget(
        capsys, tmp_path):
    base = ["--unit", "request", "--profile-backend", "torch", "--profile-save-path",
            tmp_path / "p"]
    code, out, _ = run(capsys, *base)
    assert code == 0
    assert "answers callers on this machine only (127.0.0.1, ::1; others get 403: " \
           "--profile-http-allow-remote opens them to the network)" in out
    assert "a window started over HTTP with no 'max' stops on each rank once it wrote 2 GB" in out
    code, out, _ = run(capsys, *base, "--profile-http-allow-remote", "--profile-max-gb", "7",
                       "--json")
    http = json.loads(out)["http"]
    assert http["budget_gb"] == 7.0 and "any host that reaches the server's port" in \
        http["callers"]
    assert "without --profile-http-token: any host that reaches the server's port can start " \
           "profile windows" in " ".join(json.loads(out)["notes"])
