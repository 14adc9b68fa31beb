#!/bin/bash
# Fixture in the shape of Megatron-LM's examples/megatron_fsdp/sbatch_*.sh: the training command is
# a multi-line string (cd, export, an optional nsys prefix, then python), and sbatch reads a batch
# script from a heredoc whose srun step runs that string with bash -c. The outer shell expands the
# heredoc when it submits, so the string is pasted into bash -c "..." there.

MEGATRON_PATH=${MEGATRON_PATH:-.}
OUTPUT_PATH=${OUTPUT_PATH:-./out}
NSYS=${NSYS:-0}

TRAIN_ARGS=(
    --num-layers 2
    --hidden-size 64
    --micro-batch-size 1
    --train-iters 10
    --save ${OUTPUT_PATH}/checkpoints
)

if [ "${NSYS}" = 1 ]; then
    NSYS_PREFIX="nsys profile --capture-range=cudaProfilerApi -o ${OUTPUT_PATH}/nsys/run"
else
    NSYS_PREFIX=""
fi

TRAINING_CMD="
cd ${MEGATRON_PATH};
export PYTHONPATH=${MEGATRON_PATH}:${PYTHONPATH};
${NSYS_PREFIX} python ${MEGATRON_PATH}/pretrain_gpt.py ${TRAIN_ARGS[@]}"

LOGS="${OUTPUT_PATH}/logs"
mkdir -p ${LOGS}

sbatch <<EOF
#!/bin/bash
#SBATCH --job-name=fixture
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1

srun \
    --mpi=pmix -l \
    --container-workdir=${MEGATRON_PATH} \
    bash -x -c "${TRAINING_CMD}" 2>&1 | tee ${LOGS}/\${SLURM_JOB_ID:-local}.log

EOF
