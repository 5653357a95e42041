#!/usr/bin/env python3
# trident infer against onnxruntime on the CPU: the same ONNX file, the same input, the same
# thread count, run side by side (alternating, repeated) so machine load affects both alike.
# Prints one JSON line per measurement, then a table of medians and trident/onnxruntime ratios.
# trident runs as `trident infer --json`, or with --via module in this process through its Python
# module (build/python, or a `pip install .`), timed exactly as onnxruntime is. The CLI stays the
# default: the library runs a fixed thread count, while the CLI adapts it to a loaded machine.
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD_DIRS = ("build", "build-infer")


def find_trident():
    for d in BUILD_DIRS:
        p = os.path.join(ROOT, d, "trident")
        if os.path.exists(p):
            return p
    sys.exit("vs_onnxruntime: no trident binary found; pass --trident PATH")


def import_trident_module(threads):
    """The trident module, installed or in a build folder, or None. The engine takes its thread
    count from OpenMP as it loads, so OMP_NUM_THREADS is set first."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    sys.path += [os.path.join(ROOT, d, "python") for d in BUILD_DIRS]
    try:
        import trident
    except ImportError:
        return None
    return trident


def with_batch(model_path, batch, tmpdir):
    """The model file itself when its input takes `batch`, else a copy with a symbolic batch."""
    m = onnx.load(model_path)
    initializers = {i.name for i in m.graph.initializer}
    inp = [i for i in m.graph.input if i.name not in initializers][0]
    dim = inp.type.tensor_type.shape.dim[0]
    if dim.HasField("dim_param") or dim.dim_value == batch:
        return model_path, inp.name
    for v in list(m.graph.input) + list(m.graph.output):
        if v.name not in initializers:
            v.type.tensor_type.shape.dim[0].dim_param = "batch"
    path = os.path.join(tmpdir, "model_dynamic_batch.onnx")
    onnx.save(m, path)
    return path, inp.name


def stats(seconds, batch):
    ms = sorted(s * 1e3 for s in seconds)
    mean = sum(ms) / len(ms)
    return {"mean_ms": mean, "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
            "throughput": batch * 1e3 / mean}


def timed(run, batch, warmup, iterations):
    """Statistics of `iterations` calls of run() after `warmup` untimed ones, and its last result."""
    for _ in range(warmup):
        y = run()
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        y = run()
        times.append(time.perf_counter() - t0)
    return stats(times, batch), y


def run_ort(path, input_name, x, threads, warmup, iterations):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    s, y = timed(lambda: sess.run(None, {input_name: x}), x.shape[0], warmup, iterations)
    return s, y[0]


def run_trident_module(trident, path, x, warmup, iterations):
    try:
        net = trident.Network(trident.Model.onnx(path), batch=x.shape[0])
        return timed(lambda: net.infer(x), x.shape[0], warmup, iterations)
    except trident.Error as e:
        sys.exit(f"vs_onnxruntime: trident failed: {e}")


def run_trident(binary, path, x_path, out_path, batch, threads, warmup, iterations):
    cmd = [binary, "infer", path, "--batch", str(batch), "--threads", str(threads), "--json",
           "--warmup", str(warmup), "--iterations", str(iterations), "--input", x_path, "--output", out_path]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("vs_onnxruntime: trident failed: " + r.stderr.strip())
    j = json.loads(r.stdout)
    lat = j["latency_ms"]
    return {"mean_ms": lat["mean"], "p50_ms": lat["p50"], "p99_ms": lat["p99"],
            "throughput": j["throughput_images_per_s"]}, np.load(out_path)


def main():
    ap = argparse.ArgumentParser(description="trident infer against onnxruntime on the CPU, side by side")
    ap.add_argument("--model", required=True, help="ONNX file (e.g. ResNet-50 from tests/onnx/make_models.py)")
    ap.add_argument("--trident", default=None, help="trident binary (default: build/trident)")
    ap.add_argument("--via", choices=("cli", "module", "auto"), default="cli",
                    help="run trident through its CLI, its Python module, or auto: the module where it imports "
                         "and no --trident is given, else the CLI")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=0, help="timed iterations (default: about 64 images per run)")
    ap.add_argument("--image", type=int, default=224)
    a = ap.parse_args()
    module = import_trident_module(a.threads) if a.via == "module" or (a.via == "auto" and not a.trident) else None
    if a.via == "module" and module is None:
        sys.exit("vs_onnxruntime: the trident module does not import; build it (TRIDENT_BUILD_PYTHON) or pip install .")
    binary = None if module else a.trident or find_trident()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for batch in [int(b) for b in a.batches.split(",")]:
            path, input_name = with_batch(a.model, batch, tmp)
            x = np.random.default_rng(0).standard_normal((batch, 3, a.image, a.image)).astype(np.float32)
            x_path = os.path.join(tmp, "x.npy")
            np.save(x_path, x)
            iterations = a.iterations or max(4, 64 // batch)
            for rep in range(a.repeats):
                for engine in ("trident", "onnxruntime"):
                    if engine == "trident" and module:
                        s, y = run_trident_module(module, path, x, a.warmup, iterations)
                    elif engine == "trident":
                        s, y = run_trident(binary, path, x_path, os.path.join(tmp, "y.npy"), batch, a.threads,
                                           a.warmup, iterations)
                    else:
                        s, y = run_ort(path, input_name, x, a.threads, a.warmup, iterations)
                    results.setdefault((batch, engine), []).append((s, y))
                    via = ("module" if module else "cli") if engine == "trident" else "python"
                    print(json.dumps({"engine": engine, "via": via, "batch": batch, "repeat": rep, "threads": a.threads,
                                      "iterations": iterations, **{k: round(v, 3) for k, v in s.items()}}), flush=True)
    print("\nbatch  trident img/s  onnxruntime img/s  ratio  trident p50 ms  ort p50 ms  max|diff|  rel. to max|y|")
    for batch in sorted({b for b, _ in results}):
        t = [s for s, _ in results[(batch, "trident")]]
        o = [s for s, _ in results[(batch, "onnxruntime")]]
        tt = statistics.median(s["throughput"] for s in t)
        ot = statistics.median(s["throughput"] for s in o)
        y_ort = results[(batch, "onnxruntime")][0][1]
        diff = float(np.max(np.abs(results[(batch, "trident")][0][1] - y_ort)))
        rel = diff / max(float(np.max(np.abs(y_ort))), 1e-30)
        print(f"{batch:5d}  {tt:13.2f}  {ot:17.2f}  {tt / ot:5.2f}  {statistics.median(s['p50_ms'] for s in t):14.2f}"
              f"  {statistics.median(s['p50_ms'] for s in o):10.2f}  {diff:9.2e}  {rel:14.2e}")


if __name__ == "__main__":
    main()
