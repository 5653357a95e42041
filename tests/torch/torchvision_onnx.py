#!/usr/bin/env python3
"""torchvision's classifiers through every way PyTorch exports them to ONNX, imported by trident.
Each family is exported with random weights (batch norm statistics randomised so that none is an
identity) in these modes:

- torchscript: torch.onnx.export(dynamo=False), eval, opset 13, the batch dynamic (Shape/Gather/
  Slice arithmetic); the TorchScript exporter folds BatchNorm in eval mode.
- torchscript_train: the same in training mode (training=TRAINING, no constant folding, opset 17):
  BatchNormalization with training_mode=1 and Dropout kept.
- dynamo: torch.onnx.export(model, (x,), f) as PyTorch's default exporter writes it (opset 18 or
  later, external data, ReduceMean pooling), which folds BatchNorm into the convolutions.
- dynamo_train: the same with model.train(): BatchNorm still folded, Dropout kept (in-place dropout
  as RandomUniformLike → Less → Cast → Div → Mul, stochastic depth likewise per sample).
- dynamo_unoptimized: dynamo=True, optimize=False: BatchNormalization kept, with Shape/Expand/
  CastLike shape arithmetic.
- dynamo_unoptimized_train: the same with model.train(): what trident.Model.from_torch exports.

Every file must import and `trident infer` must give PyTorch's eval-mode logits (within 1e-3 of
their scale; dropout and batch statistics are training-only). `trident explain --mode train` must
fuse the same Conv→BN→ReLU groups in every file that keeps BatchNorm (as many as the TorchScript
training export gives, and some for every family that has such groups), and must say, in one
notice, that the batch norms were folded in every file where they were. Some families also train
an epoch of two synthetic batches from their from_torch-style export (finite loss): ShuffleNet v2's
split, DenseNet's concatenations, ReLU6's and LayerNorm's backward, and the dropouts of VGG,
MobileNet v3 (in place) and EfficientNet (stochastic depth).

By default (CI) the CORE families run in every mode and the others in dynamo_unoptimized_train
(the TorchScript modes where there is no dynamo exporter); --all runs every family in every mode. Exit 77 (skipped) where torch or
torchvision cannot be imported, or where this trident reads no ONNX (the portable GPU build).

    python3 tests/torch/torchvision_onnx.py build/trident OUT_DIR [--device cuda] [--models a,b] [--all]
"""
import inspect
import json
import math
import os
import subprocess
import sys
import warnings

from torch_checks import discard, setup  # exits 77 (skipped) without torch and torchvision

import numpy as np
import torch
import torchvision

# The classification families: plain, residual, grouped (ResNeXt, RegNet), depthwise with ReLU6
# (MobileNet v2), Hardswish and squeeze-excitation (MobileNet v3), SiLU (EfficientNet), channel
# shuffle (ShuffleNet v2), Concat (SqueezeNet, GoogLeNet, Inception, DenseNet), MNASNet, VGG, AlexNet,
# and ConvNeXt (channels-last permutes, LayerNorm, GELU, per-pixel MatMuls, layer scale).
FAMILIES = ["resnet18", "resnext50_32x4d", "regnet_y_400mf", "regnet_x_400mf", "mobilenet_v2",
            "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0", "mnasnet0_5", "squeezenet1_0",
            "squeezenet1_1", "vgg11_bn", "alexnet", "googlenet", "inception_v3", "shufflenet_v2_x0_5",
            "densenet121", "convnext_tiny"]
# Every mode in CI: a residual net, in-place dropout with Hardswish and squeeze-excitation, and
# stochastic depth; the others in from_torch's mode (the dynamo exporter's export takes seconds).
CORE = ["resnet18", "mobilenet_v3_small", "efficientnet_b0"]
MODES = ["torchscript", "torchscript_train", "dynamo", "dynamo_train", "dynamo_unoptimized",
         "dynamo_unoptimized_train"]
KEEPS_BATCHNORM = {"torchscript_train", "dynamo_unoptimized", "dynamo_unoptimized_train"}
# Families with no BatchNorm at all (nothing to fold or fuse) and with no Conv→BN→ReLU group
# (EfficientNet: Conv→BN→SiLU; ConvNeXt: LayerNorm).
NO_BATCHNORM = {"squeezenet1_0", "squeezenet1_1", "alexnet", "convnext_tiny"}
NO_CBR_GROUPS = NO_BATCHNORM | {"efficientnet_b0"}
TRAINED = ["shufflenet_v2_x0_5", "densenet121", "mobilenet_v2", "convnext_tiny", "mobilenet_v3_small", "vgg11_bn",
           "efficientnet_b0"]
BN_PATTERNS = ("conv-bn", "bn-relu")


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


