#!/usr/bin/env python3
"""A PyTorch user's model trained by trident and by PyTorch on the same recipe, curves side by side.

torchvision's ResNet-18 (10 classes) goes to trident as a user exports it (torch.onnx.export,
default exporter with optimize=False in training mode, as the README says; the TorchScript
exporter in training mode where the default one is missing) and is trained by `trident train` on
an image folder; the same module, from the same initial weights, is trained by PyTorch with the
recipe trident runs: SGD with momentum 0.9 and weight decay 5e-4 on every parameter, a linear
warm-up from a tenth of the rate over 0.2 epochs then a cosine to 0 at the last step (changed
every step), RandomResizedCrop + horizontal flip with ImageNet's normalisation, the last partial
batch dropped; evaluation resizes the shorter side to S/0.875 and crops the centre. fp16 is
PyTorch's AMP with GradScaler. Each seed gives both systems the same initial weights; each
shuffles and augments with its own generator.

Afterwards trident's trained weights go back out as a state dict (`trident export`), load into
torchvision with load_state_dict(strict=True), and their logits on a batch of validation images
are compared with `trident infer`'s.

The data: Fashion-MNIST's IDX files written once as an image folder of PNGs
(OUT/folder/{train,val}/<digit>/N.png).

    python3 bench/finetune_vs_pytorch.py --trident build-gpu/trident --idx DIR --out OUT \
        --device cuda --precision fp16 --epochs 3 --batch 256 --seeds 1,2

Prints one JSON line per epoch of each run and a summary line; writes them to OUT/results.jsonl.
"""
import argparse
import copy
import gzip
import json
import math
import os
import subprocess
import sys
import time

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def read_idx(path):
    import numpy as np
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def write_folder(idx_dir, folder):
    """Fashion-MNIST as torchvision's ImageFolder reads it; written once (a marker file at the end)."""
    from PIL import Image
    done = os.path.join(folder, ".complete")
    if os.path.exists(done):
        return
    for split, prefix in (("train", "train"), ("val", "t10k")):
        images = read_idx(os.path.join(idx_dir, f"{prefix}-images-idx3-ubyte.gz"))
        labels = read_idx(os.path.join(idx_dir, f"{prefix}-labels-idx1-ubyte.gz"))
        for c in range(10):
            os.makedirs(os.path.join(folder, split, str(c)), exist_ok=True)
        for i, (img, label) in enumerate(zip(images, labels)):
            Image.fromarray(img, mode="L").save(os.path.join(folder, split, str(int(label)), f"{i}.png"))
    open(done, "w").close()


def learning_rate(step, total, warmup, base):
    """trident's schedule (src/runtime/trainer.cpp), step by step."""
    if step < warmup:
        return base * (0.1 + 0.9 * (step + 1) / warmup)
    t = (step - warmup) / max(total - warmup, 1)
    return base * 0.5 * (1.0 + math.cos(math.pi * min(t, 1.0)))


def make_module(seed):
    import torch
    import torchvision
    torch.manual_seed(seed)
    return torchvision.models.resnet18(num_classes=10)


def export_onnx(module, size, path):
    """The export the README gives, in training mode so BatchNorm stays; the module's state kept."""
    import torch
    state = copy.deepcopy(module.state_dict())  # a training-mode trace updates running statistics
    module.train()
    x = torch.randn(2, 3, size, size)
    how = "dynamo, optimize=False"
    try:
        torch.onnx.export(module, (x,), path, dynamo=True, optimize=False)
    except Exception as e:  # noqa: BLE001 - no onnxscript, or an older exporter
        print(f"finetune_vs_pytorch: the default exporter failed ({type(e).__name__}: {e}); "
              "using the TorchScript exporter in training mode", file=sys.stderr)
        how = "TorchScript, training=TRAINING"
        torch.onnx.export(module, (x,), path, dynamo=False, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}})
    module.load_state_dict(state)
    return how


