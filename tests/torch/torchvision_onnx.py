#!/usr/bin/env python3
"""torchvision's classifiers exported by PyTorch's own exporter (torch.onnx.export, opset 13, the
batch dynamic) and imported by trident: `trident infer` on each file must give PyTorch's logits
for the same images (batchnorm statistics randomised, so no batchnorm is an identity). Models
trident cannot import yet must be refused with one sentence naming the node and op (ShuffleNet
v2's channel split is a Slice of computed channels; DenseNet's transition pools are exported as
Pad + AveragePool). Exit 77 (skipped) where torch or torchvision cannot be imported, or where
this trident reads no ONNX (the portable GPU build).

    python3 tests/torch/torchvision_onnx.py build/trident OUT_DIR [--device cuda]
"""
import inspect
import os
import subprocess
import sys
import warnings

from torch_checks import setup  # exits 77 (skipped) without torch and torchvision

import numpy as np
import torch
import torchvision

IMPORTED = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_0", "vgg11_bn",
            "googlenet"]
REFUSED = {"shufflenet_v2_x0_5": ["Slice", "is computed"], "densenet121": ["Pad", "not supported"]}


def export(name, x, path):
    model = getattr(torchvision.models, name)().eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
        want = model(x).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The TorchScript exporter, which writes the shape arithmetic of a dynamic batch; from PyTorch
        # 2.9 on torch.onnx.export defaults to the dynamo exporter, asked for off here.
        legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
        torch.onnx.export(model, x, path, opset_version=13, input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, **legacy)
    return want


def main():
    a, x, images = setup()
    ok = True
    for name in IMPORTED + list(REFUSED):
        path = os.path.join(a.out, name + ".onnx")
        want = export(name, x, path)
        logits = os.path.join(a.out, name + ".npy")
        r = subprocess.run([a.trident, "infer", path, "--input", images, "--output", logits, "--iterations", "1",
                            "--warmup", "0", "--topk", "0", "--device", a.device], capture_output=True, text=True)
        if "built without ONNX support" in r.stderr:  # the portable GPU build (docs/GPU.md)
            print(f"skipped: {r.stderr.strip()}")
            return 77
        if name in REFUSED:
            lines = r.stderr.strip().splitlines()
            good = r.returncode != 0 and len(lines) == 1 and all(w in lines[0] for w in REFUSED[name])
            print(f"{'ok  ' if good else 'FAIL'} {name}: refused: {r.stderr.strip()}")
            ok &= good
            continue
        if r.returncode != 0:
            print(f"FAIL {name}: {r.stderr.strip()}")
            ok = False
            continue
        got = np.load(logits)
        err, scale = float(np.abs(got - want).max()), float(np.abs(want).max())
        good = err <= 1e-3 * max(scale, 1e-6)
        print(f"{'ok  ' if good else 'FAIL'} {name}: max |diff| {err:.3g} at logit scale {scale:.3g}")
        ok &= good
    print("torchvision exports: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
