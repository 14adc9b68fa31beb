#!/bin/bash
# Fixture: the job is a heredoc fed to bash. The outer shell expands it first (the delimiter is not
# quoted), so ${NPROC} and ${GPT_ARGS[*]} are this script's; \$ keeps a variable for the inner
# shell. The command is continued over lines, runs under exec and pipes its log through tee.

NPROC=${NPROC:-1}
GPT_ARGS=(--num-layers 2 --hidden-size 64 --train-iters 10)
mkdir -p logs
bash <<EOF
set -e
cd "\$PWD"
echo "node \$(hostname) starts ${NPROC} ranks"
exec torchrun --nproc_per_node ${NPROC} --standalone \
    pretrain_gpt.py \
    ${GPT_ARGS[*]} 2>&1 | tee logs/train.log
EOF
