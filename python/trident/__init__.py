"""trident from Python: compile a zoo model or an ONNX file for inference or training on a device,
run it on NumPy arrays (DLPack arrays on CUDA), train it, save and load its weights. Every failure
is a trident.Error (a RuntimeError) whose message is one sentence.

    import numpy as np, trident
    net = trident.Network(trident.Model.zoo("fmnist_cnn"), batch=8)
    logits = net.infer(np.zeros(net.input_shape, np.float32))  # NCHW in, [8, 10] out

A PyTorch module comes in through trident.Model.from_torch(module, example_input), which exports it
with its batch norms and dropouts kept (trident/_torch_export.py).
"""
from ._trident import Error, Model, Network, __version__, set_cpu_threads
from ._torch_export import export_torch as _export_torch


def _from_torch(module, example_input, path=None):
    """A torch.nn.Module as a Model: exported to ONNX (at `path`, or a temporary file) with the
    settings that keep its BatchNorm and Dropout layers, checked, and read as Model.onnx reads a
    file. example_input is one batch of images (N x C x H x W); torch is imported only here."""
    return Model.onnx(_export_torch(module, example_input, path))


Model.from_torch = staticmethod(_from_torch)
del _from_torch

for _public in (Error, Model, Network):
    _public.__module__ = __name__  # trident.Error in tracebacks, not trident._trident.Error
del _public

__all__ = ["Error", "Model", "Network", "__version__", "set_cpu_threads"]
