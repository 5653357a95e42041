#!/usr/bin/env python3
"""torchvision's classifiers exported by PyTorch's own exporter (torch.onnx.export, opset 13, the
batch dynamic) and imported by trident: `trident infer` on each file must give PyTorch's logits
for the same images (batchnorm statistics randomised, so no batchnorm is an identity). ShuffleNet
v2's channel split arrives as Slices of computed channels (channel_slice) and DenseNet's
transition pools as an all-zero Pad + AveragePool; those two also train (TRAINED). A model
trident cannot import yet would be listed in REFUSED with the words of the one sentence that
must name its node and op. Exit 77 (skipped) where torch or torchvision cannot be imported, or
where this trident reads no ONNX (the portable GPU build).

    python3 tests/torch/torchvision_onnx.py build/trident OUT_DIR [--device cuda]
"""
import inspect
import json
import math
import os
import subprocess
import sys
import warnings

from torch_checks import setup  # exits 77 (skipped) without torch and torchvision

import numpy as np
import torch
import torchvision

IMPORTED = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_0", "vgg11_bn",
            "googlenet", "shufflenet_v2_x0_5", "densenet121"]
REFUSED = {}  # name -> words its one-line refusal must hold
# Also trained for an epoch of two synthetic batches (`trident train --model FILE.onnx`): each
# must finish with a finite loss (ShuffleNet v2's split and DenseNet's concatenations backward).
TRAINED = ["shufflenet_v2_x0_5", "densenet121"]


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


def train(a, name, path):
    r = subprocess.run([a.trident, "train", "--model", path, "--synthetic", "--train-limit", "4", "--test-limit", "2",
                        "--batch", "2", "--epochs", "1", "--json", "--device", a.device], capture_output=True, text=True)
    losses = [json.loads(line)["loss"] for line in r.stdout.splitlines()
              if line.startswith("{") and json.loads(line).get("event") == "epoch"]
    good = r.returncode == 0 and len(losses) == 1 and math.isfinite(losses[0])
    print(f"{'ok  ' if good else 'FAIL'} {name}: trained, loss {losses}" + ("" if good else f": {r.stderr.strip()}"))
    return good


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
        if name in TRAINED:
            ok &= train(a, name, path)
    print("torchvision exports: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
