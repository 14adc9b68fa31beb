"""Real Megatron-LM checkouts on the CPU (opt-in tiers)."""

# A tiny GPT that Megatron-LM 0.12-0.16 and MindSpeed-LLM train on the CPU in seconds per step.
TINY = ("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
        "--max-position-embeddings 64 --micro-batch-size 1 --global-batch-size 4 --train-iters 6 "
        "--lr 1e-3 --mock-data --tokenizer-type NullTokenizer --vocab-size 4096 "
        "--transformer-impl local --use-cpu-initialization --distributed-backend gloo "
        "--eval-iters 0 --eval-interval 1000 --split 100,0,0 --no-persist-layer-norm "
        "--no-masked-softmax-fusion --no-bias-gelu-fusion --no-bias-dropout-fusion "
        "--no-gradient-accumulation-fusion --log-interval 1").split()