def loaders(folder, size, batch, workers, seed, train_limit, test_limit):
    import torch
    import torchvision
    from torchvision import transforms
    norm = transforms.Normalize(MEAN, STD)
    train_tf = transforms.Compose([transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
                                   transforms.ToTensor(), norm])
    val_tf = transforms.Compose([transforms.Resize(round(size / 0.875)), transforms.CenterCrop(size),
                                 transforms.ToTensor(), norm])
    rgb = lambda p: __import__("PIL.Image", fromlist=["Image"]).open(p).convert("RGB")  # noqa: E731
    train = torchvision.datasets.ImageFolder(os.path.join(folder, "train"), train_tf, loader=rgb)
    val = torchvision.datasets.ImageFolder(os.path.join(folder, "val"), val_tf, loader=rgb)
    g = torch.Generator().manual_seed(seed)
    if train_limit:
        train = torch.utils.data.Subset(train, torch.randperm(len(train), generator=g)[:train_limit].tolist())
    if test_limit:
        val = torch.utils.data.Subset(val, torch.randperm(len(val), generator=g)[:test_limit].tolist())
    kw = dict(num_workers=workers, pin_memory=True, persistent_workers=workers > 0)
    return (torch.utils.data.DataLoader(train, batch_size=batch, shuffle=True, drop_last=True, generator=g, **kw),
            torch.utils.data.DataLoader(val, batch_size=batch, shuffle=False, **kw))


def evaluate(module, loader, device, amp_dtype):
    import torch
    module.eval()
    correct = seen = 0
    loss_sum = 0.0
    with torch.no_grad(), torch.autocast(device_type=device, dtype=amp_dtype, enabled=amp_dtype is not None):
        for x, y in loader:
            x = x.to(device, non_blocking=True).to(memory_format=torch.channels_last)
            y = y.to(device, non_blocking=True)
            logits = module(x).float()
            loss_sum += torch.nn.functional.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(1) == y).sum().item()
            seen += y.numel()
    return correct / seen, loss_sum / seen


