#!/usr/bin/env bash
# Run the CPU vLLM OpenAI-compatible server in the foreground (exec), serving the
# SmolLM2-135M-Instruct checkpoint built by setup-cpu.sh as model "smollm2".
#
#   serve-cpu.sh [PORT] [extra vllm args...]      PORT defaults to 18011
#
# Ready when `GET http://127.0.0.1:PORT/v1/models` answers 200 (~25-40 s).
# Env overrides: RAGLINE_VLLM_HOME, RAGLINE_VLLM_MODEL (checkpoint dir),
# RAGLINE_VLLM_HOST (127.0.0.1), RAGLINE_VLLM_MAX_MODEL_LEN (2048),
# VLLM_CPU_KVCACHE_SPACE (GiB, 2), VLLM_CPU_NUM_OF_RESERVED_CPU (0).
# Stop it with SIGTERM/SIGINT to the process group (it spawns an engine-core child).
set -euo pipefail

VLLM_HOME="${RAGLINE_VLLM_HOME:-$HOME/.cache/ragline/vllm}"
VENV="$VLLM_HOME/venv"
MODEL_DIR="${RAGLINE_VLLM_MODEL:-$VLLM_HOME/models/smollm2-135m-instruct}"
PORT="${1:-18011}"
[[ $# -gt 0 ]] && shift
HOST="${RAGLINE_VLLM_HOST:-127.0.0.1}"

die() { echo "[serve-cpu] ERROR: $*" >&2; exit 1; }
[[ "$PORT" =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$PORT'"
[[ -x "$VENV/bin/python" ]] || die "no venv at $VENV; run $(dirname "$0")/setup-cpu.sh first"
[[ -f "$MODEL_DIR/config.json" ]] || die "no model at $MODEL_DIR; run $(dirname "$0")/setup-cpu.sh first"

# Per-port scratch dir for vLLM/torch caches, wiped at every start (exec leaves
# no shell behind to clean up, so reuse one directory instead of leaking).
RUN_TMP="${RAGLINE_VLLM_TMP:-$VLLM_HOME/tmp/serve-$PORT}"
rm -rf "$RUN_TMP" && mkdir -p "$RUN_TMP"
export TMPDIR="$RUN_TMP" VLLM_CACHE_ROOT="$RUN_TMP/vllm" TORCHINDUCTOR_CACHE_DIR="$RUN_TMP/inductor"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export VLLM_TARGET_DEVICE=cpu
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-2}"
export VLLM_CPU_NUM_OF_RESERVED_CPU="${VLLM_CPU_NUM_OF_RESERVED_CPU:-0}"

exec "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
  --model "$MODEL_DIR" \
  --served-model-name smollm2 \
  --host "$HOST" --port "$PORT" \
  --max-model-len "${RAGLINE_VLLM_MAX_MODEL_LEN:-2048}" \
  --dtype bfloat16 \
  --enforce-eager \
  --enable-prefix-caching \
  --enable-log-requests \
  "$@"
