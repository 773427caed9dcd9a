"""Export all-MiniLM-L6-v2 to ONNX (fp32) and quantize it dynamically to int8, offline.

Only needed for the ``ort-fp32`` / ``ort-qdyn`` rows of ``scripts/compare_encoders.py``; no
registered encoder uses these files. Needs the ``onnx`` package, which is not a project
dependency (install it anywhere on ``PYTHONPATH``, e.g. ``pip install --target DIR onnx ml_dtypes``).

Writes ``<out>/minilm-fp32.onnx`` (``torch.onnx.export``, TorchScript exporter, opset 17, dynamic
batch and sequence axes; inputs input_ids/attention_mask/token_type_ids, output
last_hidden_state) and ``<out>/minilm-qdyn.onnx`` (``onnxruntime.quantization.quantize_dynamic``,
int8 per-channel weights, MatMulInteger with dynamically quantized activations).

Usage: python scripts/export_minilm_onnx.py --out /tmp/minilm-onnx
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    try:
        import onnx  # noqa: F401  (torch's exporter and the quantizer both need it)
    except ImportError:
        raise SystemExit("error: this script needs the 'onnx' package (pip install onnx ml_dtypes)") from None
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    from memory.encoder import minilm_model_dir

    model = AutoModel.from_pretrained(str(minilm_model_dir()), local_files_only=True).eval()

    class LastHidden(torch.nn.Module):
        def __init__(self, m: torch.nn.Module) -> None:
            super().__init__()
            self.m = m

        def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
            return self.m(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

    args.out.mkdir(parents=True, exist_ok=True)
    fp32, qdyn = args.out / "minilm-fp32.onnx", args.out / "minilm-qdyn.onnx"
    ids = torch.ones(2, 16, dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids", "last_hidden_state"]
    torch.onnx.export(
        LastHidden(model),
        (ids, ids, torch.zeros_like(ids)),
        str(fp32),
        input_names=names[:3],
        output_names=names[3:],
        dynamic_axes={k: {0: "batch", 1: "sequence"} for k in names},
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(str(fp32), str(qdyn), weight_type=QuantType.QInt8, per_channel=True)
    print(f"wrote {fp32} and {qdyn}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
