#!/bin/bash
# Fixture: the only launch runs a script not named like training; being the only torchrun of the
# script, it is the one to adapt.
python tools/download_tokenizer.py --out ./tokenizer
torchrun --nproc_per_node 2 examples/run_simple_mcore_loop.py --steps 20
