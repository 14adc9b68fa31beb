"""One RL role's ProfilerConfig from a role YAML file (or the same mapping as a dict).

    profile: true                      # top level: defaults for every role
    profile_save_path: ./profile_rl
    roles:                             # per role: overrides of the defaults
      actor:   {profile_steps: "10-11", profile_ranks: "0", profile_stages: [old_logprob, update]}
      ref:     {profile_steps: "10"}

Each process reads only its own role's block: a typo in another role's block is that role's
error, so roles stay decoupled in configuration as in control. Keys are checked by the training
YAML's own machinery (``yaml_file.check_values``), so a role block accepts exactly the keys a
``--profile-config`` file does. ``MINDSPEED_PROF_*`` environment variables override both levels,
as they override a training YAML.
"""

import os
from typing import Mapping, Optional, Union

from mindspeed_prof.config import names
from mindspeed_prof.config.profiler_config import ProfilerConfig
from mindspeed_prof.errors import ConfigError

from .messages import closest
from .resolve import build_config
from .yaml_file import CONFIG_ENV, check_values, env_config_path, env_values, read_mapping

ROLES_KEY = "roles"

ConfigSource = Union[None, str, "os.PathLike[str]", Mapping, ProfilerConfig]


def role_config(role: str, config: ConfigSource = None,
                environ: Optional[Mapping[str, str]] = None) -> ProfilerConfig:
    """``role``'s ProfilerConfig from a YAML path, a mapping of the same shape, a ready
    ProfilerConfig (used as it is) or None (the role YAML ``MINDSPEED_PROF_CONFIG`` names, if
    any, and ``MINDSPEED_PROF_*`` variables: one setting for every worker a launcher starts).
    Raises ConfigError naming the file, the role or key, and the fix."""
    names.role(role)  # the core checks it too; here it is refused before any file is read
    if isinstance(config, ProfilerConfig):
        return config
    environ = os.environ if environ is None else environ
    if config is None and env_config_path(environ):
        path = env_config_path(environ)
        mapping, where = read_mapping(path, f"{CONFIG_ENV}={path}"), f"{CONFIG_ENV}={path}"
    elif config is None:
        mapping, where = {}, "role_profiler(config=None)"
    elif isinstance(config, Mapping):
        mapping, where = dict(config), "role_profiler(config={...})"
    elif isinstance(config, (str, os.PathLike)):
        where = f"role config {os.fspath(config)}"
        mapping = read_mapping(os.fspath(config), where)
    else:
        raise ConfigError(f"role_profiler(config={config!r}): give a YAML file path, a dict of "
                          f"profile_* keys (with an optional 'roles' mapping) or a "
                          f"ProfilerConfig.")
    values, origin = _role_values(role, mapping, where)
    for key, value in env_values(environ).items():
        values[key], origin[key] = value, "environment"
    return build_config(values, origin)


def _role_values(role, mapping, where):
    roles = mapping.pop(ROLES_KEY, None)
    values = dict(check_values(mapping, where))
    origin = {key: where for key in values}
    if roles is None:
        return values, origin  # no per-role blocks: every role takes the top level
    if not isinstance(roles, Mapping):
        raise ConfigError(f"{where}: '{ROLES_KEY}' must map role names to their profile_* keys "
                          f"(e.g. roles: {{actor: {{profile_steps: '10'}}}}), not a "
                          f"{type(roles).__name__}.")
    if role not in roles:
        names = [str(name) for name in roles]
        close = closest(role, names)
        hint = f"did you mean {close!r}? " if close else ""
        raise ConfigError(f"{where}: unknown role {role!r}; {hint}'{ROLES_KEY}' lists "
                          f"{', '.join(names) or 'no role'}; add '{role}: {{}}' to take the "
                          f"top-level settings.")
    block = roles[role] or {}
    if not isinstance(block, Mapping):
        raise ConfigError(f"{where}: {ROLES_KEY}.{role} must be a mapping of profile_* keys, "
                          f"not a {type(block).__name__}.")
    block_where = f"{where}: {ROLES_KEY}.{role}"
    for key, value in check_values(dict(block), block_where).items():
        values[key], origin[key] = value, block_where
    return values, origin
