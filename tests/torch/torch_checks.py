"""What the PyTorch checks of tests/torch/ share: the skip where torch or torchvision cannot be
imported (exit 77, CTest's skip code), the command line (trident binary, output folder, device)
and the images both feed to PyTorch and to trident."""
import argparse
import os
import sys

try:
    import numpy as np
    import torch
    import torchvision  # noqa: F401 (the checks use it; imported here so that its absence skips)
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)


def setup(extra_args=()):
    """Parses trident OUT [--device D] (plus `extra_args`: (flag, default) pairs), makes OUT and
    writes two seeded 224x224 images to OUT/images.npy; returns (args, images tensor, its path)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("trident")
    ap.add_argument("out")
    ap.add_argument("--device", default="cpu")
    for flag, default in extra_args:
        ap.add_argument(flag, default=default)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(2, 3, 224, 224)
    images = os.path.join(a.out, "images.npy")
    np.save(images, x.numpy())
    return a, x, images
