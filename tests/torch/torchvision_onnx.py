#!/usr/bin/env python3
"""torchvision's classifiers exported by both of PyTorch's ONNX exporters and imported by trident:
`trident infer` on each file must give the logits of the same model in onnxruntime (within 1e-4 of
the logits' scale; PyTorch's own, within 1e-3, where onnxruntime is missing), batchnorm
statistics randomised so that no batchnorm is an identity.

- torchscript: torch.onnx.export(..., opset 13, the batch dynamic, dynamo=False): the exporter
  that writes the Shape/Gather/Slice arithmetic of a dynamic batch.
- dynamo: torch.onnx.export(model, (x,), f, dynamo=True), nothing else asked: PyTorch's default
  exporter from 2.9 on (opset 18 or later, the weights in an external data file beside the model,
  ReduceMean for adaptive pooling); where torch has it and onnxscript imports.

ShuffleNet v2's channel split arrives as Slices of computed channels (channel_slice) and DenseNet's
transition pools as an all-zero Pad + AveragePool; those two and MobileNet v2 (Conv → BN → ReLU6)
also train (TRAINED). A model trident cannot import yet is listed in REFUSED with the words of the
one sentence that must name its node and op. Exit 77 (skipped) where torch or torchvision cannot
be imported, or where this trident reads no ONNX (the portable GPU build).

    python3 tests/torch/torchvision_onnx.py build/trident OUT_DIR [--device cuda] [--models a,b]
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

# The classification families: plain, residual, grouped (ResNeXt, RegNet), depthwise with ReLU6
# (MobileNet v2), Hardswish and squeeze-excitation (MobileNet v3), SiLU (EfficientNet), channel
# shuffle (ShuffleNet v2), Concat (SqueezeNet, GoogLeNet, Inception, DenseNet), MNASNet, VGG, AlexNet,
# and ConvNeXt (channels-last permutes, LayerNorm, GELU, per-pixel MatMuls, layer scale).
IMPORTED = ["resnet18", "resnext50_32x4d", "regnet_y_400mf", "regnet_x_400mf", "mobilenet_v2",
            "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0", "mnasnet0_5", "squeezenet1_0",
            "squeezenet1_1", "vgg11_bn", "alexnet", "googlenet", "inception_v3", "shufflenet_v2_x0_5",
            "densenet121", "convnext_tiny"]
REFUSED = {}  # name -> words its one-line refusal must hold
# Also trained for an epoch of two synthetic batches (`trident train --model FILE.onnx`): each
# must finish with a finite loss (ShuffleNet v2's split, DenseNet's concatenations, ReLU6's and
# LayerNorm's backward).
TRAINED = ["shufflenet_v2_x0_5", "densenet121", "mobilenet_v2", "convnext_tiny"]


def dynamo_available():
    if "dynamo" not in inspect.signature(torch.onnx.export).parameters:
        return False
    try:
        import onnxscript  # noqa: F401 (the dynamo exporter writes through it)
    except ImportError:
        return False
    return True


def make_model(name):
    torch.manual_seed(0)
    kwargs = {"init_weights": True} if name in ("googlenet", "inception_v3") else {}
    if name in ("googlenet", "inception_v3"):
        kwargs["aux_logits"] = False
    model = getattr(torchvision.models, name)(**kwargs).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    return model


def export(model, exporter, x, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            torch.onnx.export(model, (x,), path, dynamo=True)
            return
        legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
        torch.onnx.export(model, x, path, opset_version=13, input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, **legacy)


def onnxruntime_logits(path, x):
    """The model's logits in onnxruntime, or None where it is not installed."""
    try:
        import onnxruntime
    except ImportError:
        return None
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]


def train(a, name, path):
    r = subprocess.run([a.trident, "train", "--model", path, "--synthetic", "--train-limit", "4", "--test-limit", "2",
                        "--batch", "2", "--epochs", "1", "--json", "--device", a.device], capture_output=True, text=True)
    losses = [json.loads(line)["loss"] for line in r.stdout.splitlines()
              if line.startswith("{") and json.loads(line).get("event") == "epoch"]
    good = r.returncode == 0 and len(losses) == 1 and math.isfinite(losses[0])
    print(f"{'ok  ' if good else 'FAIL'} {name}: trained, loss {losses}" + ("" if good else f": {r.stderr.strip()}"))
    return good


def main():
    a, x, images = setup([("--models", "")])
    names = a.models.split(",") if a.models else IMPORTED + list(REFUSED)
    exporters = ["torchscript"] + (["dynamo"] if dynamo_available() else [])
    if "dynamo" not in exporters:
        print("note: no dynamo exporter here (torch without it, or no onnxscript): the TorchScript exports only")
    ok = True
    for name in names:
        model = make_model(name)
        with torch.no_grad():
            want_torch = model(x).numpy()
        for exporter in exporters:
            label = f"{name} ({exporter})"
            path = os.path.join(a.out, f"{name}.{exporter}.onnx")
            export(model, exporter, x, path)
            logits = os.path.join(a.out, f"{name}.{exporter}.npy")
            r = subprocess.run([a.trident, "infer", path, "--input", images, "--output", logits, "--iterations", "1",
                                "--warmup", "0", "--topk", "0", "--device", a.device], capture_output=True, text=True)
            if "built without ONNX support" in r.stderr:  # the portable GPU build (docs/GPU.md)
                print(f"skipped: {r.stderr.strip()}")
                return 77
            if name in REFUSED:
                lines = r.stderr.strip().splitlines()
                good = r.returncode != 0 and len(lines) == 1 and all(w in lines[0] for w in REFUSED[name])
                print(f"{'ok  ' if good else 'FAIL'} {label}: refused: {r.stderr.strip()}")
                ok &= good
                continue
            if r.returncode != 0:
                print(f"FAIL {label}: {r.stderr.strip()}")
                ok = False
                continue
            got = np.load(logits)
            want, against, tolerance = onnxruntime_logits(path, x), "onnxruntime", 1e-4
            if want is None:
                want, against, tolerance = want_torch, "PyTorch", 1e-3
            err, scale = float(np.abs(got - want).max()), float(np.abs(want).max())
            good = got.shape == want.shape and err <= tolerance * max(scale, 1e-6)
            print(f"{'ok  ' if good else 'FAIL'} {label}: max |diff| {err:.3g} from {against} at logit scale {scale:.3g}")
            ok &= good
            if name in TRAINED:
                ok &= train(a, label, path)
    print("torchvision exports: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
