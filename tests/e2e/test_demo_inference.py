"""scripts/demo_inference.sh, run as a newcomer runs it: the text-generation server on 127.0.0.1
under torchrun with profiling armed, a window started and stopped over HTTP with curl, then
check and summary; it exits 0 and leaves every rank's requests 2-3 valid."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
DEMO = REPO / "scripts" / "demo_inference.sh"

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("curl") is None, reason="the demo uses curl")]


def test_the_inference_demo_profiles_requests_2_and_3_over_http_and_check_passes(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINDSPEED_PROF_")}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
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
