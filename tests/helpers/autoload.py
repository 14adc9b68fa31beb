"""Whether the autoload .pth line is installed in this interpreter's site-packages, which an
editable install does not do: the e2e tests of the plain-torchrun route skip without it."""

import os
import site

import pytest


def autoload_installed():
    places = site.getsitepackages() + [site.getusersitepackages()]
    return any(os.path.exists(os.path.join(p, "mindspeed_prof_autoload.pth")) for p in places)


needs_autoload_pth = pytest.mark.skipif(
    not autoload_installed(),
    reason="autoload .pth not in this interpreter's site-packages (editable install): "
           "`pip install .`, or copy mindspeed_prof/autoload/mindspeed_prof_autoload.pth into "
           "site-packages")
