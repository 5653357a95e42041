#!/usr/bin/env python3
"""trident's AdamW against torch.optim.AdamW itself: the zoo's fmnist_cnn trained five steps by
trident (Python API, cpu_ref) and the same network written in PyTorch, from trident's initial
weights, on the same batches with the same settings, must give the same losses step by step and
the same weights after the last step (up to float32 summation order). Exit 77 (skipped) where
torch or the trident module cannot be imported; the project's set-up does not install torch.

    PYTHONPATH=<the trident module's folder> python3 tests/torch/adamw_steps.py OUT_DIR
"""
import json
import os
import struct
import sys

try:
    import numpy as np
    import torch
    import trident
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

SETTINGS = dict(lr=2e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05)
STEPS, BATCH = 5, 8


def read_safetensors(path):
    """The F32 tensors of a safetensors file, as numpy arrays (no safetensors package needed)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=np.float32).reshape(info["shape"]).copy()
    return out


class FmnistCnn(torch.nn.Module):
    """trident's fmnist_cnn: three conv-batchnorm-relu blocks (2x2 max-pooling after the first
    two) and a linear classifier, named as trident names its tensors."""

    def __init__(self, conv_bias):
        super().__init__()
        self.blocks = torch.nn.ModuleList()
        for cin, cout in ((1, 16), (16, 32), (32, 64)):
            self.blocks.append(torch.nn.ModuleDict(dict(conv=torch.nn.Conv2d(cin, cout, 3, 1, 1, bias=conv_bias),
                                                        bn=torch.nn.BatchNorm2d(cout))))
        self.fc = torch.nn.Linear(64 * 7 * 7, 10)

    def forward(self, x):
        for i, b in enumerate(self.blocks):
            x = torch.relu(b["bn"](b["conv"](x)))
            if i < 2:
                x = torch.nn.functional.max_pool2d(x, 2)
        return self.fc(torch.flatten(x, 1))

    def named_tensors(self):
        """(trident's name, this network's parameter) pairs."""
        for i, b in enumerate(self.blocks):
            for part in ("conv", "bn"):
                for kind, p in b[part].named_parameters():
                    yield f"block{i + 1}.{part}.{kind}", p
        yield "fc.weight", self.fc.weight
        yield "fc.bias", self.fc.bias


def to_torch(name, a):
    """A trident tensor in PyTorch's layout: OHWI convolutions to OIHW, and the classifier's
    columns from NHWC's flattening order (h, w, c) to NCHW's (c, h, w)."""
    if a.ndim == 4:
        return a.transpose(0, 3, 1, 2)
    if name == "fc.weight":
        return a.reshape(10, 7, 7, 64).transpose(0, 3, 1, 2).reshape(10, -1)
    return a


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "torch_adamw_steps"
    os.makedirs(out, exist_ok=True)
    net = trident.Network(trident.Model.zoo("fmnist_cnn"), mode="training", device="cpu_ref", batch=BATCH,
                          optimizer="adamw", learning_rate=SETTINGS["lr"], beta1=SETTINGS["betas"][0],
                          beta2=SETTINGS["betas"][1], eps=SETTINGS["eps"], weight_decay=SETTINGS["weight_decay"])
    first = os.path.join(out, "initial.safetensors")
    net.save_weights(first)
    initial = read_safetensors(first)
    model = FmnistCnn(conv_bias="block1.conv.bias" in initial)
    with torch.no_grad():
        for name, p in model.named_tensors():
            p.copy_(torch.from_numpy(np.ascontiguousarray(to_torch(name, initial[name]))))
    opt = torch.optim.AdamW(model.parameters(), **SETTINGS)
    rng = np.random.default_rng(3)
    ok = True
    for step in range(STEPS):
        x = rng.standard_normal((BATCH, 1, 28, 28)).astype(np.float32)
        y = rng.integers(0, 10, BATCH).astype(np.int64)
        got = net.train_step(x, y)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model.train()(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        opt.step()
        want = float(loss)
        same = abs(got - want) <= 1e-4 * abs(want)
        print(f"{'ok  ' if same else 'FAIL'} step {step + 1}: loss {got:.7f} (trident) {want:.7f} (torch.optim.AdamW)")
        ok &= same
    last = os.path.join(out, "trained.safetensors")
    net.save_weights(last)
    trained = read_safetensors(last)
    for name, p in model.named_tensors():
        if name.endswith("conv.bias"):
            continue  # cancelled by the batchnorm after it: no effect on the outputs
        got, want = to_torch(name, trained[name]), p.detach().numpy()
        err, scale = float(np.abs(got - want).max()), float(np.abs(want).max())
        same = err <= 1e-3 * scale
        print(f"{'ok  ' if same else 'FAIL'} {name}: max |diff| {err:.3g} at scale {scale:.3g}")
        ok &= same
    steps = float(trained["adamw.step"][0])
    print(f"{'ok  ' if steps == STEPS else 'FAIL'} the step count is {steps:g}")
    ok &= steps == STEPS
    print("adamw against torch: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
