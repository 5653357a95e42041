"""What the PyTorch checks of tests/torch/ share: the skip where torch or torchvision cannot be
imported (exit 77, CTest's skip code), the command line (trident binary, output folder, device),
the images both feed to PyTorch and to trident, and state dicts in safetensors, read and written
here so the checks need no safetensors package."""
import argparse
import glob
import json
import os
import struct
import sys

try:
    import numpy as np
    import torch
    import torchvision  # noqa: F401 (the checks use it; imported here so that its absence skips)
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)


def setup(extra_args=()):
    """Parses trident OUT [--device D] (plus `extra_args`: (flag, default) pairs, a bool default
    making a switch), makes OUT and
    writes two seeded 224x224 images to OUT/images.npy; returns (args, images tensor, its path)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("trident")
    ap.add_argument("out")
    ap.add_argument("--device", default="cpu")
    for flag, default in extra_args:
        if isinstance(default, bool):
            ap.add_argument(flag, action="store_true")
        else:
            ap.add_argument(flag, default=default)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(2, 3, 224, 224)
    images = os.path.join(a.out, "images.npy")
    np.save(images, x.numpy())
    return a, x, images


def discard(passed, *stems):
    """Removes the files of a check that passed: every file whose name starts with a stem (an
    export and its .data and .npy beside it). They are hundreds of MB each, gigabytes over a run,
    and would otherwise stay in the build folder. A failed check's files stay for inspection."""
    files = sorted(f for stem in stems for f in glob.glob(glob.escape(stem) + "*"))
    if not passed:
        print(f"kept for inspection: {', '.join(files)}")
        return
    for f in files:
        os.remove(f)


DTYPES = {torch.float32: ("F32", np.float32), torch.int64: ("I64", np.int64)}


def save_state_dict(state, path):
    """A state dict as safetensors, written here so the test needs no safetensors package."""
    header, blobs, offset = {}, [], 0
    for name, t in state.items():
        code, np_type = DTYPES[t.dtype]
        data = t.detach().cpu().contiguous().numpy().astype(np_type).tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load_state_dict(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    types = {"F32": np.float32, "I64": np.int64, "I32": np.int32}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        s, e = info["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[s:e], dtype=types[info["dtype"]]).reshape(info["shape"]).copy())
    return out
