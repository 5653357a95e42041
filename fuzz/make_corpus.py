#!/usr/bin/env python3
# Writes the checked-in seed corpora in fuzz/corpus/: tiny valid .npy, IDX (plain and gzip)
# and checkpoint files with the Python standard library, JPEG and PNG images with Pillow (where
# it is installed: the project's .venv), and copies the small ONNX models that
# tests/onnx/make_models.py writes. Deterministic: rerunning it reproduces the same bytes.
#
#   python3 fuzz/make_corpus.py [--onnx-models DIR]   # DIR: where make_models.py wrote them
import argparse
import gzip
import json
import shutil
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent


def write(target, name, data):
    d = HERE / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


# --- .npy: versions 1.0, 2.0 and 3.0; f32, f64, i32; scalar, empty, 1-D, 2-D and 4-D.
def npy(descr, shape, payload, major=1):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    text = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    len_bytes = 2 if major == 1 else 4
    pre = 6 + 2 + len_bytes
    total = (pre + len(text) + 1 + 63) // 64 * 64
    text = text.ljust(total - pre - 1) + "\n"
    length = struct.pack("<H" if major == 1 else "<I", len(text))
    return b"\x93NUMPY" + bytes([major, 0]) + length + text.encode() + payload


def npy_corpus():
    write("npy", "f32_vector.npy", npy("<f4", [3], struct.pack("<3f", 1.0, -2.5, 3.0)))
    write("npy", "f64_matrix.npy", npy("<f8", [2, 2], struct.pack("<4d", 0.5, 1, 2, 4)))
    write("npy", "i32_scalar.npy", npy("<i4", [], struct.pack("<i", 7)))
    write("npy", "f32_empty.npy", npy("<f4", [0], b""))
    write("npy", "f32_nchw.npy", npy("<f4", [1, 2, 2, 2], struct.pack("<8f", *range(8))))
    write("npy", "v2_i32.npy", npy("<i4", [2, 1], struct.pack("<2i", -1, 1), major=2))
    write("npy", "v3_f64.npy", npy("<f8", [1], struct.pack("<d", 3.25), major=3))


# --- IDX: the fuzz target reads byte 0 as a mode (bit 0: gzip the rest, bit 1: labels,
# bits 2-7: number of classes - 1, over 4), then the file.
def idx(magic, dims, payload):
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload


def idx_corpus():
    images = idx(0x803, [2, 3, 2], bytes(range(12)))
    labels = idx(0x801, [4], bytes([0, 3, 8, 1]))
    labels_mode = 2 | (2 << 2)  # 9 classes
    write("idx", "images_plain", bytes([0]) + images)
    write("idx", "images_gzip", bytes([1]) + images)
    write("idx", "labels_plain", bytes([labels_mode]) + labels)
    write("idx", "labels_gzip", bytes([labels_mode | 1]) + labels)
    # A gzip file as a user would have it (the target passes it on unchanged): corrupt-stream paths.
    write("idx", "images_raw_gzip", bytes([0]) + gzip.compress(images, mtime=0))
    write("idx", "labels_raw_gzip", bytes([labels_mode]) + gzip.compress(labels, mtime=0))


# --- Checkpoints: safetensors (8-byte length, JSON header padded to 8 bytes, data) holding a
# few small tensors and the metadata load_checkpoint validates.
def safetensors(tensors, metadata):
    header, data = {"__metadata__": metadata}, b""
    for name, (dtype, shape, payload) in sorted(tensors.items()):
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def checkpoint_metadata(**changes):
    md = {"format": "trident-checkpoint-1", "model": "fmnist_cnn", "epoch": "1", "epochs": "3", "step": "4",
          "batch": "32", "dataset": "synthetic", "train_images": "128", "loss_scale": "1", "seed": "7",
          "backend": "cpu_ref", "lr": "0.05", "momentum": "0.9", "weight_decay": "0.0005", "nesterov": "0",
          "warmup_epochs": "0"}
    md.update(changes)
    return md


def checkpoint_corpus():
    tensors = {"conv1.weight": ("F32", [2, 3, 3, 1], struct.pack("<18f", *[0.25] * 18)),
               "bn1.running_var": ("F32", [2], struct.pack("<2f", 1, 1)),
               "fc.weight.momentum": ("F32", [1, 2], struct.pack("<2f", 0, 0))}
    write("checkpoint", "epoch1.ckpt", safetensors(tensors, checkpoint_metadata()))
    write("checkpoint", "fresh.ckpt", safetensors({}, checkpoint_metadata(epoch="0", step="0", nesterov="1")))
    write("checkpoint", "warmup.ckpt", safetensors(tensors, checkpoint_metadata(
        epoch="3", step="12", warmup_epochs="1.5", lr="0.1", momentum="0", weight_decay="0")))


