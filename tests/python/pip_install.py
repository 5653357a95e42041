"""`pip install .` from the repository, offline: the package is built with scikit-build-core from
the setup step's .venv (no build isolation, no index), into a fresh target folder, and imported
from there alone: its module finds the libtrident.so beside it ($ORIGIN) and computes what the
build tree's module computes. The CMake build folder is kept, so a second run is incremental.

Usage: python pip_install.py SOURCE_DIR WORK_DIR BUILD_TREE_PYTHONPATH [CMAKE_DEFINE=VALUE ...]"""
import os
import shutil
import subprocess
import sys

source, work, build_tree = sys.argv[1:4]
site = os.path.join(work, "site")
shutil.rmtree(site, ignore_errors=True)

command = [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
           "--no-cache-dir", "--disable-pip-version-check", "--target", site,
           "--config-settings", "build-dir=" + os.path.join(work, "build")]
for define in sys.argv[4:]:
    command += ["--config-settings", "cmake.define." + define]
# With ccache (scripts/setup.sh builds through it) and the build tree's compilers (passed in as
# defines), every object compiled here is the build tree's, taken from the cache.
if shutil.which("ccache"):
    command += ["--config-settings", "cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache",
                "--config-settings", "cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=ccache"]
result = subprocess.run(command + [source], capture_output=True, text=True)
if result.returncode != 0:
    sys.exit(f"pip install failed ({result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")

installed = sorted(os.listdir(site))
if installed != ["trident", "trident-0.1.0.dist-info"]:
    sys.exit(f"the install should hold the trident package and its metadata only, not {installed}")

# Logits of one seeded network, and the libtrident.so the process mapped, from a given PYTHONPATH.
PROBE = """
import numpy as np, trident
net = trident.Network(trident.Model.zoo("fmnist_cnn"), device="cpu_ref", batch=2, seed=3)
x = np.sin(np.arange(2 * 28 * 28, dtype=np.float32)).reshape(net.input_shape)
libs = {l.split()[-1] for l in open("/proc/self/maps") if "libtrident.so" in l}
print(trident.__file__, sorted(libs), net.infer(x).tobytes().hex())
"""


def probe(pythonpath):
    env = dict(os.environ, PYTHONPATH=pythonpath)
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=work)
    if r.returncode != 0:
        sys.exit(f"importing trident from {pythonpath} failed:\n{r.stderr[-4000:]}")
    return r.stdout.split()


module_file, libs, logits = probe(site)
if not module_file.startswith(os.path.join(site, "trident")):
    sys.exit(f"trident was imported from {module_file}, not from the install in {site}")
if not libs.startswith("['" + os.path.join(site, "trident")):
    sys.exit(f"the installed module loaded {libs}, not the libtrident.so installed beside it")
if logits != probe(build_tree)[2]:
    sys.exit("the installed module's logits differ from the build tree's on the same seed and input")
print(f"pip install: trident in {site}, loading {libs}; logits equal the build tree's")
