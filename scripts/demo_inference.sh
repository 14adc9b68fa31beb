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
# It stops with one line naming what is wrong when a package it imports is missing (before
# torchrun) or when a rank of the server died (the rank, and the first error of server.log).
# Usage: bash scripts/demo_inference.sh [OUTPUT_DIR]     (default: ./demo_inference_output)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$(mkdir -p "${1:-demo_inference_output}" && cd "${1:-demo_inference_output}" && pwd)
rm -rf "${OUT:?}/profile" "$OUT/reports" "$OUT/server.log"
PYTHON=${PYTHON:-python}

# What the server imports (megatron-core's text-generation server: Flask, flask-restful, tqdm).
"$PYTHON" "$REPO/scripts/demo_imports.py" scripts/demo_inference.sh \
    torch megatron.core flask flask_restful tqdm

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

dead_ranks() {  # the ranks whose process has ended (pids from the server's reports)
    local report rank pid
    for report in "$OUT"/reports/server_rank*.json; do
        [ -e "$report" ] || continue
        rank=${report##*server_rank}
        pid=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["pid"])' "$report")
        # gone, or a zombie torchrun has not reaped yet
        case "$(ps -o stat= -p "$pid" 2>/dev/null || true)" in
            "" | Z*) echo "${rank%.json}" ;;
        esac
    done | sort -n | tr '\n' ' ' | sed 's/ $//'
}
fail() {  # $1: what went wrong, $2: the ranks found dead. Show the log's end, then one line
    local dead=${2-$(dead_ranks)} first root
    trap - EXIT
    for _ in $(seq 1 100); do  # torchrun ends by itself once a rank died: let it write why
        kill -0 "$SERVER" 2>/dev/null || break
        sleep 0.1
    done
    stop_server
    echo "-- the end of $OUT/server.log:"
    tail -n 25 "$OUT/server.log"
    # torchrun's summary names the rank that failed first; a rank's traceback, its error
    root=$(grep -A 6 "^Root Cause" "$OUT/server.log" | grep -m 1 -oE "^ *rank *: *[0-9]+" \
        | grep -oE "[0-9]+$" || true)
    first=$(grep -v ChildFailedError "$OUT/server.log" \
        | grep -m 1 -E "^(\[rank[0-9]+\]: ?)?[A-Za-z_.]*(Error|Exception|Interrupt)(:|$)" || true)
    [ "${#first}" -le 240 ] || first="${first:0:240}..."
    echo "the inference demo failed: $1${dead:+; rank(s) $dead died}${root:+ (torchrun: rank $root failed first)}${first:+; first error: $first}; full log: $OUT/server.log"
    exit 1
}
alive() {  # fail unless torchrun and every rank that reported its pid still run
    local dead
    kill -0 "$SERVER" 2>/dev/null || fail "$1: the server exited"
    dead=$(dead_ranks)
    [ -z "$dead" ] || fail "$1" "$dead"
}

for _ in $(seq 1 600); do
    alive "before it listened"
    if curl -s -o /dev/null "http://127.0.0.1:$PORT/"; then
        break
    fi
    sleep 0.2
done

generate() {  # one request: 4 tokens after the prompt "1 2 3"; fails when a rank died
    curl -sS -X PUT "http://127.0.0.1:$PORT/api" -H 'Content-Type: application/json' \
        -d '{"prompts": ["1 2 3"], "tokens_to_generate": 4}' >/dev/null || fail "PUT /api failed"
    alive "after PUT /api"
}
route() {  # POST a profile route with an empty JSON body; print its answer; an error fails
    local status
    status=$(curl -sS -o "$OUT/answer.json" -w '%{http_code}' -X POST \
        "http://127.0.0.1:$PORT/$1" -H 'Content-Type: application/json' -d '{}') \
        || fail "POST /$1 failed"
    alive "after POST /$1"  # an answer of 200 says nothing of the other ranks
    echo "POST /$1 -> $status $(cat "$OUT/answer.json")"
    [ "$status" = 200 ] || fail "POST /$1 answered $status"
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
alive "before the stop"
kill -INT "$RANK0"
if ! wait "$SERVER"; then
    fail "the server did not end cleanly" ""
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
