"""Why a profiler output file cannot be used."""


class CorruptFile(ValueError):
    """The file exists but cannot be read as what its name promises; the message says why."""
