import json
import os


def event(name, **details):
    """Append one JSON line to $FAKE_MINDSPEED_LOG, so tests can see what MindSpeed did."""
    path = os.environ.get("FAKE_MINDSPEED_LOG")
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps({"event": name, "pid": os.getpid(), **details}) + "\n")
