#!/usr/bin/env python3
# PyTorch CPU baseline for trident's benchmarks: the default Fashion-MNIST network (fmnist_cnn)
# trained for one epoch, and the single Conv3x3+BN+ReLU layer of bench_cbr, printed as JSON
# lines in the same shape as trident's, so bench/run_cpu.sh can put them side by side.
import argparse
import gzip
import json
import math
import os
import statistics
import sys
import time

INSTALL_HINT = ("install both in a throwaway venv: python3 -m venv /tmp/torchenv && "
                "/tmp/torchenv/bin/pip install numpy torch, then run with /tmp/torchenv/bin/python "
                "(or PYTHON=/tmp/torchenv/bin/python bench/run_cpu.sh)")
try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"pytorch_cpu.py: torch is not importable ({e}); {INSTALL_HINT}", file=sys.stderr)
    sys.exit(2)
try:
    import numpy as np
except ImportError as e:
    print(f"pytorch_cpu.py: numpy is not importable ({e}); {INSTALL_HINT}", file=sys.stderr)
    sys.exit(2)

FMNIST_MEAN, FMNIST_STD = 0.2860, 0.3530


def emit(obj):
    print(json.dumps(obj), flush=True)


def read_idx(path):
    """Reads an IDX file (optionally gzipped): magic (2 zero bytes, dtype code, ndim) + dims."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    return data.reshape(dims)


def load_fmnist(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = (images.astype(np.float32) / 255.0 - FMNIST_MEAN) / FMNIST_STD
    return torch.from_numpy(x[:, None, :, :].copy()), torch.from_numpy(labels.astype(np.int64))


def cbr(cin, cout):
    return [nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]


class FmnistCnn(nn.Module):
    """trident's fmnist_cnn: 3 CBR blocks (16/32/64), maxpool after the first two, linear 3136→10.
    trident flattens NHWC and PyTorch NCHW; the layouts differ but the work is the same."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(*cbr(1, 16), nn.MaxPool2d(2, 2), *cbr(16, 32),
                                      nn.MaxPool2d(2, 2), *cbr(32, 64))
        self.fc = nn.Linear(7 * 7 * 64, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


def learning_rate(step, total, warmup, base):
    # The same schedule as trident's trainer: linear warm-up from base/10, then cosine to 0.
    if step < warmup:
        return base * (0.1 + 0.9 * (step + 1) / warmup)
    t = (step - warmup) / max(total - warmup, 1)
    return base * 0.5 * (1.0 + math.cos(math.pi * min(t, 1.0)))


def bench_epoch(args, fmt):
    x_train, y_train = load_fmnist(args.data, "train")
    if args.train_limit:
        x_train, y_train = x_train[:args.train_limit], y_train[:args.train_limit]
    x_train = x_train.contiguous(memory_format=fmt)
    torch.manual_seed(args.seed)
    model = FmnistCnn().to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    n = x_train.shape[0]
    per_epoch = n // args.batch  # drop_last, like trident's training iterator
    warmup = int(0.2 * per_epoch)
    total = per_epoch * args.epochs
    gen = torch.Generator().manual_seed(args.seed)
    step = 0
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(n, generator=gen)
        loss_sum, correct, seen = 0.0, 0, 0
        start = time.perf_counter()
        for b in range(per_epoch):
            idx = perm[b * args.batch:(b + 1) * args.batch]
            xb = x_train.index_select(0, idx).contiguous(memory_format=fmt)
            yb = y_train.index_select(0, idx)
            for g in opt.param_groups:
                g["lr"] = learning_rate(step, total, warmup, args.lr)
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            loss_sum += loss.item()
            correct += int((logits.argmax(1) == yb).sum())
            seen += xb.shape[0]
        secs = time.perf_counter() - start
        emit({"bench": "fmnist_epoch", "impl": "pytorch", "backend": "torch_cpu",
              "threads": torch.get_num_threads(), "batch": args.batch, "epoch": epoch + 1,
              "images": seen, "seconds": secs, "images_per_s": seen / secs,
              "loss": loss_sum / per_epoch, "accuracy": correct / seen,
              "memory_format": args.memory_format, "torch": torch.__version__})


class CbrHead(nn.Module):
    """bench_cbr's network: one CBR layer, then global average pooling and a linear head."""

    def __init__(self, c, k, classes=10):
        super().__init__()
        self.cbr = nn.Sequential(*cbr(c, k))
        self.fc = nn.Linear(k, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.cbr(x), 1), 1))


def timed(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_cbr(args, fmt):
    n, h, w, c, k = args.n, args.h, args.w, args.c, args.k
    torch.manual_seed(args.seed)
    model = CbrHead(c, k).to(memory_format=fmt)
    x = torch.randn(n, c, h, w).contiguous(memory_format=fmt)
    y = torch.randint(0, 10, (n,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    shape = [n, h, w, c, k]
    base = {"bench": "cbr_layer", "impl": "pytorch", "backend": "torch_cpu",
            "threads": torch.get_num_threads(), "shape": shape,
            "memory_format": args.memory_format}

    def train_step():  # forward + backward (+ SGD with --sgd), like trident_bench_cbr
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        if args.sgd:
            opt.step()

    model.train()
    med = timed(train_step, args.warmup, args.iters)
    emit({**base, "mode": "train", "variant": "eager", "sgd": args.sgd, "median_ms": med * 1e3,
          "images_per_s": n / med, "iters": args.iters})

    model.eval()
    with torch.inference_mode():
        med = timed(lambda: model(x), args.warmup, args.iters)
    emit({**base, "mode": "infer", "variant": "eager", "median_ms": med * 1e3,
          "images_per_s": n / med, "iters": args.iters})


def bench_infer(args, fmt):
    """Inference throughput of fmnist_cnn (eval mode, inference_mode) at --batch, like
    `trident infer --model fmnist_cnn --batch B`: back-to-back forward passes, random input."""
    torch.manual_seed(args.seed)
    model = FmnistCnn().to(memory_format=fmt).eval()
    x = torch.randn(args.batch, 1, 28, 28).contiguous(memory_format=fmt)
    with torch.inference_mode():
        for _ in range(args.warmup):
            model(x)
        start = time.perf_counter()
        for _ in range(args.iters):
            model(x)
        secs = time.perf_counter() - start
    emit({"bench": "fmnist_infer", "impl": "pytorch", "backend": "torch_cpu",
          "threads": torch.get_num_threads(), "batch": args.batch, "iters": args.iters,
          "seconds": secs, "images_per_s": args.batch * args.iters / secs,
          "memory_format": args.memory_format, "torch": torch.__version__})


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--what", choices=["all", "epoch", "cbr", "infer"], default="all",
                   help="all = cbr + epoch; infer = fmnist_cnn inference throughput")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--train-limit", type=int, default=0)
    p.add_argument("--memory-format", choices=["channels_last", "contiguous"], default="channels_last")
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--h", type=int, default=56)
    p.add_argument("--w", type=int, default=56)
    p.add_argument("--c", type=int, default=64)
    p.add_argument("--k", type=int, default=64)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--sgd", action="store_true", help="include the SGD update in the CBR train step")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    fmt = torch.channels_last if args.memory_format == "channels_last" else torch.contiguous_format
    if args.what in ("all", "cbr"):
        bench_cbr(args, fmt)
    if args.what in ("all", "epoch"):
        bench_epoch(args, fmt)
    if args.what == "infer":
        bench_infer(args, fmt)


if __name__ == "__main__":
    main()
