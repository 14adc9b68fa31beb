"""An imitation of verl 0.9.1's worker-side shape for mindspeed_prof's verl integration tests
(no Ray, no FSDP, no vLLM): the names, signatures, ``@register`` dispatch attributes and call
order the integration relies on, each taken from verl 0.9.1's code (the file it imitates is named
in each module). ``tests/e2e/test_real_verl.py`` checks these shapes against the real verl.

``FAKE_VERL_VERSION`` (default 0.9.1) is ``verl.__version__``; ``FAKE_VERL_SHAPE`` picks a worker
whose shape changed (see workers/engine_workers.py), read at import.
"""

import os

__version__ = os.environ.get("FAKE_VERL_VERSION", "0.9.1")
