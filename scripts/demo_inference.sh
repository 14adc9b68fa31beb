#!/usr/bin/env bash
# Inference profiling on a CPU, in about a minute:
#   1. Megatron's text-generation server (megatron-core's MegatronServer, StaticInferenceEngine,
#      run_mcore_engine; a tiny random-weight GPT, tensor-parallel over 2 ranks, wired as
#      Megatron-LM's tools/run_text_generation_server.py) starts under torchrun with
#      `-m mindspeed_prof.launch` and `--profile`, on 127.0.0.1 only; no window flag: it waits
#      for an HTTP start,
#   2. requests go to PUT /api; POST /start_profile and /stop_profile open and close a window
#      over HTTP (each request of it is one folder, req_N-N/, on every rank),
#   3. Ctrl-C to the serving rank stops the server, as upstream,
#   4. `mindspeed-prof check` gives the deliverables verdict, `summary` what the traces say.
# Usage: bash scripts/demo_inference.sh [OUTPUT_DIR]     (default: ./demo_inference_output)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$(mkdir -p "${1:-demo_inference_output}" && cd "${1:-demo_inference_output}" && pwd)
rm -rf "${OUT:?}/profile" "$OUT/reports" "$OUT/server.log"
PYTHON=${PYTHON:-python}

free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port)
MASTER_PORT=$(free_port)

# The tests' stand-in for megatron.training (argument parsing, initialisation) beside the real
# megatron-core; the server reports its pids into $OUT/reports.
export PYTHONPATH="$REPO/tests/harness/megatron_standin${PYTHONPATH:+:$PYTHONPATH}"
export HARNESS_REPORT_DIR="$OUT/reports"
export TORCHDYNAMO_DISABLE=1 CUDA_DEVICE_MAX_CONNECTIONS=1 OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
export MINDSPEED_PROF_AUTOLOAD=0

MODEL_ARGS=(
    --num-layers 2 --hidden-size 64 --num-attention-heads 4
    --seq-length 64 --max-position-embeddings 64
    --tensor-model-parallel-size 2 --transformer-impl local --distributed-backend gloo
    --vocab-size 128 --tokenizer-type NullTokenizer --use-cpu-initialization
    --hidden-dropout 0 --attention-dropout 0 --no-masked-softmax-fusion
    --no-bias-gelu-fusion --no-bias-dropout-fusion --no-gradient-accumulation-fusion
    --no-persist-layer-norm
)
PROFILE_ARGS=(--profile --profile-ranks -1 --profile-backend torch --profile-save-path "$OUT/profile")

echo "== 1. start the server: torchrun, 2 ranks (TP=2), port $PORT, profiling armed"
torchrun --nnodes 1 --node-rank 0 --master-addr 127.0.0.1 --master-port "$MASTER_PORT" \
    --nproc-per-node 2 -m mindspeed_prof.launch \
    "$REPO/tests/harness/inference/run_text_generation_server.py" \
    "${MODEL_ARGS[@]}" --port "$PORT" "${PROFILE_ARGS[@]}" >"$OUT/server.log" 2>&1 &
SERVER=$!
stop_server() {
    if kill -0 "$SERVER" 2>/dev/null; then
        kill -TERM "$SERVER" 2>/dev/null || true
        wait "$SERVER" 2>/dev/null || true
    fi
}
trap stop_server EXIT

for _ in $(seq 1 600); do
    if ! kill -0 "$SERVER" 2>/dev/null; then
        tail -n 30 "$OUT/server.log"
        echo "the server exited before it listened; full log: $OUT/server.log"
        exit 1
    fi
    if curl -s -o /dev/null "http://127.0.0.1:$PORT/"; then
        break
    fi
    sleep 0.2
done

generate() {  # one request: 4 tokens after the prompt "1 2 3"
    curl -sS -X PUT "http://127.0.0.1:$PORT/api" -H 'Content-Type: application/json' \
        -d '{"prompts": ["1 2 3"], "tokens_to_generate": 4}' >/dev/null
}
route() {  # POST a profile route with an empty JSON body; print its answer; an error fails
    local status
    status=$(curl -sS -o "$OUT/answer.json" -w '%{http_code}' -X POST \
        "http://127.0.0.1:$PORT/$1" -H 'Content-Type: application/json' -d '{}')
    echo "POST /$1 -> $status $(cat "$OUT/answer.json")"
    [ "$status" = 200 ]
}

echo "== 2. request 1 (not profiled), then a window over HTTP around requests 2-3"
generate
route start_profile
generate
generate
route stop_profile
generate    # request 4: after the stop, not profiled

echo "== 3. stop the server: Ctrl-C to the serving rank (rank 0), as upstream"
RANK0=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["pid"])' \
    "$OUT/reports/server_rank0.json")
kill -INT "$RANK0"
if ! wait "$SERVER"; then
    tail -n 30 "$OUT/server.log"
    echo "the server did not end cleanly; full log: $OUT/server.log"
    exit 1
fi
trap - EXIT
rm -f "$OUT/answer.json"
echo "-- what mindspeed_prof said in the server's log:"
grep -E "^\[mindspeed_prof" "$OUT/server.log" || true

echo "== 4. files written"
find "$OUT/profile" -type f | sort

echo "== 5. deliverables check"
mindspeed-prof check "$OUT/profile" --ranks 0 1

echo "== 6. summary"
mindspeed-prof summary "$OUT/profile" --top 5

echo "Open $OUT/profile/req_2-2/rank0.*.pt.trace.json in https://ui.perfetto.dev or chrome://tracing."
