#!/bin/bash
# Fixture in the shape of Megatron-LM's examples/inference server scripts: the text-generation
# server of tools/ run by torchrun after a pip install of its web dependency.

DISTRIBUTED_ARGS="--nproc_per_node 1 --nnodes 1 --node_rank 0 --master_addr localhost --master_port 6005"
CHECKPOINT=${1:-/tmp/ckpt}

pip install flask-restful
torchrun $DISTRIBUTED_ARGS tools/run_text_generation_server.py \
       --tensor-model-parallel-size 1 \
       --num-layers 2 \
       --hidden-size 64 \
       --load ${CHECKPOINT} \
       --micro-batch-size 1 \
       --seed 42
