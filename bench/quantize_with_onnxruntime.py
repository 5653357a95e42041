#!/usr/bin/env python3
# An ONNX model quantized the way an onnxruntime user quantizes it: quantize_static in the QDQ
# format (per-channel int8 weights, int8 activations), calibrated on images from an .npy file
# (NCHW float32) or, without one, on random ones. The QDQ file is what trident infer and
# onnxruntime then both run (bench/vs_onnxruntime.py --model OUT): the same quantized model.
#
#   .venv/bin/python bench/quantize_with_onnxruntime.py resnet50.onnx resnet50_qdq.onnx [--calibration x.npy]
import argparse
import os
import tempfile

import numpy as np
import onnx
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static


class Images(CalibrationDataReader):
    def __init__(self, input_name, images, batch):
        self.batches = iter([{input_name: images[i:i + batch]} for i in range(0, len(images), batch)])

    def get_next(self):
        return next(self.batches, None)


def main():
    ap = argparse.ArgumentParser(description="quantize an ONNX model with onnxruntime (QDQ format)")
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--calibration", help="images, .npy NCHW float32 (default: 32 random ones)")
    ap.add_argument("--per-tensor", action="store_true", help="one weight scale per tensor, not per channel")
    ap.add_argument("--activations", choices=("QInt8", "QUInt8"), default="QInt8")
    a = ap.parse_args()
    m = onnx.load(a.model)
    initializers = {i.name for i in m.graph.initializer}
    inp = [i for i in m.graph.input if i.name not in initializers][0]
    dims = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    if a.calibration:
        images = np.load(a.calibration).astype(np.float32)
    else:
        images = np.random.default_rng(0).standard_normal([32] + [d or 224 for d in dims[1:]]).astype(np.float32)
    batch = dims[0] if dims[0] > 0 else 8
    with tempfile.TemporaryDirectory() as tmp:
        single = os.path.join(tmp, "model.onnx")  # weights inline (a dynamo export keeps them beside it)
        onnx.save(m, single)
        quantize_static(single, a.out, Images(inp.name, images, batch), quant_format=QuantFormat.QDQ,
                        per_channel=not a.per_tensor, activation_type=getattr(QuantType, a.activations),
                        weight_type=QuantType.QInt8)
    print(f"quantize_with_onnxruntime: wrote {a.out} (QDQ, {'per-tensor' if a.per_tensor else 'per-channel'} "
          f"int8 weights, {a.activations} activations, {len(images)} calibration images)")


if __name__ == "__main__":
    main()
