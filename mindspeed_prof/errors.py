"""Exception types shared by every layer.

A ``ConfigError`` is a usage error: the user can fix it by changing a flag, a YAML key or a
path. Entry points turn it into exit code 2 and print only its message (no traceback).
"""


class ConfigError(ValueError):
    """A flag, YAML key or environment value that cannot work; the message names it and the fix."""


class BackendUnavailable(ConfigError):
    """The requested profiler backend cannot run in this environment."""
