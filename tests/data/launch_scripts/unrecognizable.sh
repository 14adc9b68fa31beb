#!/bin/bash
# Fixture: nothing here trains. Preprocessing, conversion, evaluation, and a torchrun command
# kept in a string for another tool to run.
python tools/preprocess_data.py --input raw.jsonl --output-prefix data/fixture
python convert_ckpt.py --load-dir hf --save-dir mcore
torchrun --nproc_per_node 8 evaluation.py --task boolq
CMD="torchrun --nproc_per_node 8 pretrain_gpt.py --train-iters 10"
echo "$CMD"
