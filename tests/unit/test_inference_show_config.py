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
