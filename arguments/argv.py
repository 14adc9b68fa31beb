"""What the command line itself says: which profile flags were typed, and the raw rank tokens.

YAML and environment values fill only the knobs the command line did not set, so we need to know
what was typed, not just the parsed values (a typed value may equal the default).
"""

from mindspeed_prof.config.profiler_config import KNOBS, flag_name

RANKS_FLAG = "--profile-ranks"
_FLAG_TO_KNOB = {flag_name(knob): knob for knob in KNOBS}


def _is_option(token):
    return token.startswith("--") or (token.startswith("-") and token[1:2].isalpha())


def explicit_knobs(argv):
    """Knob names whose flag appears in ``argv`` (``--flag value`` or ``--flag=value``)."""
    found = set()
    for token in argv:
        name = token.split("=", 1)[0]
        if name in _FLAG_TO_KNOB:
            found.add(_FLAG_TO_KNOB[name])
    return found


def profile_tokens_present(argv):
    """True when the command line mentions any profile flag: the activation test."""
    return any(token.split("=", 1)[0] in _FLAG_TO_KNOB for token in argv)


def rank_tokens(argv):
    """The values typed after the last ``--profile-ranks`` (None when the flag is absent)."""
    tokens = None
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == RANKS_FLAG:
            tokens, index = [], index + 1
            while index < len(argv) and not _is_option(argv[index]):
                tokens.append(argv[index])
                index += 1
            continue
        if token.startswith(RANKS_FLAG + "="):
            tokens = [token.split("=", 1)[1]]
        index += 1
    return tokens


def ints_only_ranks_argv(argv, int_ranks):
    """``argv`` with ``--profile-ranks`` values as plain ints, for a host that parses them as int.

    Megatron declares ``--profile-ranks`` with ``type=int``; our ranges (``0-7``), ``all`` and
    selectors would make its strict parser abort. The original tokens are kept by the caller and
    used for ProfilerConfig; the host sees an equivalent integer list (``-1`` for all ranks).
    """
    result, index = [], 0
    replacement = [str(rank) for rank in int_ranks] if int_ranks else ["-1"]
    while index < len(argv):
        token = argv[index]
        if token == RANKS_FLAG or token.startswith(RANKS_FLAG + "="):
            index += 1
            if token == RANKS_FLAG:
                while index < len(argv) and not _is_option(argv[index]):
                    index += 1
            result.append(RANKS_FLAG)
            result.extend(replacement)
            continue
        result.append(token)
        index += 1
    return result
