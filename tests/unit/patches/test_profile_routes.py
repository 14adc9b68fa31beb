"""patches/profile_routes.py's routes as the servers serve them, in-process: the static server's
Flask routes (MegatronServer's app) and the dynamic server's Quart blueprint, called through the
frameworks' own test clients. Who may call them (loopback by default, the opt-in and its
token), which starts they refuse (400 with the reason), and how rank 0 of the static server
follows a window with a length when it does not record itself (--profile-ranks 1)."""

import asyncio

import pytest

from mindspeed_prof import ProfilerConfig
from mindspeed_prof.arguments import parse_profile_flags
from mindspeed_prof.drivers.inference import RequestDriver
from mindspeed_prof.patches import profile_routes, serving
from mindspeed_prof.patches.state import state

flask = pytest.importorskip("flask")
REMOTE = "10.1.2.3"


def _config(tmp_path, **overrides):
    values = dict(profile=True, profile_save_path=str(tmp_path / "prof"),
                  profile_backend="torch", profile_analyse="sync")
    values.update(overrides)
    return ProfilerConfig(**values)


@pytest.fixture
def served(monkeypatch, tmp_path):
    """A static server's rank 0 with --profile (one process: rank 0 of 1): its Flask app with
    our routes, and the config the routes read."""
    monkeypatch.setattr(state, "config", _config(tmp_path))
    monkeypatch.setattr(state, "training", False)
    monkeypatch.setattr(state, "inference", state.inference)
    monkeypatch.setattr(serving, "control", None)
    monkeypatch.setattr(profile_routes, "_pending", [])
    monkeypatch.setattr(profile_routes, "_relayed", 0, raising=False)
    app = flask.Flask("megatron_server")
    profile_routes._add_flask_routes(app)
    return app.test_client()


def post(client, path, body=None, remote="127.0.0.1", headers=None):
    answer = client.post(path, json=body, environ_base={"REMOTE_ADDR": remote},
                         headers=headers or {})
    return answer.status_code, answer.get_json()


@pytest.mark.parametrize("prefix,reason", [
    ("x_ascend_pt", "read as one NPU capture"),
    ("cluster_analysis_output", "the readers skip this folder"),
    ("__pycache__", "the readers skip this folder"),
    ("profile_manifest_rank0.json", "the name of a file mindspeed_prof or torch_npu writes"),
    ("rank0.17.pt.trace.json", "the name of a file mindspeed_prof or torch_npu writes"),
    ("req_2-3", "the name of a window folder"),
    ("notes.txt", "names a file that exists in --profile-save-path"),
])
def test_a_start_whose_prefix_the_readers_would_not_see_or_that_names_a_file_is_refused(
        served, tmp_path, prefix, reason):
    save = tmp_path / "prof"
    save.mkdir()
    (save / "notes.txt").write_text("not a folder")
    status, answer = post(served, "/start_profile", {"prefix": prefix, "max": 1})
    assert status == 400 and reason in answer["details"], answer
    assert profile_routes._pending == []  # nothing reaches the ranks
    status, _ = post(served, "/start_profile", {"prefix": "decode", "max": 1})
    assert status == 200  # the one window was not taken by the refused start


def test_the_readers_skip_the_folders_a_start_is_refused_for_by_one_definition():
    from mindspeed_prof import layout
    from mindspeed_prof.output.read import discover

    assert discover.SKIP_DIRS is layout.SKIPPED_DIRS
    assert all(layout.reserved_name(name) for name in layout.SKIPPED_DIRS)


@pytest.mark.parametrize("field", ["delay", "max"])
def test_a_delay_or_max_no_window_can_reach_is_refused_with_the_bound(served, field):
    status, answer = post(served, "/start_profile", {field: 2**31})
    assert status == 400
    assert f"'{field}' 2147483648 is past what a window can reach: at most 1000000000" in \
        answer["details"]
    assert post(served, "/start_profile", {field: 10**9})[0] == 200


def test_the_profile_routes_answer_only_callers_on_this_machine_by_default(served):
    for path in ("/start_profile", "/v1/stop_profile"):
        status, answer = post(served, path, remote=REMOTE)
        assert status == 403, answer
        assert f"answer only callers on this machine (127.0.0.1, ::1), not {REMOTE}" in \
            answer["details"]
        assert "--profile-http-allow-remote" in answer["details"]
        assert "MINDSPEED_PROF_HTTP_TOKEN" in answer["details"]
    assert profile_routes._pending == []
    assert post(served, "/start_profile", remote="::1")[0] == 200
    assert post(served, "/stop_profile", remote="::ffff:127.0.0.1")[0] == 200


