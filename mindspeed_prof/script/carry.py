"""How ``PROFILE_ARGS`` is written so that the flags reach the training command word for word.

A command written in the script gets a bash array (``"${PROFILE_ARGS[@]}"``). A command written in
text that expands before it runs (``CMD="..."`` run by ``sh -c``, an ``sbatch <<EOF`` heredoc)
gets ``$PROFILE_ARGS``, whose value is pasted there and then goes through the steps the text
takes (``embedded.Run.steps``): parsed as shell code, read inside ``"..."``, split at blanks. The
value is encoded for those steps, innermost last, so that what comes out is the flags.
"""

import re
import shlex
from typing import Optional, Sequence

from ..errors import ConfigError
from .embedded import CODE, DOUBLE, SINGLE, WORDS

VARIABLE = "PROFILE_ARGS"
ARRAY_REF = f'"${{{VARIABLE}[@]}}"'
STRING_REF = f"${VARIABLE}"
MARKER = "# mindspeed-prof adapt-script: the --profile* flags of the training command below."
MARKERS = {"training": MARKER, "inference": MARKER.replace("training", "inference")}


def profile_args_value(profile_args: Sequence[str], posix: bool = False,
                       why: Optional[str] = None) -> str:
    """The right-hand side of ``PROFILE_ARGS=``: a bash array, or a string for POSIX sh."""
    if not posix:
        return "(" + " ".join(shlex.quote(token) for token in profile_args) + ")"
    why = why or "the script's #! line names sh"
    return plain_string(profile_args, f"a POSIX sh string variable ({why})", "or a bash script")


def plain_string(profile_args, carrier, alternative):
    """``"--a b"`` when every flag is one plain word, else a usage error naming the carrier."""
    for token in profile_args:
        if shlex.quote(token) != token:
            raise ConfigError(f"{token!r} cannot be passed through {carrier}; use a value "
                              f"without spaces or quotes, {alternative}")
    return '"' + " ".join(profile_args) + '"'


def reference(launch, posix):
    """How the command refers to the flags: the array, or ``$PROFILE_ARGS`` in expanding text.

    ``posix`` is the script's; a launch in a heredoc taken as written has its reader's.
    """
    body = launch.held
    if body is not None:
        posix = body.posix
    return STRING_REF if posix or (body is not None and body.expands) else ARRAY_REF


def value(launch, profile_args, posix):
    """The right-hand side of ``PROFILE_ARGS=`` for ``launch``."""
    body = launch.held
    if body is None:
        return profile_args_value(profile_args, posix)
    if not body.expands:
        why = f"the {body.what()} is run by {body.where()}"
        return profile_args_value(profile_args, body.posix, why if body.literal else None)
    found = {steps: encode(profile_args, steps) for steps in body.steps()}
    texts = set(found.values())
    if len(texts) == 1 and None not in texts:
        text = texts.pop()
    elif all(shlex.quote(token) == token for token in profile_args):
        text = " ".join(profile_args)  # plain words come through any of the steps as they are
    else:
        return plain_string(profile_args, *_carrier(body, found))
    return f'"{text}"' if _plain_words(text) else shlex.quote(text)


def encode(tokens: Sequence[str], steps) -> Optional[str]:
    """Text that becomes ``tokens`` after ``steps`` (outermost first), or None if none does."""
    *outer, last = steps
    if last == CODE:
        text = " ".join(shlex.quote(token) for token in tokens)
    elif all(shlex.quote(token) == token for token in tokens):
        text = " ".join(tokens)  # WORDS: split at blanks, no quote is removed
    else:
        return None
    for step in reversed(outer):
        if step == DOUBLE:
            text = re.sub(r'([\\"$`])', r"\\\1", text)
        elif step == CODE:
            text = shlex.quote(text)
        elif step == SINGLE and "'" not in text:
            continue
        else:
            return None  # a quote inside '...', or words split before they are parsed
    return text


def _carrier(body, found):
    """(what the value passes through, the way out) for a refusal."""
    where = f"a {body.what()} run by {body.where()}"
    if len(found) > 1:
        return f"{where}, which runs it more than one way", "or run it one way only"
    (steps,) = found
    if steps[-1] == WORDS:
        return (f"{where}, which splits words but removes no quotes",
                'or run that string with sh -c "..." or eval')
    return (f"{where}, which pastes it inside {' then '.join(steps[:-1])}",
            "or write the command in the script itself")


def _plain_words(text):
    return bool(text) and all(shlex.quote(part) == part for part in text.split(" "))
