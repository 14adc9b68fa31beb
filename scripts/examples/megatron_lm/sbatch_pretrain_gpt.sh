#!/bin/bash
# Example: a SLURM submission in the shape of Megatron-LM's examples/megatron_fsdp/sbatch_*.sh.
# The training command is a multi-line string; sbatch reads the batch script from a heredoc, and
# its srun step runs the string with bash -c inside the container.
#
#   mindspeed-prof adapt-script scripts/examples/megatron_lm/sbatch_pretrain_gpt.sh \
#       --profile-step-start 10 --profile-step-end 12 --profile-ranks 0
#
# writes sbatch_pretrain_gpt_profile.sh next to it (committed here, byte for byte what the tool
# wrote). The heredoc is not quoted (<<EOF), so this shell expands it when sbatch is called:
# ${TRAINING_CMD} is pasted into bash -c "..." there. That is why the copy edits the string
# TRAINING_CMD, not the batch script, and defines PROFILE_ARGS as a string above it.

MEGATRON_PATH=${MEGATRON_PATH:-/workspace/megatron-lm}
CONTAINER_IMAGE=${CONTAINER_IMAGE:-nvcr.io/nvidia/pytorch:25.01-py3}
OUTPUT_PATH=${OUTPUT_PATH:-./output}
DATA_PATH=${DATA_PATH:-./data/my_corpus_text_document}

PRETRAIN_ARGS=(
    --tensor-model-parallel-size 2
    --pipeline-model-parallel-size 2
    --num-layers 24
    --hidden-size 2048
    --num-attention-heads 16
    --seq-length 2048
    --max-position-embeddings 2048
    --micro-batch-size 2
    --global-batch-size 256
    --train-iters 20000
    --lr 3.0e-4
    --lr-decay-style cosine
    --bf16
    --data-path ${DATA_PATH}
    --tokenizer-type GPT2BPETokenizer
    --save ${OUTPUT_PATH}/checkpoints
    --load ${OUTPUT_PATH}/checkpoints
    --log-interval 10
)

TRAINING_CMD="
cd ${MEGATRON_PATH};
export PYTHONPATH=${MEGATRON_PATH}:${PYTHONPATH};
python ${MEGATRON_PATH}/pretrain_gpt.py ${PRETRAIN_ARGS[@]}"

SLURM_LOGS="${OUTPUT_PATH}/slurm_logs"
mkdir -p ${SLURM_LOGS}

sbatch <<EOF
#!/bin/bash
#SBATCH --job-name=gpt_pretrain
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gres=gpu:8
#SBATCH --time=04:00:00

srun \
    --mpi=pmix -l \
    --container-image=${CONTAINER_IMAGE} \
    --container-workdir=${MEGATRON_PATH} \
    bash -x -c "${TRAINING_CMD}" 2>&1 | tee ${SLURM_LOGS}/\${SLURM_JOB_ID}.log
EOF