def test_the_opt_in_opens_the_routes_to_the_network_behind_the_shared_token(
        served, monkeypatch, tmp_path):
    monkeypatch.setattr(state, "config", _config(tmp_path, profile_http_allow_remote=True,
                                                 profile_http_token="s3cret-token"))
    for token in (None, "wrong", "s3cret-toke"):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        status, answer = post(served, "/start_profile", remote=REMOTE, headers=headers)
        assert status == 401 and "Authorization: Bearer <token>" in answer["details"]
    # The token is asked of callers on this machine too: other users of it reach loopback.
    assert post(served, "/start_profile")[0] == 401
    good = {"Authorization": "Bearer s3cret-token"}
    assert post(served, "/start_profile", remote=REMOTE, headers=good)[0] == 200
    assert post(served, "/stop_profile", remote=REMOTE, headers=good)[0] == 200
    monkeypatch.setattr(state, "config", _config(tmp_path, profile_http_allow_remote=True))
    assert post(served, "/start_profile", remote=REMOTE)[0] == 200  # opted in, no token


def test_the_opt_in_is_a_flag_a_yaml_key_and_an_environment_variable_and_the_token_stays_secret(
        tmp_path):
    by_flag = parse_profile_flags(["--profile", "--profile-http-allow-remote",
                                   "--profile-http-token", "t0k"], environ={})
    by_env = parse_profile_flags(["--profile"], environ={
        "MINDSPEED_PROF_HTTP_ALLOW_REMOTE": "1", "MINDSPEED_PROF_HTTP_TOKEN": "t0k"})
    yaml_file = tmp_path / "p.yaml"
    yaml_file.write_text("profile_http_allow_remote: true\nprofile_http_token: t0k\n")
    by_yaml = parse_profile_flags(["--profile", "--profile-config", str(yaml_file)], environ={})
    for config in (by_flag, by_env, by_yaml):
        assert (config.profile_http_allow_remote, config.profile_http_token) == (True, "t0k")
        assert config.as_dict()["profile_http_token"] == "(set)"  # what a manifest records
        assert "t0k" not in repr(config)
    assert parse_profile_flags(["--profile"], environ={}).profile_http_allow_remote is False
    from mindspeed_prof.errors import ConfigError

    with pytest.raises(ConfigError, match="--profile-http-token must be a non-empty token"):
        parse_profile_flags(["--profile", "--profile-http-token", "a b"], environ={})


def test_the_dynamic_servers_quart_routes_refuse_remote_callers_and_bad_prefixes(
        served, monkeypatch):
    quart = pytest.importorskip("quart")
    monkeypatch.setattr(profile_routes.dynamic_control, "send", lambda *a, **k: None)
    app = quart.Quart("dynamic_front_end")
    app.config["client"] = object()
    app.register_blueprint(profile_routes._quart_blueprint())

    async def call(path, body=None, remote="127.0.0.1"):
        client = app.test_client()
        answer = await client.post(path, json=body, scope_base={"client": (remote, 40000)})
        return answer.status_code, await answer.get_json()

    async def calls():
        return [await call("/start_profile", remote=REMOTE),
                await call("/start_profile", {"prefix": "x_ascend_pt"}),
                await call("/start_profile", {"delay": 2**31}),
                await call("/v1/start_profile", {"max": 2}),
                await call("/stop_profile", remote=REMOTE)]

    remote, hidden, unreachable, started, remote_stop = asyncio.run(calls())
    assert remote[0] == 403 and remote_stop[0] == 403
    assert hidden[0] == 400 and "read as one NPU capture" in hidden[1]["details"]
    assert unreachable[0] == 400 and "at most 1000000000" in unreachable[1]["details"]
    assert started[0] == 200 and started[1]["max"] == 2


def _run_mcore_engine(prompt):
    """What Megatron's run_mcore_engine does for one request: the engine's generate, which the
    request driver counts (a no-op on a rank that records nothing)."""
    return state.inference.serve(lambda: prompt, (), {})


def test_rank_0_that_records_nothing_follows_a_window_with_max_to_its_end(
        served, monkeypatch, tmp_path, capsys):
    # --profile-ranks 1 on a TP=2 server: rank 0 serves HTTP and records nothing.
    driver = RequestDriver(_config(tmp_path, profile_ranks=["1"]), rank=0, world_size=2)
    driver.arm(planned=False)
    monkeypatch.setattr(state, "inference", driver)
    engine = profile_routes.mindspeed_prof_run_mcore_engine_wrapper(_run_mcore_engine)
    engine("request 1")
    assert post(served, "/start_profile", {"max": 1})[0] == 200
    engine("request 2")  # the window's one request (recorded on rank 1)
    status, answer = post(served, "/stop_profile")
    assert status == 409 and "ended by itself after its 'max' units" in answer["details"]
    assert post(served, "/start_profile", {"max": 1, "delay": 1})[0] == 200
    engine("request 3")
    assert post(served, "/start_profile")[0] == 409  # request 4 is the window's
    engine("request 4")
    assert post(served, "/start_profile")[0] == 200
    out = capsys.readouterr().out
    assert "POST /start_profile: window 1 relayed to the profiled ranks (rank 0 is not one of " \
           "--profile-ranks) before request 2" in out
    assert "window 2 relayed to the profiled ranks (rank 0 is not one of --profile-ranks) " \
           "before request 3" in out


