"""A tiny random Llama, its word-level tokenizer (with a chat template) and parquet prompts, built
locally for verl's ``main_ppo`` (no hub access): ``build(folder)`` returns their paths.

The reward (``compute_score``, verl's custom reward function signature) counts the target word
in the response, so GRPO's groups get different rewards and the update has a gradient.
"""

import os
from typing import Dict

WORDS = ("one two three four five six seven eight nine ten apple pear plum fig kiwi lime "
         "red green blue gold say count list name pick").split()
SPECIAL = ("<pad>", "<s>", "</s>", "<unk>", "<|user|>", "<|assistant|>")
TARGET = "apple"
PROMPTS = ("say one two three", "count four five", "list red green blue", "name a fruit",
           "pick six seven", "say apple pear", "count eight nine ten", "name gold lime")
CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|> {% endif %}")


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    words = solution_str.split()
    return float(sum(w == ground_truth for w in words)) / max(len(words), 1)


def _tokenizer(folder):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL + tuple(WORDS))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>",
                                        bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    return tokenizer


def _model(folder, tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1234)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=128, tie_word_embeddings=False,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, torch_dtype="float32")
    LlamaForCausalLM(config).save_pretrained(folder)


def _prompts(path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"data_source": "mindspeed_prof/tiny", "ability": "count",
             "prompt": [{"role": "user", "content": text}],
             "reward_model": {"style": "rule", "ground_truth": TARGET},
             "extra_info": {"split": "train", "index": i}} for i, text in enumerate(PROMPTS)]
    pq.write_table(pa.Table.from_pylist(rows), path)


def build(folder) -> Dict[str, str]:
    """Model folder, train/val parquet and this module's path (the reward function file)."""
    model = os.path.join(folder, "tiny_llama")
    os.makedirs(model, exist_ok=True)
    tokenizer = _tokenizer(model)
    _model(model, tokenizer)
    data = os.path.join(folder, "prompts.parquet")
    _prompts(data)
    return {"model": model, "train": data, "val": data, "reward": os.path.abspath(__file__)}