def export(model, mode, x, path):
    """Writes `path`; returns PyTorch's eval-mode logits of the weights the file holds. The
    TorchScript exporter runs the model to trace it, and in training mode that updates the batch
    norms' running statistics before they are written: the model is compared, then restored."""
    saved = [t.clone() for t in model.state_dict().values()]
    model.train(mode.endswith("_train"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if mode.startswith("dynamo"):
                kwargs = {"optimize": False} if mode.startswith("dynamo_unoptimized") else {}
                torch.onnx.export(model, (x,), path, dynamo=True, verbose=False, **kwargs)
            else:
                legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
                if mode == "torchscript_train":
                    legacy.update(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                                  opset_version=17)
                else:
                    legacy.update(opset_version=13)
                torch.onnx.export(model, x, path, input_names=["input"], output_names=["logits"],
                                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, **legacy)
        model.eval()
        with torch.no_grad():
            return model(x).numpy()
    finally:
        model.eval()
        with torch.no_grad():
            for t, s in zip(model.state_dict().values(), saved):
                t.copy_(s)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def check_inference(a, label, path, images, want):
    r = run([a.trident, "infer", path, "--input", images, "--output", path + ".npy", "--iterations", "1", "--warmup",
             "0", "--topk", "0", "--device", a.device])
    if "built without ONNX support" in r.stderr:  # the portable GPU build (docs/GPU.md)
        print(f"skipped: {r.stderr.strip()}")
        sys.exit(77)
    if r.returncode != 0:
        print(f"FAIL {label}: infer: {r.stderr.strip()}")
        return False
    got = np.load(path + ".npy")
    err, scale = float(np.abs(got - want).max()), float(np.abs(want).max())
    good = got.shape == want.shape and err <= 1e-3 * max(scale, 1e-6)
    print(f"{'ok  ' if good else 'FAIL'} {label}: max |diff| {err:.3g} from PyTorch at logit scale {scale:.3g}")
    return good


def fused_batchnorm_groups(a, label, path):
    """(groups fused with a batch norm, the notices) of `trident explain --mode train`, or None."""
    r = run([a.trident, "explain", "--model", path, "--mode", "train", "--json", "--device", a.device])
    if r.returncode != 0:
        print(f"FAIL {label}: explain --mode train: {r.stderr.strip()}")
        return None
    report = json.loads(r.stdout)
    groups = sum(1 for f in report["fusions"] if f["pattern"].startswith(BN_PATTERNS))
    notices = [line for line in r.stderr.splitlines() if "notice:" in line]
    return groups, notices


def train(a, label, path):
    r = run([a.trident, "train", "--model", path, "--synthetic", "--train-limit", "4", "--test-limit", "2",
             "--batch", "2", "--epochs", "1", "--json", "--device", a.device])
    losses = [json.loads(line)["loss"] for line in r.stdout.splitlines()
              if line.startswith("{") and json.loads(line).get("event") == "epoch"]
    good = r.returncode == 0 and len(losses) == 1 and math.isfinite(losses[0])
    print(f"{'ok  ' if good else 'FAIL'} {label}: trained, loss {losses}" + ("" if good else f": {r.stderr.strip()}"))
    return good


def check_family(a, name, modes, x, images):
    model = make_model(name)
    ok, groups_by_mode = True, {}
    for mode in modes:
        label = f"{name} ({mode})"
        path = os.path.join(a.out, f"{name}.{mode}.onnx")
        want = export(model, mode, x, path)
        mode_ok = check_inference(a, label, path, images, want)
        explained = fused_batchnorm_groups(a, label, path)
        if explained is None:
            ok = False
            discard(False, path)
            continue
        groups, notices = explained
        folded = [n for n in notices if "folded the batch norms" in n]
        if mode in KEEPS_BATCHNORM or name in NO_BATCHNORM:
            good = not folded
            groups_by_mode[mode] = groups
            print(f"{'ok  ' if good else 'FAIL'} {label}: {groups} Conv/BN groups fused for training"
                  + ("" if good else f", but: {folded[0]}"))
        else:
            good = len(folded) == 1 and len(notices) == 1
            print(f"{'ok  ' if good else 'FAIL'} {label}: folded batch norms noticed: {notices}")
        mode_ok &= good
        if name in TRAINED and mode == "dynamo_unoptimized_train":
            mode_ok &= train(a, label, path)
        ok &= mode_ok
        discard(mode_ok, path)
    # Every file that keeps BatchNorm fuses the same groups, and a family with Conv→BN→ReLU some.
    counts = set(groups_by_mode.values())
    if name not in NO_BATCHNORM and len(counts) > 1:
        print(f"FAIL {name}: the exports that keep BatchNorm fuse different groups: {groups_by_mode}")
        ok = False
    if name not in NO_CBR_GROUPS and groups_by_mode and min(counts) == 0:
        print(f"FAIL {name}: no Conv/BN group fused: {groups_by_mode}")
        ok = False
    return ok


def main():
    a, x, images = setup([("--models", ""), ("--all", False)])
    every = a.all
    names = a.models.split(",") if a.models else FAMILIES
    usable = MODES if dynamo_available() else [m for m in MODES if m.startswith("torchscript")]
    if len(usable) < len(MODES):
        print("note: no dynamo exporter here (torch without it, or no onnxscript): the TorchScript exports only")
    ok = True
    for name in names:
        if every or name in CORE or a.models:
            modes = usable
        else:
            modes = [m for m in ("dynamo_unoptimized_train",) if m in usable] or usable
        ok &= check_family(a, name, modes, x, images)
    print("torchvision exports: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
