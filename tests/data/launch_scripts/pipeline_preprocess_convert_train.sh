#!/bin/bash
# Fixture: several Python commands in one script. Only the last one trains; the first two
# prepare data and convert a checkpoint, and must be left alone.
set -e

mkdir -p logs dataset model_weights

python ./preprocess_data.py \
    --input ./raw/train.parquet \
    --output-prefix ./dataset/fixture \
    --workers 4 \
    --log-interval 1000

python3 convert_ckpt.py --model-type GPT --load-dir ./hf_weights --save-dir ./model_weights \
    --target-tensor-parallel-size 2

DISTRIBUTED_ARGS="--nproc_per_node 2 --nnodes 1 --master_addr localhost --master_port 6030"
TRAIN_ARGS="--num-layers 2 --hidden-size 64 --train-iters 20 --data-path ./dataset/fixture_text_document"

# torchrun $DISTRIBUTED_ARGS pretrain_gpt.py $TRAIN_ARGS   (the old single-node command)
CUDA_DEVICE_MAX_CONNECTIONS=1 OMP_NUM_THREADS=1 nohup \
    torchrun $DISTRIBUTED_ARGS pretrain_gpt.py $TRAIN_ARGS \
    --load ./model_weights > logs/train_fixture.log 2>&1 &
wait $!
echo "training finished: see logs/train_fixture.log"
