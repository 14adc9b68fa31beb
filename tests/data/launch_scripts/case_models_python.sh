#!/bin/bash
# Fixture: one script for several models, plain python launchers, an exec, and "torchrun" in
# places the shell never runs (comment, heredoc, quoted string).
MODEL=${MODEL:-gpt}
GPT_ARGS="--num-layers 2 --hidden-size 64 --train-iters 20"
BERT_ARGS="--num-layers 2 --hidden-size 64 --train-iters 20 --bert-no-binary-head"

cat <<EOF > run_notes.txt
This job was once launched as: torchrun --nproc_per_node 8 pretrain_gpt.py
EOF
echo "use torchrun pretrain_gpt.py for multi-GPU runs"
# torchrun --nproc_per_node 8 pretrain_gpt.py $GPT_ARGS

case "$MODEL" in
    gpt)
        python3 -u pretrain_gpt.py $GPT_ARGS --log-interval 1 \
            2>&1 | tee logs_gpt.txt
        ;;
    bert) exec python pretrain_bert.py $BERT_ARGS ;;
    *)
        echo "unknown model $MODEL" >&2
        exit 1
        ;;
esac
