"""What ``show-config`` says about serving processes: the HTTP control of a server, and the
dynamic engine's steps (``--unit request`` / ``--unit engine-step``)."""

from mindspeed_prof.control.http_control import DEFAULT_WINDOW_GB, engine_defaults
from mindspeed_prof.config.units import ENGINE_STEP
from mindspeed_prof.config.window import OPEN_ENDED, StepSchedule


def http_plan(config, unit):
    """What ``POST /start_profile`` without a body does on this server."""
    delay, length = engine_defaults(config) if unit is ENGINE_STEP else (0, 0)
    if length:
        what = (f"records {unit.plural} {delay + 1}-{delay + length} of each window "
                f"(delay {delay}, max {length}; from --profile-forwards)")
    else:
        what = (f"records from the next {unit.name}" + (f" after {delay} skipped" if delay else "")
                + " until POST /stop_profile")
    return {"delay": delay, "max": length or None,
            "describe": f"POST /start_profile (also /v1/) {what}; a body may say "
                        f'{{"prefix": "name", "delay": N, "max": N}}; one window at a time',
            "callers": callers(config), "budget_gb": budget_gb(config),
            "budget": budget_words(config, unit)}


def callers(config):
    """Who the profile routes answer (DESIGN §7)."""
    if config.profile_http_allow_remote:
        where = "any host that reaches the server's port (--profile-http-allow-remote)"
    else:
        where = ("callers on this machine only (127.0.0.1, ::1; others get 403: "
                 "--profile-http-allow-remote opens them to the network)")
    token = ("; each must send 'Authorization: Bearer <token>' (--profile-http-token is set)"
             if config.profile_http_token else "")
    return where + token


def budget_gb(config):
    """Each rank's byte budget (GB) for a window started over HTTP with no 'max'."""
    return config.profile_max_gb if config.profile_max_gb is not None else DEFAULT_WINDOW_GB


def budget_words(config, unit):
    if config.profile_max_gb is not None:
        return (f"windows started over HTTP share --profile-max-gb {config.profile_max_gb:g} "
                f"with every other window of the job")
    return (f"a window started over HTTP with no 'max' stops on each rank once it wrote "
            f"{DEFAULT_WINDOW_GB:g} GB (the default budget of such windows: no "
            f"--profile-max-gb given); one with 'max' records its {unit.plural}")


def http_example(plan):
    """The session of an HTTP start before unit 1 (for the profiler call shown)."""
    return StepSchedule(skip_first=1, warmup=0, active=1 if plan.session_per_unit else OPEN_ENDED)


def request_notes(config):
    if not config.profile_forwards:
        return []
    first, last = config.profile_forwards[0]
    return [f"--profile-forwards {first}-{last}: each recorded request's session covers only its "
            f"forwards {first}-{last} (forward 1 is the prefill); a request with fewer than "
            f"{first} forwards records nothing"]


def waiting_note(unit):
    return (f"no window flag was given (--profile-step-start/-end, --profile-steps, "
            f"--profile-every): no window is planned, and Megatron's built-in 10/12 are not one; "
            f"a server waits for POST /start_profile, an offline {unit.name} loop records "
            f"nothing")


def engine_notes(config):
    notes = ["the window counts engine steps: one DynamicInferenceEngine.async_step, or a dummy "
             "forward the server loop counts, numbered as the engine's step log numbers them "
             "(context.step_count, from 1); trace step ids are those numbers",
             "each window is one profiler session on the thread that runs the engine loop, in "
             "estep_{first}-{last}/ (estep_{first}-end/ until a stop; under {prefix}/ when the "
             "start named one); every forward is a range named after what it carried, e.g. "
             "'mixed 1p+2d 23t'"]
    if config.profile_forwards:
        first, last = config.profile_forwards[0]
        notes.append(f"--profile-forwards {first}-{last}: a window started over HTTP records its "
                     f"engine steps {first}-{last} (vLLM's delay {first - 1}, max "
                     f"{last - first + 1}) unless the start body says otherwise")
    return notes
