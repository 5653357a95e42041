"""Baseline for bench/bench_data.cpp: the same decode + augmentation in Python with PIL, the way
torchvision's ImageFolder + RandomResizedCrop + RandomHorizontalFlip + Normalize do it, on a
process pool of the same size. Prints one JSON line. Exits 2 when PIL or numpy is missing."""
import argparse
import json
import math
import os
import random
import sys
import time
from multiprocessing import Pool

try:
    import numpy as np
    from PIL import Image
except ImportError as e:  # pragma: no cover - depends on the interpreter
    print(f"data_pipeline_pil.py: needs numpy and Pillow ({e})", file=sys.stderr)
    sys.exit(2)

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def crop_box(width, height, rng):
    """torchvision's RandomResizedCrop.get_params with scale (0.08, 1), ratio (3/4, 4/3)."""
    area = width * height
    log_lo, log_hi = math.log(3 / 4), math.log(4 / 3)
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        aspect = math.exp(rng.uniform(log_lo, log_hi))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, height - h), rng.randint(0, width - w), h, w
    ratio = width / height
    w, h = width, height
    if ratio < 3 / 4:
        h = int(round(w / (3 / 4)))
    elif ratio > 4 / 3:
        w = int(round(h * (4 / 3)))
    return (height - h) // 2, (width - w) // 2, h, w


def train_sample(job):
    path, size, seed = job
    rng = random.Random(seed)
    with Image.open(path) as im:
        im = im.convert("RGB")
    top, left, h, w = crop_box(im.width, im.height, rng)
    im = im.crop((left, top, left + w, top + h)).resize((size, size), Image.BILINEAR)
    if rng.random() < 0.5:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    x = (np.asarray(im, np.float32) / 255.0 - MEAN) / STD  # HWC float, as trident's NHWC rows
    return float(x[0, 0, 0])  # the sample stays in the worker, as trident's stays in its ring


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True, help="image folder; its train/ split is read")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--epochs", type=int, default=2, help="timed passes, after one untimed pass")
    a = ap.parse_args()
    root = os.path.join(a.data, "train")
    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(root) for f in fs
                   if f.lower().endswith((".jpg", ".jpeg", ".png")))
    with Pool(a.workers) as pool:
        def run(epoch):
            jobs = [(f, a.image_size, epoch * 1_000_003 + i) for i, f in enumerate(files)]
            pool.map(train_sample, jobs, chunksize=8)
            return len(jobs)
        run(0)
        start = time.perf_counter()
        n = sum(run(e) for e in range(1, a.epochs + 1))
        seconds = time.perf_counter() - start
    rate = n / seconds
    print(json.dumps({"bench": "data_pipeline", "impl": "pil", "transform": "train", "workers": a.workers,
                      "image_size": a.image_size, "images": n, "seconds": seconds, "images_per_second": rate,
                      "images_per_second_per_core": rate / a.workers}))


if __name__ == "__main__":
    main()
