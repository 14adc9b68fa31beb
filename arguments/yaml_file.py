"""``--profile-config FILE`` and ``MINDSPEED_PROF_*`` environment values.

Keys are the flag names with underscores (``profile_step_start``), so a YAML file, a flag and a
config field share one name. Unknown keys and wrong types are refused with the key, the value,
what was expected and, for typos, the closest valid key.
"""

import os

import yaml

from mindspeed_prof.config.profiler_config import KNOBS, describe_kind
from mindspeed_prof.errors import ConfigError

from .messages import closest

ENV_PREFIX = "MINDSPEED_PROF_"
# The environment form of --profile-config: a file to read, not a value (see env_config_path).
CONFIG_ENV = "MINDSPEED_PROF_CONFIG"
# Variables of ours that are switches of the tool, not config knobs.
_ENV_NOT_KNOBS = {"MINDSPEED_PROF_AUTOLOAD", "MINDSPEED_PROF_DEBUG", CONFIG_ENV,
                  # the readers' (check/summary): output/cache.py, output/parallel.py
                  "MINDSPEED_PROF_CACHE", "MINDSPEED_PROF_OUTPUT_WORKERS"}


def check_values(values, where):
    """Refuse unknown keys and wrongly typed values; ``where`` names their source in messages."""
    for key, value in values.items():
        if key == "roles":  # arguments/roles.py takes it out before anything else is checked
            raise ConfigError(f"{where}: 'roles' is an RL role YAML's key, read by "
                              f"mindspeed_prof.role_profiler in each role's worker; a training "
                              f"run takes only profile_* keys: drop 'roles' here.")
        if key not in KNOBS or key == "profile_config":
            valid = [k for k in KNOBS if k != "profile_config"]
            close = closest(key, valid)
            hint = f"did you mean {close!r}? " if close else ""
            raise ConfigError(f"{where}: unknown key {key!r}; {hint}valid keys are the flag names "
                              f"with underscores (e.g. profile_step_start).")
        spec = KNOBS[key]
        if not spec.metadata["kind"].accepts(value):
            raise ConfigError(f"{where}: key {key} has value {value!r} "
                              f"({type(value).__name__}); expected {describe_kind(spec)}.")
    return values


def load_yaml(path, flag="--profile-config"):
    """The knob values in a ``--profile-config`` file, checked; ``flag`` names where the path
    came from in messages (the flag, or ``MINDSPEED_PROF_CONFIG``)."""
    where = f"{flag} {path}"
    return check_values(read_mapping(path, where), where)


def env_config_path(environ):
    """``MINDSPEED_PROF_CONFIG=FILE``, the environment form of ``--profile-config FILE``."""
    path = environ.get(CONFIG_ENV)
    if path is not None and not path.strip():
        raise ConfigError(f"environment variable {CONFIG_ENV} is empty; give the path of a YAML "
                          f"file, or unset it.")
    return path


def read_mapping(path, where):
    """The top-level mapping of a YAML file, unchecked (``where`` names it in messages)."""
    if not os.path.isfile(path):
        raise ConfigError(f"{where}: file not found; give the path of an existing YAML file.")
    try:
        with open(path) as handle:
            data = yaml.safe_load(handle)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: not valid YAML{at} ({problem}); fix the syntax.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot be read ({exc}); check the file.") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: the top level must be a mapping of profile_* keys, "
                          f"not a {type(data).__name__}.")
    return data


def env_name(knob):
    """``profile_step_start`` -> ``MINDSPEED_PROF_STEP_START`` (``profile`` -> ``MINDSPEED_PROF_PROFILE``)."""
    suffix = "PROFILE" if knob == "profile" else knob[len("profile_"):].upper()
    return ENV_PREFIX + suffix


def env_values(environ):
    """``MINDSPEED_PROF_STEP_START=5`` -> {"profile_step_start": 5}; values are YAML scalars."""
    values = {}
    for name, text in environ.items():
        if not name.startswith(ENV_PREFIX) or name in _ENV_NOT_KNOBS:
            continue
        suffix = name[len(ENV_PREFIX):].lower()
        key = "profile" if suffix == "profile" else "profile_" + suffix
        spec = KNOBS.get(key)
        value = spec.metadata["kind"].from_env(text) if spec is not None else text
        try:
            check_values({key: value}, f"environment variable {name}")
        except ConfigError as exc:
            if key not in KNOBS:
                known = [env_name(k) for k in KNOBS if k != "profile_config"] + sorted(
                    _ENV_NOT_KNOBS)
                close = closest(name, known)
                hint = f"did you mean {close}? " if close else ""
                raise ConfigError(f"environment variable {name} is not a mindspeed_prof setting; "
                                  f"{hint}unset it or use MINDSPEED_PROF_<FLAG> for a "
                                  f"--profile-<flag>.") from None
            raise exc
        values[key] = value
    return values
