"""GPU baseline for `trident_bench_data --decode gpu`: the same decode + RandomResizedCrop + flip +
normalise with torchvision on the GPU, as a PyTorch user would write it today — the files read
by a thread pool, torchvision.io.decode_jpeg(device="cuda") on each batch (nvJPEG, batched),
then per image resized_crop (antialiased bilinear) and flip on the GPU, and one normalisation
of the stacked batch. Prints one JSON line. Exits 2 without torch, torchvision or a GPU."""
import argparse
import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

try:
    import torch
    import torchvision
    from torchvision.io import decode_jpeg
    from torchvision.transforms.v2 import functional as F
except ImportError as e:  # pragma: no cover - depends on the interpreter
    print(f"data_pipeline_torchvision_gpu.py: needs torch and torchvision ({e})", file=sys.stderr)
    sys.exit(2)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data_pipeline_pil import crop_box  # noqa: E402  (the same draw as the CPU baseline)


def read(path):
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True, help="image folder; its train/ split's JPEGs are read")
    ap.add_argument("--workers", type=int, default=4, help="threads that read the files")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--epochs", type=int, default=1, help="timed passes, after one untimed pass")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("data_pipeline_torchvision_gpu.py: no GPU", file=sys.stderr)
        sys.exit(2)
    root = os.path.join(a.data, "train")
    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(root) for f in fs
                   if f.lower().endswith((".jpg", ".jpeg")))
    mean = torch.tensor([0.485, 0.456, 0.406], device="cuda").view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device="cuda").view(1, 3, 1, 1) * 255
    size = [a.image_size, a.image_size]

    def run(epoch, pool):
        rng = random.Random(epoch)
        order = list(range(len(files)))
        rng.shuffle(order)
        made = 0
        for first in range(0, len(order) - a.batch + 1, a.batch):
            data = list(pool.map(read, [files[i] for i in order[first:first + a.batch]]))
            images = decode_jpeg(data, device="cuda")  # CHW uint8 on the GPU
            rows = []
            for im in images:
                top, left, h, w = crop_box(im.shape[2], im.shape[1], rng)
                x = F.resized_crop(im, top, left, h, w, size, antialias=True)
                rows.append(F.horizontal_flip(x) if rng.random() < 0.5 else x)
            batch = (torch.stack(rows).float() - mean) / std
            made += batch.shape[0]
        torch.cuda.synchronize()
        return made

    with ThreadPoolExecutor(a.workers) as pool:
        run(0, pool)
        start = time.perf_counter()
        n = sum(run(e, pool) for e in range(1, a.epochs + 1))
        seconds = time.perf_counter() - start
    rate = n / seconds
    print(json.dumps({"bench": "data_pipeline", "impl": "torchvision_gpu", "decode": "gpu",
                      "torchvision": torchvision.__version__, "transform": "train", "workers": a.workers,
                      "image_size": a.image_size, "images": n, "seconds": seconds, "images_per_second": rate}))


if __name__ == "__main__":
    main()
