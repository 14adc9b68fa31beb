"""``mindspeed-prof trigger FILE --steps N [--ranks R...]``: profile a running job, now.

The job must have been started with ``--profile --profile-trigger-file FILE``. Rank 0 picks the
request up within ``--profile-trigger-poll`` iterations and every selected rank profiles the same
next N iterations. ``--status`` shows what each rank is doing; ``--wait S`` waits for the result.
"""

import os
import time

from mindspeed_prof.config import ranks
from mindspeed_prof.control import trigger
from mindspeed_prof.errors import ConfigError

HELP = "Ask a running job (started with --profile-trigger-file FILE) to profile the next N steps."


def add_arguments(parser):
    parser.add_argument("file", metavar="FILE", help="the job's --profile-trigger-file")
    parser.add_argument("--steps", type=int, default=None, metavar="N",
                        help="iterations to profile (required unless --status)")
    parser.add_argument("--ranks", nargs="+", default=None, metavar="R",
                        help="ranks for this request (default: the job's --profile-ranks)")
    parser.add_argument("--status", action="store_true", help="show each rank's state and exit")
    parser.add_argument("--wait", type=float, default=0, metavar="S",
                        help="wait up to S seconds for the profiled ranks to finish")


def run(args):
    if os.path.isdir(args.file):
        raise ConfigError(f"{args.file} is a directory; give the file the job was started "
                          f"with (--profile-trigger-file), e.g. "
                          f"{os.path.join(args.file, 'trigger.json')}.")
    if args.status:
        return _show(args.file)
    if args.steps is None or args.steps < 1:
        raise ConfigError(f"--steps {args.steps} must be a number of iterations >= 1, e.g. --steps 2")
    if args.ranks:
        ranks.parse_rank_tokens(args.ranks)  # same grammar as --profile-ranks; errors name it
    folder = os.path.dirname(os.path.abspath(args.file))
    if not os.path.isdir(folder):
        raise ConfigError(f"{args.file}: folder {folder} does not exist; give the path the job "
                          f"was started with (--profile-trigger-file).")
    request = trigger.write_request(args.file, args.steps, args.ranks)
    print(f"requested {args.steps} step(s) as {request['id']} in {args.file}; the job starts at "
          f"its next trigger check (every --profile-trigger-poll units: iterations, requests or "
          f"RL steps, as the job counts)")
    if args.wait:
        return _wait(args.file, request["created"], args.wait)
    return 0


def _show(path):
    statuses = trigger.read_statuses(path)
    if not statuses:
        print(f"no rank has reported on {path} yet (is the job running with "
              f"--profile-trigger-file {path}?)")
        return 1
    print(f"{'RANK':<6}{'STATE':<10}WINDOW")
    for rank in sorted(statuses):
        status = statuses[rank]
        window = status.get("window")
        shown = f"{window[0]}-{window[1] - 1}" if window and window[1] else ""
        print(f"{rank:<6}{status.get('state', '?'):<10}{shown}")
    return 0


def _wait(path, since, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        statuses = trigger.read_statuses(path)
        touched = [s for s in statuses.values() if s.get("updated", 0) >= since and s.get("window")]
        if touched and all(s.get("state") in trigger.FINAL_STATES for s in touched):
            _show(path)
            return 0 if all(s["state"] not in ("failed", "cut") for s in touched) else 1
        time.sleep(0.5)
    print(f"the job did not finish the request within {timeout:g} s")
    _show(path)
    return 1
