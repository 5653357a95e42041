#!/usr/bin/env python3
"""trident against PyTorch on one GPU, side by side in one run.

For each case (model, mode, batch) it times PyTorch eager, torch.compile and
torch.compile(mode="reduce-overhead") (CUDA graphs; "max-autotune" on request) in their strongest
ordinary configuration (channels_last, cudnn.benchmark, TF32 for fp32, AMP in trident's
precision with GradScaler for fp16, torch.optim.SGD(..., fused=True)) and `trident bench
--json`, with the same definition of an iteration: a training iteration is forward +
cross-entropy + backward + SGD step with momentum; an inference iteration is one forward pass in
eval mode. The headline figure (images_per_s) is N iterations back to back, as a training loop
runs them: CUDA events around the N steps, no host synchronisation in between (trident: its
throughput_images_per_s, timed the same way); the per-step median (each step synchronised) is
reported next to it. The table compares trident with the best PyTorch variant of each case.
Peak memory under CUDA graphs lives in the graphs' private pool, which max_memory_allocated does
not show, so the memory ratio is taken against plain torch.compile in the same precision (or the
best variant that reports its memory).

    python3 bench/vs_pytorch.py --trident build-gpu/trident --cases resnet50:train:256
"""
import argparse
import json
import statistics
import subprocess
import sys
import time


# torch.compile modes that record CUDA graphs (their memory is not in max_memory_allocated).
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")
KNOWN_MODES = ("eager", "compile", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def torch_model(name, layer):
    import torch
    import torchvision
    if name == "resnet50":
        return torchvision.models.resnet50(), (3, 224, 224), 1000
    if name == "vgg16_bn":
        return torchvision.models.vgg16_bn(), (3, 224, 224), 1000
    if name == "cbr-layer":
        h, w, c, k = layer
        m = torch.nn.Sequential(torch.nn.Conv2d(c, k, 3, 1, 1, bias=False), torch.nn.BatchNorm2d(k),
                                torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(k, 10))
        return m, (c, h, w), 10
    raise SystemExit(f"vs_pytorch: no PyTorch definition for model '{name}'")


def time_pytorch(name, mode, batch, variant, layer, iters, warmup, amp_dtype):
    import torch
    torch._dynamo.reset()  # each variant compiles afresh, within dynamo's recompilation limits
    torch.cuda.empty_cache()
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model, shape, classes = torch_model(name, layer)
    model = model.cuda().to(memory_format=torch.channels_last)
    amp = variant.endswith("amp")
    x = torch.randn(batch, *shape, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, classes, (batch,), device="cuda")
    if name == "cbr-layer" and amp:
        x = x.to(amp_dtype)  # the layer's input in the run's precision, as trident's
    if name == "cbr-layer" and mode == "train":
        x.requires_grad_(True)  # the layer benchmark includes the input gradient (dgrad)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, weight_decay=5e-4, fused=True)
    fn = model
    compile_mode = variant[:-len("-amp")] if amp else variant
    graphs = compile_mode in CUDA_GRAPH_MODES
    if compile_mode == "compile":
        fn = torch.compile(model)
    elif compile_mode != "eager":
        fn = torch.compile(model, mode=compile_mode)
    scaler = torch.amp.GradScaler("cuda", enabled=amp and amp_dtype == torch.float16)

    def train_step():
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()  # a new iteration: the graphs' outputs may be reused
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp_dtype, enabled=amp):
            loss = torch.nn.functional.cross_entropy(fn(x), y)
        scaler.scale(loss).backward()
        if name != "cbr-layer":  # the layer benchmark is forward+backward, as trident's
            scaler.step(opt)
            scaler.update()

    def infer_step():
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        with torch.no_grad(), torch.autocast("cuda", dtype=amp_dtype, enabled=amp):
            fn(x)

    if mode == "train":
        model.train()
        step = train_step
    else:
        model.eval()
        step = infer_step
    t0 = time.time()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    compile_s = time.time() - t0
    torch.cuda.reset_peak_memory_stats()
    ms = []
    for _ in range(iters):
        a = time.perf_counter()
        step()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - a) * 1e3)
    ms.sort()
    med = statistics.median(ms)
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(iters):
        step()
    end.record()
    end.synchronize()
    back_to_back_ms = begin.elapsed_time(end)
    return {"impl": "pytorch-" + variant, "model": name, "mode": mode, "batch": batch,
            "images_per_s": batch * iters / back_to_back_ms * 1e3, "ms_median": med,
            "ms_p90": ms[int(0.9 * (len(ms) - 1))], "images_per_s_per_step": batch / med * 1e3,
            "peak_device_bytes": None if graphs else torch.cuda.max_memory_allocated(), "warmup_s": compile_s,
            "torch": torch.__version__, "sgd": "fused", "amp": str(amp_dtype) if amp else None}


