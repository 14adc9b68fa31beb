"""``--profile-config FILE`` and ``MINDSPEED_PROF_*`` environment values.

Keys are the flag names with underscores (``profile_step_start``), so a YAML file, a flag and a
config field share one name. Unknown keys and wrong types are refused with the key, the value,
what was expected and, for typos, the closest valid key.
"""

import os

import yaml

from mindspeed_prof.config import KNOBS, describe_kind
from mindspeed_prof.errors import ConfigError

from .messages import closest

ENV_PREFIX = "MINDSPEED_PROF_"
# The environment form of --profile-config: a file to read, not a value (see env_config_path).
CONFIG_ENV = "MINDSPEED_PROF_CONFIG"
# Variables of ours that are switches of the tool, not config knobs.
_ENV_NOT_KNOBS = {"MINDSPEED_PROF_AUTOLOAD", "MINDSPEED_PROF_DEBUG", CONFIG_ENV,
                  "MINDSPEED_PROF_EXPORT_FORK",  # backends/torch_backend.py's EXPORT_FORK_ENV
                  # the readers' (check/summary): output/cache.py, output/parallel.py
                  "MINDSPEED_PROF_CACHE", "MINDSPEED_PROF_OUTPUT_WORKERS"}


def _value_fits(kind, value):
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float?":
        return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
    if kind in ("str", "path"):
        return isinstance(value, str) or (kind == "path" and value is None)
    if kind in ("choice", "choice?"):
        return isinstance(value, str) or (kind == "choice?" and value is None)
    if kind in ("ranks", "list", "steps"):
        items = value if isinstance(value, list) else [value]
        return all(isinstance(item, (str, int)) and not isinstance(item, bool) for item in items)
    return False


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
        if not _value_fits(spec.metadata["kind"], value):
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


def env_values(environ):
    """``MINDSPEED_PROF_STEP_START=5`` -> {"profile_step_start": 5}; values are YAML scalars."""
    values = {}
    for name, text in environ.items():
        if not name.startswith(ENV_PREFIX) or name in _ENV_NOT_KNOBS:
            continue
        suffix = name[len(ENV_PREFIX):].lower()
        key = "profile" if suffix == "profile" else "profile_" + suffix
        try:
            value = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError:
            value = text
        spec = KNOBS.get(key)
        if spec is not None and spec.metadata["kind"] in ("str", "path", "choice", "choice?"):
            value = text  # a path or name must not be re-typed by YAML (e.g. "1e3", "no")
        if spec is not None and spec.metadata["kind"] == "ranks" and value is None:
            value = text  # an empty $RANKS: refused as a list naming no rank, not as a type
        try:
            check_values({key: value}, f"environment variable {name}")
        except ConfigError as exc:
            if key not in KNOBS:
                raise ConfigError(f"environment variable {name} is not a mindspeed_prof setting; "
                                  f"unset it or use MINDSPEED_PROF_<FLAG> for a --profile-<flag>.")
            raise exc
        values[key] = value
    return values
