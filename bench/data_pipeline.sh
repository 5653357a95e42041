#!/usr/bin/env bash
# Benchmark: the image-folder input pipeline, trident (trident_bench_data) beside Python with PIL
# (data_pipeline_pil.py) doing the same decode + RandomResizedCrop + flip + normalise on the same
# number of cores, on a folder of full-size JPEGs it makes first. JSON lines on stdout, one per
# implementation and worker count, then the ratio; with GPU=1, trident decoding on the GPU too
# (nvJPEG and the resampling kernel: `--decode gpu`), on the same files.
# Usage: bench/data_pipeline.sh [BUILD_DIR]   (default: build)
#   env: WORKERS ("1 2"), IMAGES (200), SIZE (224), EPOCHS (3), PYTHON (.venv/bin/python, which
#        scripts/setup.sh gives numpy and Pillow), DATA (the folder; made once, then reused), GPU (0)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${1:-$here/../build}"
workers="${WORKERS:-1 2}"
images="${IMAGES:-200}"
size="${SIZE:-224}"
epochs="${EPOCHS:-3}"
python="${PYTHON:-$here/../.venv/bin/python}"
data="${DATA:-${TMPDIR:-/tmp}/trident_bench_images_$images}"

if [[ ! -x "$build/trident_bench_data" ]]; then
  echo "data_pipeline.sh: no $build/trident_bench_data (build it: cmake --build $build --target trident_bench_data)" >&2
  exit 1
fi
if ! "$python" -c "import numpy, PIL" 2>/dev/null; then
  echo "data_pipeline.sh: $python lacks numpy or Pillow (scripts/setup.sh installs both into .venv)" >&2
  exit 2
fi

# 500x375 photographs' worth of JPEG (smooth shading, edges, some grain), 4 classes, quality 90.
if [[ ! -f "$data/complete" ]]; then
  echo "# making $images JPEGs of 500x375 in $data" >&2
  rm -rf "$data"
  "$python" - "$data" "$images" <<'PY'
import os, sys
import numpy as np
from PIL import Image, ImageDraw, ImageFilter
root, count = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
yy, xx = np.mgrid[0:375, 0:500].astype(np.float32)
for i in range(count):
    d = os.path.join(root, "train", f"class{i % 4}")
    os.makedirs(d, exist_ok=True)
    c0, c1 = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    t = (np.cos(rng.uniform(0, 6.3)) * xx / 500 + np.sin(rng.uniform(0, 6.3)) * yy / 375 + 1) / 2
    px = c0 * (1 - t[..., None]) + c1 * t[..., None]
    im = Image.fromarray(px.clip(0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(im)
    for _ in range(12):
        x0, y0 = rng.uniform(0, 500), rng.uniform(0, 375)
        box = [x0, y0, x0 + rng.uniform(20, 200), y0 + rng.uniform(20, 150)]
        fill = tuple(int(v) for v in rng.uniform(0, 255, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=fill)
    im = im.filter(ImageFilter.GaussianBlur(1.5))
    grain = rng.normal(0, 6, (375, 500, 3))
    im = Image.fromarray((np.asarray(im, np.float32) + grain).clip(0, 255).astype(np.uint8))
    im.save(os.path.join(d, f"img{i:04d}.jpg"), quality=90)
PY
  touch "$data/complete"
fi
echo "# $(du -sh "$data/train" | cut -f1) of JPEGs; on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

for w in $workers; do
  t=$("$build/trident_bench_data" --data "$data" --workers "$w" --image-size "$size" --epochs "$epochs")
  if [[ "${GPU:-0}" == 1 ]]; then
    "$build/trident_bench_data" --data "$data" --workers "$w" --image-size "$size" --epochs "$epochs" --decode gpu
  fi
  p=$("$python" "$here/data_pipeline_pil.py" --data "$data" --workers "$w" --image-size "$size" --epochs "$epochs")
  echo "$t"
  echo "$p"
  "$python" -c 'import json, sys
t, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps({"bench": "data_pipeline_ratio", "workers": t["workers"],
                  "trident_over_pil": t["images_per_second"] / p["images_per_second"]}))' "$t" "$p"
done
