#!/usr/bin/env python3
"""Weights between trident and PyTorch itself, end to end, for torchvision's ResNet-18,
ResNet-50 and VGG16-BN: a torchvision model with random weights and batchnorm statistics,
saved as a state dict, is run by `trident infer --weights` and must give torchvision's logits;
`trident export --format torch` of those weights must load with `load_state_dict(strict=True)`
and hold the same tensors; a checkpoint trident trained itself, exported, must give in
PyTorch the logits trident gives. Exit 77 (skipped) where torch or torchvision cannot be
imported (`scripts/setup.sh --tests` installs PyPI's in .venv-torch; the GPU machines have both).

    python3 tests/torch/round_trip.py build/trident OUT_DIR [--device cuda]
"""
import os
import subprocess
import sys

from torch_checks import discard, load_state_dict, save_state_dict, setup  # exits 77 (skipped) without torch, torchvision

import numpy as np
import torch
import torchvision

def randomise(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (0.05 if p.dim() > 1 else 0.2) + (1.0 if name.endswith("bn1.weight") else 0.0))
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
    return model.eval()


def trident(binary, *args):
    r = subprocess.run([binary, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"trident {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout


def close(got, want, what, rtol):
    scale = float(np.abs(want).max())
    err = float(np.abs(got - want).max())
    ok = err <= rtol * max(scale, 1e-6)
    print(f"{'ok  ' if ok else 'FAIL'} {what}: max |diff| {err:.3g} at logit scale {scale:.3g}")
    return ok


def main():
    a, x, images = setup([("--models", "resnet18,resnet50,vgg16_bn")])
    dev = ["--device", a.device]
    rtol = 2e-3  # fp32 against fp32: different summation orders through 18 to 50 layers
    ok = True
    for name in a.models.split(","):
        model = randomise(getattr(torchvision.models, name)(), 7)
        with torch.no_grad():
            want = model(x).numpy()
        state = os.path.join(a.out, f"{name}.torch.safetensors")
        save_state_dict(model.state_dict(), state)

        # PyTorch's state dict in: trident infers what torchvision infers.
        logits = os.path.join(a.out, f"{name}.trident.npy")
        trident(a.trident, "infer", "--model", name, "--weights", state, "--input", images, "--output", logits,
                "--iterations", "1", "--warmup", "0", "--topk", "0", *dev)
        model_ok = close(np.load(logits), want, f"{name}: trident infer on torchvision's state dict", rtol)

        # And out again: strict load, the same tensors.
        exported = os.path.join(a.out, f"{name}.exported.safetensors")
        trident(a.trident, "export", "--model", name, "--weights", state, "--output", exported, "--format", "torch")
        fresh = getattr(torchvision.models, name)()
        fresh.load_state_dict(load_state_dict(exported), strict=True)
        same = all(torch.equal(fresh.state_dict()[k], v) for k, v in model.state_dict().items()
                   if not k.endswith("num_batches_tracked"))
        print(f"{'ok  ' if same else 'FAIL'} {name}: exported state dict loads strictly with the same tensors")
        model_ok &= same
        ok &= model_ok
        discard(model_ok, state, logits, exported)

    # A checkpoint trident trained (its own layouts, trained batchnorm statistics), exported.
    name = a.models.split(",")[0]
    ckpt = os.path.join(a.out, f"{name}.ckpt")
    trident(a.trident, "train", "--model", name, "--synthetic", "--epochs", "1", "--batch", "8", "--train-limit", "32",
            "--test-limit", "8", "--save", ckpt, *dev)
    exported = os.path.join(a.out, f"{name}.trained.safetensors")
    trident(a.trident, "export", "--model", name, "--weights", ckpt, "--output", exported, "--format", "torch")
    model = getattr(torchvision.models, name)()
    model.load_state_dict(load_state_dict(exported), strict=True)
    with torch.no_grad():
        want = model.eval()(x).numpy()
    logits = os.path.join(a.out, f"{name}.trained.npy")
    trident(a.trident, "infer", "--model", name, "--weights", ckpt, "--input", images, "--output", logits,
            "--iterations", "1", "--warmup", "0", "--topk", "0", *dev)
    trained_ok = close(np.load(logits), want, f"{name}: a trained checkpoint, exported, in PyTorch", rtol)
    ok &= trained_ok
    discard(trained_ok, ckpt, exported, logits)
    print("round trip: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
