"""Entry scripts that run no loop mindspeed_prof hooks, by name or by what the file imports.

A launch named like training (``*train*.py``) is adapted; but some such entries train with a
loop of their own (MindSpeed-LLM's ``train_fsdp2.py``: torch FSDP2 and MindSpeed-LLM's own
trainer, never ``megatron.training``'s ``train()``), and their copy would profile nothing while
looking adapted. ``no_loop_reason`` says why an entry is one of them: from a list of entries
known to be, or from the entry file itself when adapt-script can read it.
"""

import os
import re
from typing import Iterable, Optional

# Entry scripts known to run no loop we hook: file name -> what they run instead.
NO_HOOKED_LOOP = {
    "train_fsdp2.py": "MindSpeed-LLM's FSDP2 trainer (torch FSDP2 with a loop of its own in "
                      "mindspeed_llm.fsdp2, never megatron.training's train())",
}
# What an entry file imports or calls when it runs a loop we hook.
_HOOKED = re.compile(r"\bpretrain\s*\(|\bmegatron\.training\.training\b|MegatronServer|"
                     r"InferenceEngine|run_mcore_engine|\bmindspeed_llm\.tasks\b|"
                     r"\.generate\s*\(|\bAutoTrainer\b|\bget_trainer\b")
# Loops of other frameworks an entry may run instead: (pattern, what).
_FOREIGN = ((re.compile(r"\bmindspeed_llm\.fsdp2\b"), "MindSpeed-LLM's FSDP2 trainer"),
            (re.compile(r"\btorch\.distributed\.(?:_composable\.)?fsdp\b"), "torch FSDP"),
            (re.compile(r"^\s*(?:import|from)\s+deepspeed\b", re.M), "DeepSpeed"),
            (re.compile(r"^\s*from\s+transformers\s+import\s+.*\bTrainer\b", re.M),
             "Hugging Face's Trainer"))
_READ_AT_MOST = 2_000_000  # an entry script is small; a bigger file is not read


def no_loop_reason(name: str, folders: Iterable[str]) -> Optional[str]:
    """Why entry ``name`` (as the launch script writes it) runs no loop we hook, or None when it
    may. ``folders``: where the entry may be found (IN.sh's folder, the working directory)."""
    base = os.path.basename(name)
    if base in NO_HOOKED_LOOP:
        return f"{base} runs {NO_HOOKED_LOOP[base]}"
    source = _read(name, folders)
    if source is None:
        return None
    if _HOOKED.search(source):
        return None
    foreign = [what for pattern, what in _FOREIGN if pattern.search(source)]
    if foreign:
        return f"{base} runs {' and '.join(foreign)}, and calls no Megatron entry"
    return None


def _read(name: str, folders: Iterable[str]) -> Optional[str]:
    if "$" in name or "`" in name or "\0" in name:
        return None  # chosen at run time
    for folder in folders:
        path = os.path.join(folder, name)
        try:
            if not os.path.isfile(path) or os.path.getsize(path) > _READ_AT_MOST:
                continue
            with open(path, encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            continue
    return None
