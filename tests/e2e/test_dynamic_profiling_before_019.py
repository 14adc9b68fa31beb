"""megatron-core 0.17/0.18's dynamic server with data-parallel replicas (opt-in tier of older
engines, tests/harness/dynamic/README.md): their servers relay no profile signal, and the
broadcast that carries our routes' commands needs one model replica, so two replicas (TP=1, DP=2
over gloo) get no routes. With no window flag nothing could ever open a window: the engine's
build is refused on every rank (before the coordinator or a front end exists), naming the
version and what to use; with window flags the server serves without the routes and says so. (One replica: tests/e2e/test_dynamic_profiling.py, on every version.)"""

import time

import pytest

from harness.dynamic import launch
from helpers.traces import step_ids, torch_traces
from harness.dynamic.marks import BEFORE_0_19, CORE, ENGINE_MARKS, needs_server_deps

pytestmark = [*ENGINE_MARKS,
              pytest.mark.skipif(not BEFORE_0_19, reason=f"the servers of megatron-core 0.17 "
                                                         f"and 0.18 (found {CORE or 'none'})"),
              needs_server_deps]
LAUNCHER = ("-m", "mindspeed_prof.launch")


def profile(save, *extra):
    return ["--no-reference", "--tp", "1", "--profile", "--profile-ranks", "-1",
            "--profile-save-path", str(save), "--profile-backend", "torch", *extra]


def test_two_replicas_with_profile_and_no_window_flag_are_refused_naming_the_version(tmp_path):
    with pytest.raises(RuntimeError) as failed:
        launch.start_server(tmp_path / "reports", nproc=2, args=profile(tmp_path / "prof"),
                            launcher_prefix=LAUNCHER)
    told = str(failed.value)
    assert f"megatron-core {CORE}'s dynamic server has no /start_profile relay across " \
           f"data-parallel replicas" in told
    assert "--profile-step-start" in told and "upgrade megatron-core to 0.19" in told
    assert "exitcode  : 2" in told  # rank 0's own exit code, in torchrun's summary
    assert "Traceback" not in told.split("ERROR: --profile")[0][-2000:]


def test_two_replicas_with_window_flags_serve_without_the_routes_and_say_so(tmp_path):
    server = launch.start_server(tmp_path / "reports", nproc=2,
                                 args=profile(tmp_path / "prof", "--profile-step-start", "2",
                                              "--profile-step-end", "4"),
                                 launcher_prefix=LAUNCHER)
    save = tmp_path / "prof"
    try:
        status, _, _ = server.post("/start_profile")
        answered, _, _ = server.completion("1 2 3", 4)  # 4 steps on the replica that takes it
        deadline = time.time() + 60
        while not torch_traces(save) and time.time() < deadline:
            time.sleep(0.5)  # the window from the flags is written after its last step
    finally:
        run = server.stop()
    assert status == 404 and answered == 200
    assert "POST /start_profile and /stop_profile are not added" in run.stderr
    # The flags' window, on the replica that served the request: engine steps 2 and 3.
    assert [step_ids(t) for t in torch_traces(save)] == [[2, 3]]
