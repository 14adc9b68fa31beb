"""The C compiler a build of this checkout's extension uses, for the tests that build C."""

import os
import sysconfig


def c_compiler() -> str:
    """``$CC``, else the one Python was built with, else ``cc`` (its first word: no flags)."""
    return (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