def test_a_window_rank_0_stopped_at_its_budget_is_over_for_the_routes_too(
        served, monkeypatch, tmp_path, capsys):
    # An HTTP start with no max runs under its default budget: once rank 0 wrote it, the window
    # ends there, and the routes must say so instead of "a window is already running" (409)
    # until a client stops a window that no longer records.
    from mindspeed_prof.control import http_control

    monkeypatch.setattr(http_control, "DEFAULT_WINDOW_GB", 1e-9)  # its first trace crosses it
    driver = RequestDriver(_config(tmp_path), rank=0, world_size=1)
    driver.arm(planned=False)
    monkeypatch.setattr(state, "inference", driver)
    engine = profile_routes.mindspeed_prof_run_mcore_engine_wrapper(_run_mcore_engine)
    engine("request 1")
    assert post(served, "/start_profile")[0] == 200
    engine("request 2")  # recorded, then stopped: it wrote its budget
    engine("request 3")
    status, answer = post(served, "/stop_profile")
    assert status == 409, answer
    assert "window 1 ended on rank 0 before a stop" in answer["details"]
    assert "its budget" in answer["details"]
    status, answer = post(served, "/start_profile", {"max": 1})
    assert status == 200, answer
    engine("request 4")
    driver.close("finished", "test over")


# -- bodies the routes refuse (issue 35 §2) -----------------------------------------------------

NESTED = b"[" * 100_000 + b"]" * 100_000
TOO_LARGE = b'{"prefix": "' + b"a" * (1 << 20) + b'"}'


def raw_post(client, path, data):
    answer = client.post(path, data=data, content_type="application/json",
                         environ_base={"REMOTE_ADDR": "127.0.0.1"})
    return answer.status_code, answer.get_json(silent=True), answer.get_data(as_text=True)


def test_the_static_servers_routes_say_what_a_body_is_instead_of_a_500_or_not_json(served):
    # Before: 100,000 nested levels answered Flask's HTML 500 (RecursionError); `null` was
    # called "not JSON"; a body of any size was read whole (no bound).
    status, answer, text = raw_post(served, "/start_profile", NESTED)
    assert status == 400 and answer is not None, text[:200]
    assert "nests arrays or objects deeper than the parser follows" in answer["details"]
    status, answer, _ = raw_post(served, "/start_profile", b"null")
    assert status == 400 and "the body is JSON null, not an object" in answer["details"]
    assert "not JSON" not in answer["details"]
    assert raw_post(served, "/start_profile", b"{nope")[1]["details"].startswith(
        "the body is not JSON")
    for path in ("/start_profile", "/stop_profile"):
        status, answer, _ = raw_post(served, path, TOO_LARGE)
        assert status == 413, (path, answer)
        assert f"the body is {len(TOO_LARGE)} bytes; the profile routes take at most " \
               f"1048576 bytes" in answer["details"]
    assert profile_routes._pending == []  # nothing refused reached the ranks
    assert raw_post(served, "/start_profile", b'{"max": 2}')[0] == 200


def test_the_dynamic_servers_routes_refuse_the_same_bodies_the_same_way(served, monkeypatch):
    quart = pytest.importorskip("quart")
    monkeypatch.setattr(profile_routes.dynamic_control, "send", lambda *a, **k: None)
    app = quart.Quart("dynamic_front_end")
    app.config["client"] = object()
    app.register_blueprint(profile_routes._quart_blueprint())

    async def call(path, data):
        answer = await app.test_client().post(path, data=data,
                                              headers={"Content-Type": "application/json"},
                                              scope_base={"client": ("127.0.0.1", 40000)})
        return answer.status_code, await answer.get_json()

    async def calls():
        return [await call("/start_profile", NESTED), await call("/start_profile", b"null"),
                await call("/start_profile", TOO_LARGE), await call("/stop_profile", TOO_LARGE),
                await call("/start_profile", b'{"max": 2}')]

    nested, null, large_start, large_stop, fine = asyncio.run(calls())
    assert nested[0] == 400 and "deeper than the parser follows" in nested[1]["details"]
    assert null[0] == 400 and "JSON null" in null[1]["details"]
    assert large_start[0] == 413 and large_stop[0] == 413
    assert "at most 1048576 bytes" in large_start[1]["details"]
    assert fine[0] == 200


def test_a_token_no_http_client_can_present_is_refused_at_start_up_naming_the_flag():
    # Before: accepted; headers arrive as latin-1, so no UTF-8 client could ever match it.
    from mindspeed_prof.errors import ConfigError

    with pytest.raises(ConfigError, match="--profile-http-token must be ASCII"):
        parse_profile_flags(["--profile", "--profile-http-token", "pässwörd"], environ={})
    with pytest.raises(ConfigError, match="--profile-http-token must be ASCII"):
        parse_profile_flags(["--profile"], environ={"MINDSPEED_PROF_HTTP_TOKEN": "pässwörd"})
    from helpers.usage import assert_usage_error, run_cli

    code, err = run_cli("show-config", "--profile", "--profile-http-token", "pässwörd")
    assert_usage_error(code, err, ["--profile-http-token"])
    assert "pässwörd" not in err  # a secret is never echoed
