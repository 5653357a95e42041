#!/usr/bin/env python3
"""End-to-end check of `trident export` against onnxruntime, and of PyTorch state dicts.

For zoo models (a trained checkpoint where the Fashion-MNIST files exist, random weights from a
seed otherwise) and for imported ONNX models: the exported ONNX file (batchnorm kept and folded)
run by onnxruntime must give `trident infer`'s outputs on the same NCHW input; the exported state
dict must hold exactly the ONNX file's initializers (OIHW, NCHW-ordered columns) plus one
num_batches_tracked per batchnorm; and `trident infer --weights STATE_DICT` must give the same
outputs as the weights it was exported from; `trident quantize`'s QDQ file runs in trident as
`--precision int8` does and in onnxruntime alike. Usage: check_export.py TRIDENT ONNX_MODELS WORK_DIR.
Exit 77 (CTest's skip) when there is nothing to check."""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

TRIDENT, MODELS, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def trident(*args):
    r = subprocess.run([TRIDENT, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"trident {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def read_safetensors(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    types = {"F32": np.float32, "I32": np.int32, "I64": np.int64, "F16": np.float16}
    out = {}
    for name, d in header.items():
        if name == "__metadata__":
            continue
        a, b = d["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=types[d["dtype"]]).reshape(d["shape"])
    return out, header.get("__metadata__", {})


def expect_close(label, got, ref, rel=1e-4):
    scale = max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(got - ref).max())
    ok = got.shape == ref.shape and err <= rel * scale
    print(f"{'ok  ' if ok else 'FAIL'} {label}: max |diff| {err:.3g} (scale {scale:.3g})")
    if not ok:
        failures.append(label)


def run_ort(path, x):
    # The graph as written (make_models.py says why: onnxruntime's PadFusion miscounts a Pad into an AveragePool).
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def check(label, model, weight_args, x):
    d = os.path.join(WORK, label)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "x.npy"), x)
    y_path = os.path.join(d, "y.npy")
    trident("infer", "--model", model, *weight_args, "--input", os.path.join(d, "x.npy"), "--output", y_path,
            "--iterations", "1", "--warmup", "0", "--topk", "0", "--device", "cpu_ref")
    y = np.load(y_path)
    kept, folded, state = (os.path.join(d, n) for n in ("kept.onnx", "folded.onnx", "state.safetensors"))
    trident("export", "--model", model, *weight_args, "--output", kept)
    trident("export", "--model", model, *weight_args, "--output", folded, "--fold-bn")
    trident("export", "--model", model, *weight_args, "--output", state)
    for path in (kept, folded):
        onnx.checker.check_model(onnx.load(path))
        expect_close(f"{label}: onnxruntime on {os.path.basename(path)} vs trident infer", run_ort(path, x), y)

    # The state dict holds the ONNX file's initializers, layouts included, and the counters.
    sd, meta = read_safetensors(state)
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(kept).graph.initializer}
    bns = [n for n in onnx.load(kept).graph.node if n.op_type == "BatchNormalization"]
    counters = [k for k in sd if k.endswith(".num_batches_tracked")]
    # Every tensor of the state dict is the initializer of its name (a per-channel factor of a
    # Mul is stored [C, 1, 1] under NAME.per_channel; a MatMul's weight is nn.Linear's [out, in]
    # transposed, as PyTorch exports a linear layer over pixels); the exporter's own constants (Clip's
    # bounds, a channel shuffle's shapes, a Pad's counts and value, a Slice's bounds, GELU's
    # coefficients) are the only other initializers.
    matmul_weights = {n.input[1] for n in onnx.load(kept).graph.node if n.op_type == "MatMul"}
    same = True
    for k, v in sd.items():
        if k in counters:
            continue
        init = inits.get(k, inits.get(k + ".per_channel"))
        if init is not None and k in matmul_weights:
            init = init.T
        same = same and init is not None and init.size == v.size and np.array_equal(init.reshape(v.shape), v)
    own = {k for k in inits if k not in sd and not (k.endswith(".per_channel") and k[:-12] in sd)}
    same = same and all(k.endswith((".min", ".max", ".split_shape", ".merge_shape", ".pads", ".value", ".starts",
                                    ".ends", ".axes", ".gelu.one", ".gelu.half", ".gelu.sqrt_half", ".gelu.cubic",
                                    ".gelu.sqrt_two_over_pi")) for k in own)
    ok = same and meta.get("format") == "pt" and len(counters) == len(bns) and all(sd[k].shape == () for k in counters)
    print(f"{'ok  ' if ok else 'FAIL'} {label}: state dict = ONNX initializers ({len(inits)}) + {len(counters)} counters")
    if not ok:
        failures.append(label + ": state dict")

    # Read back as a PyTorch state dict (detected by content), it gives the same outputs.
    y2_path = os.path.join(d, "y2.npy")
    trident("infer", "--model", model, "--weights", state, "--input", os.path.join(d, "x.npy"), "--output", y2_path,
            "--iterations", "1", "--warmup", "0", "--topk", "0", "--device", "cpu_ref")
    expect_close(f"{label}: trident infer --weights state dict vs the original weights", np.load(y2_path), y, 0.0)
    # And it loads into the ONNX export of the model: the two name and shape every tensor alike.
    y3_path = os.path.join(d, "y3.npy")
    trident("infer", "--model", kept, "--weights", state, "--input", os.path.join(d, "x.npy"), "--output", y3_path,
            "--iterations", "1", "--warmup", "0", "--topk", "0", "--device", "cpu_ref")
    expect_close(f"{label}: the export with --weights state dict vs the original", np.load(y3_path), y)


