"""trident from Python: compile a zoo model or an ONNX file for inference or training on a device,
run it on NumPy arrays (DLPack arrays on CUDA), train it, save and load its weights. Every failure
is a trident.Error (a RuntimeError) whose message is one sentence.

    import numpy as np, trident
    net = trident.Network(trident.Model.zoo("fmnist_cnn"), batch=8)
    logits = net.infer(np.zeros(net.input_shape, np.float32))  # NCHW in, [8, 10] out
"""
from ._trident import Error, Model, Network, __version__, set_cpu_threads

for _public in (Error, Model, Network):
    _public.__module__ = __name__  # trident.Error in tracebacks, not trident._trident.Error
del _public

__all__ = ["Error", "Model", "Network", "__version__", "set_cpu_threads"]