def time_trident(binary, name, mode, batch, precision, layer, iters, warmup, extra):
    cmd = [binary, "bench", "--device", "cuda", "--model", name, "--mode", mode, "--batch", str(batch),
           "--precision", precision, "--iterations", str(iters), "--warmup", str(warmup), "--json", "--verbose"]
    if name == "cbr-layer":
        cmd += ["--layer"] + [str(v) for v in layer]
    cmd += extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return {"impl": "trident", "model": name, "mode": mode, "batch": batch, "error": r.stderr.strip()}
    j = json.loads(r.stdout.strip().splitlines()[-1])
    j["impl"] = "trident" + ("-unfused" if extra else "")
    # Headline: back to back, as PyTorch's below; the per-step figure kept beside it.
    j["images_per_s_per_step"] = j["images_per_s"]
    j["images_per_s"] = j.get("throughput_images_per_s", j["images_per_s"])
    return j


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trident", default="build-gpu/trident")
    ap.add_argument("--cases", default="cbr-layer:train:256,cbr-layer:infer:256,resnet50:train:256,"
                    "vgg16_bn:train:128,resnet50:infer:256")
    ap.add_argument("--layer", default="56,56,64,64", help="cbr-layer H,W,C,K")
    ap.add_argument("--variants", default=None,
                    help="PyTorch variants, MODE or MODE-amp with MODE one of " + ", ".join(KNOWN_MODES) +
                    " (default: eager, compile and reduce-overhead, with AMP unless --precision fp32)")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--precision", default="fp32", help="trident's --precision")
    ap.add_argument("--unfused", action="store_true", help="also time trident with the fusion passes off")
    a = ap.parse_args()
    layer = [int(v) for v in a.layer.split(",")]
    if a.variants is None:
        a.variants = ",".join(m + ("" if a.precision == "fp32" else "-amp") for m in ("eager", "compile", "reduce-overhead"))
    for v in a.variants.split(","):
        if (v[:-len("-amp")] if v.endswith("-amp") else v) not in KNOWN_MODES:
            raise SystemExit(f"vs_pytorch: unknown variant '{v}' (modes: {', '.join(KNOWN_MODES)}, each with or without -amp)")
    import torch
    amp_dtype = torch.bfloat16 if a.precision == "bf16" else torch.float16
    rows = []
    for case in a.cases.split(","):
        name, mode, batch = case.split(":")
        batch = int(batch)
        results = [time_trident(a.trident, name, mode, batch, a.precision, layer, a.iterations, a.warmup, [])]
        if a.unfused:
            off = ["--disable-pass", "fuse_conv_bn_relu"] if mode == "train" else \
                  ["--disable-pass", "fold_bn", "--disable-pass", "fuse_conv_epilogue"]
            results.append(time_trident(a.trident, name, mode, batch, a.precision, layer, a.iterations, a.warmup,
                                        off + ["--disable-pass", "fuse_elementwise"]))
        for v in a.variants.split(","):
            try:
                results.append(time_pytorch(name, mode, batch, v, layer, a.iterations, a.warmup, amp_dtype))
            except Exception as e:  # a variant that fails is reported, the others still run
                results.append({"impl": "pytorch-" + v, "model": name, "mode": mode, "batch": batch,
                                "error": f"{type(e).__name__}: {e}"[:300]})
        for r in results:
            print(json.dumps(r), flush=True)
        rows.append((case, results))
    print(f"\n{'case':28} {'impl':22} {'img/s b2b':>10} {'ms/step':>9} {'peak MiB':>9} {'trident x':>10}")
    summary = []
    for case, results in rows:
        t = next((r for r in results if r["impl"] == "trident" and "ms_median" in r), None)
        torch_ok = [r for r in results if r["impl"].startswith("pytorch") and "error" not in r]
        for r in results:
            if "error" in r:
                print(f"{case:28} {r['impl']:22} error: {r['error'][:60]}")
                continue
            ratio = t["images_per_s"] / r["images_per_s"] if t else float("nan")
            peak = r.get("peak_device_bytes")
            peak = f"{peak / 2**20:9.0f}" if peak is not None else f"{'graphs':>9}"
            print(f"{case:28} {r['impl']:22} {r['images_per_s']:10.1f} {r['ms_median']:9.3f} "
                  f"{peak} {ratio:10.2f}")
        if t and torch_ok:
            best = max(torch_ok, key=lambda r: r["images_per_s"])
            # Memory against the best variant if it reports it, else plain compile in its precision.
            amp_suffix = "-amp" if best["impl"].endswith("-amp") else ""
            with_memory = [r for r in torch_ok if r.get("peak_device_bytes")]
            mem_ref = best if best.get("peak_device_bytes") else next(
                (r for r in with_memory if r["impl"] == "pytorch-compile" + amp_suffix),
                max(with_memory, key=lambda r: r["images_per_s"]) if with_memory else None)
            summary.append({"bench": "vs_best_pytorch", "case": case, "best": best["impl"],
                            "trident_images_per_s": t["images_per_s"], "best_images_per_s": best["images_per_s"],
                            "speedup": t["images_per_s"] / best["images_per_s"],
                            "memory_against": mem_ref["impl"] if mem_ref else None,
                            "memory_ratio": (t.get("peak_device_bytes", 0) / mem_ref["peak_device_bytes"]
                                             if mem_ref else None)})
    for s in summary:
        print(json.dumps(s), flush=True)


if __name__ == "__main__":
    sys.exit(main())
