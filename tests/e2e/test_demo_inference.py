"""scripts/demo_inference.sh, run as a newcomer runs it: the text-generation server on 127.0.0.1
under torchrun with profiling armed, a window started and stopped over HTTP with curl, then
check and summary; it exits 0 and leaves every rank's requests 2-3 valid."""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
DEMO = REPO / "scripts" / "demo_inference.sh"

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("curl") is None, reason="the demo uses curl")]


def test_the_inference_demo_profiles_requests_2_and_3_over_http_and_check_passes(tmp_path):
    env = demo_env(tmp_path)
    out = tmp_path / "demo"
    result = subprocess.run(["bash", str(DEMO), str(out)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    said = f"{result.stdout[-4000:]}\n--- stderr ---\n{result.stderr[-3000:]}"
    assert result.returncode == 0, said
    assert "POST /start_profile -> 200" in result.stdout and \
        "POST /stop_profile -> 200" in result.stdout, said
    assert "2 valid (2 checked): exit 0" in result.stdout, said
    assert "Requests (inference: latency, forwards and top operators per request)" in \
        result.stdout, said
    for rank in (0, 1):
        folders = sorted(p.parent.name for p in (out / "profile").glob(f"req_*/rank{rank}.*"))
        assert folders == ["req_2-2", "req_3-3"], said
        manifest = json.loads((out / "profile" / f"profile_manifest_rank{rank}.json").read_text())
        assert manifest["exit"]["reason"] == ("interrupted" if rank == 0 else "peer ended")


def demo_env(tmp_path, shadow=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINDSPEED_PROF_")}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    if shadow is not None:  # a folder whose modules hide the installed ones
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shadow), env.get("PYTHONPATH")]))
    return env


def test_a_package_the_server_imports_missing_stops_the_demo_before_torchrun_in_one_line(
        tmp_path):
    # flask-restful as a clean clone's `pip install '.[demo]'` once lacked it: the module is
    # shadowed by one that cannot be imported, so no environment has to be built
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "flask_restful.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'flask_restful'\", name='flask_restful')\n")
    result = subprocess.run(["bash", str(DEMO), str(tmp_path / "demo")], cwd=tmp_path,
                            env=demo_env(tmp_path, shadow), capture_output=True, text=True,
                            timeout=300)
    said = result.stdout + "\n--- stderr ---\n" + result.stderr
    assert result.returncode == 1, said
    assert "== 1." not in result.stdout and not (tmp_path / "demo" / "server.log").exists(), said
    assert result.stdout.splitlines() == [
        "scripts/demo_inference.sh needs flask_restful (pip package flask-restful) does not "
        f"import in {sys.executable}: ModuleNotFoundError: No module named 'flask_restful'; "
        "install the demo's packages: pip install '.[demo]'"], said
    assert "Traceback" not in said


def test_a_rank_that_dies_while_the_window_is_open_fails_the_demo_naming_the_rank(tmp_path):
    out = tmp_path / "demo"
    demo = subprocess.Popen(["bash", str(DEMO), str(out)], cwd=tmp_path, env=demo_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines = []
    try:
        for line in demo.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("POST /start_profile -> 200"):
                pid = json.loads((out / "reports" / "server_rank1.json").read_text())["pid"]
                os.kill(pid, signal.SIGKILL)  # rank 1 dies as an out-of-memory kill ends it
        demo.wait(timeout=300)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
    said = "\n".join(lines)
    assert demo.returncode == 1, said
    assert not any(line.startswith("POST /stop_profile") for line in lines), said
    last = lines[-1]
    assert last.startswith("the inference demo failed: "), said
    assert re.search(r"rank\(s\) (0 )?1 died", last), said
    assert "(torchrun: rank 1 failed first)" in last, said
    assert last.endswith(f"full log: {out / 'server.log'}"), said
    assert "-- the end of" in said  # the log's tail comes before the line
