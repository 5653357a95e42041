"""trident.Model.from_torch: a PyTorch module as a trident Model, exported so that its batch norms
and dropouts survive. PyTorch's default (dynamo) exporter folds BatchNorm into the convolutions
unless optimize=False, even for a model in training mode, and drops Dropout in eval mode; a file
exported so trains without batch norm and without any Conv→BN→ReLU to fuse. This exports with the
settings that keep both (the dynamo exporter with optimize=False, the module in training mode for
the trace; the TorchScript exporter in training mode where the dynamo exporter is unavailable or
fails), then checks the file: every BatchNorm2d of the module must be a BatchNormalization in it.
torch is imported here only, when from_torch is called.
"""
import atexit
import inspect
import os
import shutil
import tempfile
import warnings

_temporary_folders = []


def _remove_temporary_folders():
    for folder in _temporary_folders:
        shutil.rmtree(folder, ignore_errors=True)


atexit.register(_remove_temporary_folders)


def _example_tuple(example_input):
    import torch

    args = example_input if isinstance(example_input, tuple) else (example_input,)
    if len(args) != 1 or not isinstance(args[0], torch.Tensor):
        raise TypeError("from_torch: example_input must be one tensor (a batch of images, N x C x H x W)")
    return args


def _count_onnx_nodes(path, op_type):
    """How many nodes of `op_type` the file holds (None where the onnx package is missing)."""
    try:
        import onnx
    except ImportError:
        return None
    model = onnx.load(path, load_external_data=False)
    return sum(1 for node in model.graph.node if node.op_type == op_type)


def _export_dynamo(torch, module, args, path):
    torch.onnx.export(module, args, path, dynamo=True, optimize=False, verbose=False)


def _export_torchscript(torch, module, args, path):
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    # The trace runs the module in training mode, which updates its batch norms' running statistics
    # before they are written: the file gets the statistics the module had.
    statistics = {name: t.detach().clone() for name, t in module.state_dict().items()
                  if name.endswith(("running_mean", "running_var"))}
    torch.onnx.export(module, args, path, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      opset_version=17, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "N"}, "output": {0: "N"}}, **legacy)
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    for tensor in model.graph.initializer:
        if tensor.name in statistics:
            tensor.CopyFrom(numpy_helper.from_array(statistics[tensor.name].cpu().numpy(), tensor.name))
    onnx.save(model, path)


def export_torch(module, example_input, path=None):
    """Exports `module` to the ONNX file `path` (a temporary file, removed at exit, when None) with
    its batch norms and dropouts kept, checks that they were, and returns the path."""
    from . import Error

    try:
        import torch
    except ImportError as e:
        raise Error(f"from_torch needs PyTorch ({e})") from None
    if not isinstance(module, torch.nn.Module):
        raise TypeError("from_torch: module must be a torch.nn.Module")
    args = _example_tuple(example_input)
    if path is None:
        folder = tempfile.mkdtemp(prefix="trident-")
        _temporary_folders.append(folder)
        path = os.path.join(folder, "model.onnx")
    path = os.fspath(path)
    batchnorms = sum(1 for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm))
    was_training = module.training
    # The TorchScript exporter runs the module to trace it, which in training mode updates the
    # batch norms' running statistics: the module is given back as it came.
    saved = [t.detach().clone() for t in module.state_dict().values()]
    failures = []
    try:
        module.train()  # Dropout is traced only in training mode; nothing is updated by the trace
        exporters = [("torch.onnx.export(dynamo=True, optimize=False)", _export_dynamo)]
        exporters.append(("torch.onnx.export(dynamo=False, training=TRAINING)", _export_torchscript))
        for name, export in exporters:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    export(torch, module, args, path)
            except Exception as e:  # the exporter's own error: try the next, report all
                failures.append(f"{name}: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}")
                continue
            kept = _count_onnx_nodes(path, "BatchNormalization")
            if kept is not None and kept < batchnorms:
                failures.append(f"{name}: kept {kept} of the module's {batchnorms} batch norms")
                continue
            return path
    finally:
        module.train(was_training)
        with torch.no_grad():  # in place: state_dict()'s tensors are the module's own
            for t, s in zip(module.state_dict().values(), saved):
                t.copy_(s)
    raise Error("from_torch could not export the module with its batch norms kept (" + "; ".join(failures) + ")")
