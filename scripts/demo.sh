#!/usr/bin/env bash
# The whole mindspeed_prof chain on a CPU, in about half a minute:
#   1. a Megatron-style launch script (pretrain_gpt.sh: torchrun --nnodes 1 --node-rank 0
#      --master-addr 127.0.0.1 --master-port P as Megatron-LM's examples, 2 ranks, tiny real
#      megatron-core GPT on the CPU stand-in for megatron.training that the tests use),
#   2. `mindspeed-prof adapt-script` writes a profiling copy of it (the original is not touched),
#   3. the copy runs: both ranks are profiled at iterations 2-5 with torch.profiler,
#   4. `mindspeed-prof check` gives the deliverables verdict, `summary` what the traces say,
#   5. `report` writes one offline HTML page, `timeline` one Perfetto file of both ranks.
# Usage: bash scripts/demo.sh [OUTPUT_DIR]     (default: ./demo_output)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$(mkdir -p "${1:-demo_output}" && cd "${1:-demo_output}" && pwd)
rm -rf "${OUT:?}/profile" "$OUT/pretrain_gpt.sh" "$OUT/pretrain_gpt_profile.sh" "$OUT/report.html" \
    "$OUT/timeline.json.gz"

# What the demo imports: the training (megatron-core) and the report's page (plotly).
python "$REPO/scripts/demo_imports.py" scripts/demo.sh torch megatron.core plotly

# The user's launch script; its adapted copy finds the training code through MEGATRON_PATH.
cp "$REPO/tests/harness/pretrain_gpt.sh" "$OUT/pretrain_gpt.sh"
export MEGATRON_PATH="$REPO/tests/harness"
# The script's torchrun listens on MASTER_PORT (Megatron-LM's examples default to 6000): a free one.
export MASTER_PORT=${MASTER_PORT:-$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}

echo "== 1. adapt the launch script (the original stays as it is)"
mindspeed-prof adapt-script "$OUT/pretrain_gpt.sh" \
    --profile-ranks all --profile-step-start 2 --profile-step-end 6 \
    --profile-save-path "$OUT/profile"

echo "== 2. train: torchrun, 2 ranks, 7 iterations; both ranks profile iterations 2-5"
if ! (cd "$OUT" && NPROC=2 TRAIN_ITERS=7 bash "$OUT/pretrain_gpt_profile.sh" >"$OUT/train.log" 2>&1); then
    tail -n 30 "$OUT/train.log"
    echo "training failed; full log: $OUT/train.log"
    exit 1
fi
grep -E "^\[mindspeed_prof| iteration " "$OUT/train.log"

echo "== 3. files written"
find "$OUT/profile" -type f | sort

echo "== 4. deliverables check"
mindspeed-prof check "$OUT/profile"

echo "== 5. summary"
mindspeed-prof summary "$OUT/profile" --top 5

echo "== 6. report: one HTML page that opens offline"
mindspeed-prof report "$OUT/profile" -o "$OUT/report.html"

echo "== 7. timeline: both ranks in one Perfetto file, clocks aligned on the shared steps"
mindspeed-prof timeline "$OUT/profile" -o "$OUT/timeline.json.gz"

echo "Open $OUT/report.html in a browser, $OUT/timeline.json.gz in https://ui.perfetto.dev."