def train_pytorch(args, seed, folder, emit):
    import torch
    device = args.device
    torch.backends.cudnn.benchmark = True
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
    module = make_module(seed).to(device).to(memory_format=torch.channels_last)
    train, val = loaders(folder, args.image_size, args.batch, args.workers, seed, args.train_limit, args.test_limit)
    opt = torch.optim.SGD(module.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    scaler = torch.amp.GradScaler(device, enabled=amp_dtype == torch.float16)
    per_epoch = len(train)
    total, warmup = per_epoch * args.epochs, int(0.2 * per_epoch)
    step = 0
    for epoch in range(args.epochs):
        module.train()
        start = time.time()
        loss_sum = 0.0
        for x, y in train:
            for group in opt.param_groups:
                group["lr"] = learning_rate(step, total, warmup, args.lr)
            x = x.to(device, non_blocking=True).to(memory_format=torch.channels_last)
            y = y.to(device, non_blocking=True)
            with torch.autocast(device_type=device, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = torch.nn.functional.cross_entropy(module(x), y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            loss_sum += loss.item()
            step += 1
        top1, val_loss = evaluate(module, val, device, amp_dtype)
        emit({"system": "pytorch", "seed": seed, "epoch": epoch + 1, "train_loss": loss_sum / per_epoch,
              "val_loss": val_loss, "top1": top1, "seconds": time.time() - start})
    return top1


def train_trident(args, seed, folder, onnx_path, emit):
    ckpt = os.path.join(args.out, f"trident_seed{seed}.ckpt")
    log = os.path.join(args.out, f"trident_seed{seed}.jsonl")
    for stale in (ckpt, log):
        if os.path.exists(stale):
            os.remove(stale)
    cmd = [args.trident, "train", "--model", onnx_path, "--data", folder, "--device", args.device,
           "--precision", args.precision, "--epochs", str(args.epochs), "--batch", str(args.batch),
           "--lr", str(args.lr), "--image-size", str(args.image_size), "--seed", str(seed),
           "--save", ckpt, "--log", log]
    if args.train_limit:
        cmd += ["--train-limit", str(args.train_limit)]
    if args.test_limit:
        cmd += ["--test-limit", str(args.test_limit)]
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    cmd += args.trident_arg
    print("finetune_vs_pytorch: " + " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    top1 = None
    with open(log) as f:
        for line in f:
            e = json.loads(line)
            top1 = e["eval_accuracy"]
            emit({"system": "trident", "seed": seed, "epoch": e["epoch"], "train_loss": e["train_loss"],
                  "val_loss": e["eval_loss"], "top1": top1, "seconds": e["seconds"],
                  "skipped_images": e.get("skipped_images", 0)})
    return top1, ckpt


def read_safetensors(path):
    """A safetensors file as torch tensors (the safetensors package is not everywhere torch is)."""
    import numpy as np
    import torch
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        a = np.frombuffer(data, dtype=dtypes[t["dtype"]], count=(end - begin) // np.dtype(dtypes[t["dtype"]]).itemsize,
                          offset=8 + n + begin)
        out[name] = torch.from_numpy(a.reshape(t["shape"]).copy())
    return out


def state_dict_check(args, ckpt, folder):
    """trident's weights into torchvision (strict), and its logits against `trident infer`'s."""
    import numpy as np
    import torch
    import torchvision
    sd_path = os.path.join(args.out, "trident_trained.safetensors")
    subprocess.run([args.trident, "export", ckpt, "--output", sd_path], check=True, stdout=sys.stderr)
    module = torchvision.models.resnet18(num_classes=10)
    module.load_state_dict(read_safetensors(sd_path), strict=True)
    module.eval()
    _, val = loaders(folder, args.image_size, 16, 0, 0, 0, 16)
    x, _ = next(iter(val))
    x_path, y_path = os.path.join(args.out, "check_input.npy"), os.path.join(args.out, "check_logits.npy")
    np.save(x_path, x.numpy())
    subprocess.run([args.trident, "infer", "--model", os.path.join(args.out, "resnet18.onnx"), "--weights", ckpt,
                    "--input", x_path, "--output", y_path, "--batch", str(x.shape[0]), "--iterations", "1",
                    "--warmup", "0", "--device", "cpu_ref"], check=True, stdout=sys.stderr)
    with torch.no_grad():
        theirs = module(x).numpy()
    ours = np.load(y_path)
    return float(np.abs(theirs - ours).max() / max(np.abs(theirs).max(), 1e-12))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trident", required=True)
    p.add_argument("--idx", default="/usr/share/datasets/fashion-mnist", help="Fashion-MNIST's IDX files")
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--precision", default="fp16", choices=["fp32", "fp16", "bf16"])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--workers", type=int, default=0, help="loader workers for both (0: each system's default)")
    p.add_argument("--seeds", default="1,2")
    p.add_argument("--train-limit", type=int, default=0)
    p.add_argument("--test-limit", type=int, default=0)
    p.add_argument("--systems", default="trident,pytorch",
                   help="which to train: trident, pytorch or both (a comma list); the summary compares what ran")
    p.add_argument("--trident-arg", action="append", default=[],
                   help="one more argument for `trident train` (repeatable), e.g. --trident-arg=--no-cuda-graph")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    folder = os.path.join(args.out, "folder")
    write_folder(args.idx, folder)
    results = open(os.path.join(args.out, "results.jsonl"), "w")

    def emit(record):
        line = json.dumps(record)
        print(line, flush=True)
        results.write(line + "\n")
        results.flush()

    systems = set(args.systems.split(","))
    if not systems or not systems <= {"trident", "pytorch"}:
        p.error("--systems takes trident, pytorch or both")
    finals = {"trident": [], "pytorch": []}
    ckpt = None
    for seed in [int(s) for s in args.seeds.split(",")]:
        onnx_path = os.path.join(args.out, "resnet18.onnx") if seed == int(args.seeds.split(",")[0]) else \
            os.path.join(args.out, f"resnet18_seed{seed}.onnx")
        how = export_onnx(make_module(seed), args.image_size, onnx_path)
        emit({"seed": seed, "export": how, "onnx": onnx_path})
        if "trident" in systems:
            top1, seed_ckpt = train_trident(args, seed, folder, onnx_path, emit)
            finals["trident"].append(top1)
            ckpt = ckpt or seed_ckpt
        if "pytorch" in systems:
            finals["pytorch"].append(train_pytorch(args, seed, folder, emit))
    mean = lambda v: sum(v) / len(v)  # noqa: E731
    spread = lambda v: 100 * (max(v) - min(v))  # noqa: E731
    summary = {"summary": True, "precision": args.precision, "trident_args": args.trident_arg}
    for system, tops in finals.items():
        if tops:
            summary[f"{system}_top1"] = tops
            summary[f"{system}_mean_top1"] = mean(tops)
            summary[f"{system}_seed_spread_points"] = spread(tops)
    if finals["trident"] and finals["pytorch"]:
        summary["mean_difference_points"] = 100 * (mean(finals["trident"]) - mean(finals["pytorch"]))
    if ckpt:
        summary["state_dict_logits_max_rel_error"] = state_dict_check(args, ckpt, folder)
    emit(summary)


if __name__ == "__main__":
    main()
