#!/bin/bash
# Fixture: the command string grows in steps and eval runs it; another model's run captures
# torchrun's output with $(...) under setsid. The rank count comes from a substitution too.

NPROC=$(nproc 2>/dev/null || echo 1)
CMD="torchrun --nproc_per_node ${NPROC} --standalone pretrain_gpt.py"
CMD+=" --num-layers 2 --train-iters 10"
if [ -n "${EXTRA:-}" ]; then
    CMD="${CMD} ${EXTRA}"
fi

if [ "${MODEL:-gpt}" = gpt ]; then
    eval "${CMD}"
else
    SUMMARY=$(setsid torchrun --standalone pretrain_bert.py --num-layers 2 2>&1 | tail -n 1)
    echo "${SUMMARY}"
fi
