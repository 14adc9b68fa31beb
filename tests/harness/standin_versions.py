"""Which Megatron-LM versions the stand-in emulates, and which one a run gets by default.

Loaded by the stand-in's ``_harness`` (by path) and imported by ``launch``; it imports nothing
heavy, so a test process can ask without installing the CPU shim into itself.
"""

SUPPORTED_VERSIONS = ("0.12.3", "0.13.1", "0.14.0", "0.15.3", "0.16.1", "0.17.1", "0.18.2",
                      "0.19.0")


def release(text):
    return tuple(int(part) for part in text.split(".")[:2])


def default_version():
    """The newest emulated release not newer than the installed megatron-core (0.16.1 -> 0.16.1,
    0.19.2 -> 0.19.0): by default the training side matches the core it runs on."""
    try:
        from importlib.metadata import version
        core = release(version("megatron-core"))
    except Exception:  # noqa: BLE001  (no metadata: a source checkout on the path)
        return "0.16.1"
    fitting = [v for v in SUPPORTED_VERSIONS if release(v) <= core]
    return fitting[-1] if fitting else SUPPORTED_VERSIONS[0]