def check_quantize(model, rng):
    """`trident quantize`: the QDQ file, run by `trident infer`, gives what `trident infer
    --precision int8` gives with the same calibration, and onnxruntime running the file as
    written agrees with it, each within a quantization step (the export folds the batchnorms in
    double, the engine in float, and the calibration measures the unfolded network: scales and
    weights a rounding apart; on a model whose batchnorms come folded the first two are equal)."""
    work = os.path.join(WORK, "quantize")
    os.makedirs(work, exist_ok=True)
    calib, x_path = os.path.join(work, "calib.npy"), os.path.join(work, "x.npy")
    np.save(calib, rng.standard_normal((8, 3, 224, 224), np.float32))
    x = rng.standard_normal((2, 3, 224, 224), np.float32)
    np.save(x_path, x)
    qdq = os.path.join(work, "resnet18_qdq.onnx")
    report = json.loads(trident("quantize", model, "--calibration", calib, "--output", qdq, "--json"))
    if report["int8_convolutions"] != 19 or report["folded_batchnorms"] != 20:
        failures.append(f"quantize: {report}")
    ops = {n.op_type for n in onnx.load(qdq).graph.node}
    if not {"QuantizeLinear", "DequantizeLinear"} <= ops or "BatchNormalization" in ops:
        failures.append(f"quantize: the file's ops are {sorted(ops)}")
    outs = {}
    for label, args in (("file", [qdq]), ("calibrated", [model, "--precision", "int8", "--calibration", calib])):
        y = os.path.join(work, label + ".npy")
        trident("infer", *args, "--input", x_path, "--output", y, "--iterations", "1", "--warmup", "0")
        outs[label] = np.load(y)
    expect_close("quantize: trident on the QDQ file vs --precision int8", outs["file"], outs["calibrated"], rel=1e-2)
    expect_close("quantize: onnxruntime on the QDQ file vs trident", run_ort(qdq, x), outs["file"], rel=1e-2)


def main():
    rng = np.random.default_rng(7)
    os.makedirs(WORK, exist_ok=True)
    fmnist = os.environ.get("TRIDENT_FASHION_MNIST_DIR") or "/usr/share/datasets/fashion-mnist"
    if os.path.exists(os.path.join(fmnist, "train-images-idx3-ubyte.gz")):
        ckpt = os.path.join(WORK, "fmnist.ckpt")
        trident("train", "--epochs", "1", "--train-limit", "512", "--test-limit", "64", "--save", ckpt)
        check("fmnist_cnn_trained", "fmnist_cnn", ["--weights", ckpt], rng.standard_normal((3, 1, 28, 28), np.float32))
    else:
        check("fmnist_cnn_random", "fmnist_cnn", ["--seed", "5"], rng.standard_normal((3, 1, 28, 28), np.float32))
    check("resnet_cifar_random", "resnet_cifar", ["--seed", "3"], rng.standard_normal((2, 3, 32, 32), np.float32))
    manifest = os.path.join(MODELS, "manifest.json")
    if os.path.exists(manifest):
        for name, chw in (("conv_bn_relu_op13", (3, 10, 10)), ("ops_a_op18", (4, 16, 16)),
                          ("vgg_head_op13", (3, 8, 10)), ("exported_head_op18", (3, 6, 6)),
                          ("mobile_block_op18", (3, 12, 12)), ("efficient_block_op13", (3, 9, 9)),
                          ("shuffle_block_op18", (3, 6, 6)), ("pad_block_op13", (3, 8, 8)),
                          ("split_block_op18", (3, 6, 6)), ("convnext_block_op17", (3, 8, 8)),
                          ("resnet18_bn", (3, 224, 224))):
            path = os.path.join(MODELS, name + ".onnx")
            x = rng.standard_normal((2, *chw), np.float32)
            check("imported_" + name, path, [], x)
            # The export of an imported model computes what the original does.
            expect_close(f"imported_{name}: onnxruntime on the export vs on the original",
                         run_ort(os.path.join(WORK, "imported_" + name, "kept.onnx"), x), run_ort(path, x))
        check_quantize(os.path.join(MODELS, "resnet18_bn.onnx"), rng)
    if failures:
        print("failed: " + ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