ONNX_SEEDS = ["conv_bn_relu_op13.onnx", "ops_a_op13.onnx", "ops_b_op18.onnx", "vgg_head_op13.onnx",
              "vgg_head_reshape_op18.onnx", "flatten_then_relu.onnx", "bn_training_op15.onnx"]


def onnx_corpus(models_dir):
    for name in ONNX_SEEDS:
        (HERE / "corpus" / "onnx").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(models_dir) / name, HERE / "corpus" / "onnx" / name)


# --- images: the odd corners of JPEG and PNG an image folder may hold. Pillow writes them, so
# this part runs where it is installed (the project's .venv); 12x10 pixels of a gradient each.
def png_chunk(kind, body):
    import zlib
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def interlaced_png():
    """A 1x1 RGB PNG with Adam7 interlacing, which Pillow does not write: only pass 1 holds a row."""
    import zlib
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 1)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", zlib.compress(b"\x00\x10\x80\xf0"))
            + png_chunk(b"IEND", b""))


# --- plan caches (core/plan_cache_file.h): one for the fuzz target's machine line, one of
# another machine, one with a bad line; and a serialized plan.
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def plan_cache_corpus():
    head = "trident cpu plans 1\nmachine: onednn 3.0.0; isa 1; cpu fuzz\n"
    write("plan_cache", "two_choices.plans",
          (head + "sig=1x8x8x16|infer|candidates,|direct#0,|direct#1\t1\tdirect (jit), timed 0.120 ms\n"
           "sig=1x8x8x16|infer|candidates,|winograd#0,|direct#0\t0\twinograd (jit), timed 0.080 ms\n").encode())
    write("plan_cache", "empty.plans", head.encode())
    write("plan_cache", "foreign.plans", b"trident cpu plans 1\nmachine: onednn 9.9.9; isa 2; cpu other\nk\t0\tn\n")
    write("plan_cache", "bad_line.plans", (head + "key\t99\tnote\n").encode())
    # A serialized plan (core/plan_blob_file.h) for the fuzz target's machine and key.
    payload = b"1\tplan fuzz\n\x00\x01ubjson"
    write("plan_cache", "blob.plan",
          b"trident plan blob 1\nmachine: onednn 3.0.0; isa 1; cpu fuzz\nkey: conv|fuzz\n"
          + ("bytes: %d crc32c: %08x\n" % (len(payload), crc32c(payload))).encode() + payload)


def image_corpus():
    try:
        from PIL import Image
    except ImportError:
        print("make_corpus: no Pillow here; the image seeds are left as they are")
        return
    import io
    rgb = Image.new("RGB", (12, 10))
    rgb.putdata([(x * 20, y * 25, (x + y) * 10) for y in range(10) for x in range(12)])

    def save(name, image, **options):
        out = io.BytesIO()
        image.save(out, **options)
        write("image", name, out.getvalue())

    save("baseline_420.jpg", rgb, format="JPEG", quality=90)
    save("baseline_444.jpg", rgb, format="JPEG", quality=90, subsampling=0)
    save("baseline_422.jpg", rgb, format="JPEG", quality=75, subsampling=1)
    save("gray.jpg", rgb.convert("L"), format="JPEG")
    save("cmyk.jpg", rgb.convert("CMYK"), format="JPEG")
    save("progressive.jpg", rgb, format="JPEG", progressive=True)
    save("restart.jpg", rgb, format="JPEG", restart_marker_rows=1)
    save("optimized.jpg", rgb, format="JPEG", optimize=True, quality=50)
    save("rgb.png", rgb, format="PNG")
    save("rgba.png", rgb.convert("RGBA"), format="PNG")
    save("gray.png", rgb.convert("L"), format="PNG")
    save("gray_alpha.png", rgb.convert("LA"), format="PNG")
    save("palette.png", rgb.convert("P"), format="PNG")
    save("bilevel.png", rgb.convert("1"), format="PNG")
    save("deep.png", rgb.convert("I;16"), format="PNG")
    write("image", "interlaced.png", interlaced_png())


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--onnx-models", help="directory tests/onnx/make_models.py wrote (build/onnx_models)")
    args = ap.parse_args()
    npy_corpus()
    idx_corpus()
    checkpoint_corpus()
    image_corpus()
    plan_cache_corpus()
    if args.onnx_models:
        onnx_corpus(args.onnx_models)
