#!/usr/bin/env python3
"""Writes the ONNX test models of trident's importer into a folder: small nets covering every
supported op (opsets 13 and 18), torchvision-shaped ResNet-18/50 (BN folded and kept), ResNet-18
as onnxruntime's quantizer writes it (QDQ), their
onnxruntime reference outputs (raw little-endian float32) and deliberately corrupt files."""
import hashlib
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


class Net:
    """A graph under construction: nodes, initializers and fresh tensor names."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def tmp(self, hint):
        self.count += 1
        return f"/{hint}_{self.count}"

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(self, op, inputs, hint=None, n_out=1, **attrs):
        outs = [self.tmp(hint or op) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=outs[0] + "_node", **attrs))
        return outs[0] if n_out == 1 else outs

    def weight(self, shape, fan_in):
        return (self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    def conv(self, x, name, cin, cout, k, stride=1, pad=0, bias=False, group=1):
        w = self.init(name + ".weight", self.weight((cout, cin // group, k, k), cin // group * k * k))
        ins = [x, w]
        if bias:
            ins.append(self.init(name + ".bias", (self.rng.standard_normal(cout) * 0.1).astype(np.float32)))
        return self.node("Conv", ins, name, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4, group=group, dilations=[1, 1])

    def bn_params(self, name, c):
        r = self.rng
        return {"weight": r.uniform(0.5, 1.5, c), "bias": r.standard_normal(c) * 0.1,
                "running_mean": r.standard_normal(c) * 0.1, "running_var": r.uniform(0.5, 1.5, c)}

    def bn(self, x, name, c, training=False):
        p = self.bn_params(name, c)
        ins = [x] + [self.init(f"{name}.{k}", v.astype(np.float32)) for k, v in p.items()]
        attrs = {"epsilon": 1e-5, "momentum": 0.9}
        if training:
            attrs["training_mode"] = 1
        return self.node("BatchNormalization", ins, name, **attrs)

    def model(self, inp, out, opset, in_shape, out_rank):
        x = helper.make_tensor_value_info(inp, TensorProto.FLOAT, in_shape)
        y = helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N"] + [None] * (out_rank - 1))
        g = helper.make_graph(self.nodes, "g", [x], [y], initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="trident-tests")
        m.ir_version = 8
        return m


def conv_bn_relu(opset):
    n = Net(1)
    y = n.conv("input", "conv", 3, 8, 3, pad=1)
    y = n.bn(y, "bn", 8)
    y = n.node("Relu", [y])
    y = n.conv(y, "conv2", 8, 4, 3, stride=2, pad=1, bias=True)
    return n.model("input", y, opset, ["N", 3, 10, 10], 4)


def ops_a(opset):
    """Conv(group, bias), BN, Clip(0,6), MaxPool, Mul(per channel), Concat, AveragePool,
    Add, Identity, Dropout, GlobalAveragePool, Flatten, Gemm(transB=1), MatMul + Add."""
    n = Net(2)
    y = n.conv("input", "c1", 4, 8, 3, stride=2, pad=1, bias=True, group=2)
    y = n.bn(y, "bn1", 8)
    lo, hi = n.init("clip_min", np.float32(0)), n.init("clip_max", np.float32(6))
    y = n.node("Clip", [y, lo, hi])
    y = n.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    s = n.init("scale", n.rng.uniform(0.5, 2, (1, 8, 1, 1)).astype(np.float32))
    a = n.node("Mul", [y, s])
    b = n.node("Relu", [n.conv(a, "c2", 8, 8, 1)])
    y = n.node("Concat", [a, b], axis=1)
    y = n.node("AveragePool", [y], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    z = n.node("Relu", [n.conv(y, "c3", 16, 16, 3, pad=1)])
    y = n.node("Add", [y, z])
    y = n.node("Identity", [y])
    y = n.node("Dropout", [y])
    y = n.node("GlobalAveragePool", [y])
    y = n.node("Flatten", [y], axis=1)
    w = n.init("fc1.weight", n.weight((12, 16), 16))
    y = n.node("Gemm", [y, w, n.init("fc1.bias", np.full(12, 0.1, np.float32))], transB=1)
    y = n.node("Relu", [y])
    y = n.node("MatMul", [y, n.init("fc2.weight_t", n.weight((12, 5), 12))])
    y = n.node("Add", [y, n.init("fc2.bias", np.linspace(-1, 1, 5).astype(np.float32))])
    return n.model("input", y, opset, ["N", 4, 16, 16], 2)


def ops_b(opset):
    """Clip(min only), AveragePool(count_include_pad), Mul of two tensors, Reshape with a
    Constant shape, Gemm(transB=0), a 4-D Concat of three and an NCHW output."""
    n = Net(3)
    x = n.conv("input", "c1", 3, 6, 3, pad=1)
    y = n.node("Clip", [x, n.init("lo", np.float32(0))])
    p = n.node("AveragePool", [y], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1],
               count_include_pad=1)
    q = n.node("Mul", [p, p])
    c = n.node("Concat", [p, q, p], axis=-3)
    clip6 = n.node("Clip", [c, n.init("z", np.float32(-1)), n.init("six", np.float32(6))])
    g = n.node("GlobalAveragePool", [clip6])
    shape = n.node("Constant", [], value=numpy_helper.from_array(np.array([0, -1], np.int64), "s"))
    r = n.node("Reshape", [g, shape])
    y = n.node("Gemm", [r, n.init("fc.w_kn", n.weight((18, 7), 18)), n.init("fc.b", np.ones(7, np.float32))])
    return n.model("input", y, opset, ["N", 3, 9, 9], 2)


def mobile_block(opset):
    """MobileNetV3's ops: HardSwish (x·HardSigmoid(x) before opset 14), a depthwise convolution, squeeze-excitation (GlobalAveragePool
    → 1×1 Conv → Relu → 1×1 Conv → HardSigmoid(alpha 1/6, as PyTorch exports it) → Mul with the
    [N,C,1,1] gate on the left), ReLU6 as Clip, and a residual Add."""
    n = Net(4)
    x = n.bn(n.conv("input", "stem", 3, 8, 3, stride=2, pad=1), "stem_bn", 8)
    # HardSwish exists from opset 14; before it an exporter writes x·HardSigmoid(x).
    x = n.node("HardSwish", [x]) if opset >= 14 else n.node("Mul", [x, n.node("HardSigmoid", [x], alpha=1.0 / 6)])
    y = n.bn(n.conv(x, "dw", 8, 8, 3, pad=1, group=8), "dw_bn", 8)
    y = n.node("Clip", [y, n.init("lo", np.float32(0)), n.init("hi", np.float32(6))])
    s = n.node("GlobalAveragePool", [y])
    s = n.node("Relu", [n.conv(s, "se.fc1", 8, 4, 1, bias=True)])
    s = n.node("HardSigmoid", [n.conv(s, "se.fc2", 4, 8, 1, bias=True)], alpha=1.0 / 6, beta=0.5)
    y = n.node("Mul", [s, y])
    y = n.bn(n.conv(y, "project", 8, 8, 1), "project_bn", 8)
    y = n.node("Add", [x, y])
    y = n.node("Flatten", [n.node("GlobalAveragePool", [y])], axis=1)
    y = n.node("Gemm", [y, n.init("fc.weight", n.weight((5, 8), 8)), n.init("fc.bias", np.zeros(5, np.float32))],
               transB=1)
    return n.model("input", y, opset, ["N", 3, 12, 12], 2)


def efficient_block(opset):
    """EfficientNet's ops: SiLU as Mul(x, Sigmoid(x)), squeeze-excitation with a Sigmoid gate
    (Mul with the gate on the right), HardSigmoid with ONNX's default alpha 0.2."""
    n = Net(5)
    x = n.bn(n.conv("input", "stem", 3, 8, 3, pad=1), "stem_bn", 8)
    x = n.node("Mul", [x, n.node("Sigmoid", [x])])
    s = n.node("GlobalAveragePool", [x])
    s = n.node("Mul", [s, n.node("Sigmoid", [s])])
    s = n.node("Sigmoid", [n.conv(n.conv(s, "se.fc1", 8, 2, 1, bias=True), "se.fc2", 2, 8, 1, bias=True)])
    y = n.node("Mul", [x, s])
    y = n.node("HardSigmoid", [n.bn(n.conv(y, "project", 8, 6, 1), "project_bn", 6)])
    y = n.node("Flatten", [n.node("GlobalAveragePool", [y])], axis=1)
    y = n.node("Gemm", [y, n.init("fc.weight", n.weight((4, 6), 6)), n.init("fc.bias", np.zeros(4, np.float32))],
               transB=1)
    return n.model("input", y, opset, ["N", 3, 9, 9], 2)


def shuffle_block(opset):
    """ShuffleNet's channel shuffle as PyTorch exports x.view(N, g, C/g, H, W).transpose(1, 2)
    .reshape(N, -1, H, W): Reshape with a constant 5-D shape, Transpose(0,2,1,3,4), Reshape,
    between a grouped and a pointwise convolution (the batch as -1 and as 0, once each)."""
    n = Net(6)
    x = n.node("Relu", [n.bn(n.conv("input", "c1", 3, 12, 3, pad=1), "bn1", 12)])
    x = n.conv(x, "gconv", 12, 12, 1, group=3)
    v = n.node("Reshape", [x, n.init("split_shape", np.array([-1, 3, 4, 6, 6], np.int64))])
    t = n.node("Transpose", [v], perm=[0, 2, 1, 3, 4])
    y = n.node("Reshape", [t, n.init("merge_shape", np.array([0, -1, 6, 6], np.int64))])
    y = n.node("Relu", [n.bn(n.conv(y, "pw", 12, 8, 1), "bn2", 8)])
    y = n.node("Flatten", [n.node("GlobalAveragePool", [y])], axis=1)
    y = n.node("Gemm", [y, n.init("fc.weight", n.weight((5, 8), 8)), n.init("fc.bias", np.zeros(5, np.float32))],
               transB=1)
    return n.model("input", y, opset, ["N", 3, 6, 6], 2)


def dynamic_shapes(opset):
    """What PyTorch writes when the batch stays dynamic: the shape arithmetic of a channel shuffle
    (x.view(x.size(0), 3, x.size(1) // 3, *x.shape[2:]): Shape, Gather, Cast, Div, Unsqueeze,
    Slice, Concat) and of a flatten (x.view(x.size(0), -1) into Gemm), folded by trident at
    import for the batch it compiles."""
    n = Net(8)
    x = n.node("Relu", [n.bn(n.conv("input", "c1", 3, 12, 3, pad=1), "bn1", 12)])
    x = n.conv(x, "gconv", 12, 12, 1, group=3)
    s = n.node("Shape", [x])
    batch = n.node("Unsqueeze", [n.node("Gather", [s, n.init("i0", np.array(0, np.int64))], axis=0),
                                 n.init("ax0", np.array([0], np.int64))])
    per_group = n.node("Div", [n.node("Cast", [n.node("Gather", [s, n.init("i1", np.array(1, np.int64))])], to=7),
                               n.init("three", np.array(3, np.int64))])
    per_group = n.node("Unsqueeze", [per_group, n.init("ax0b", np.array([0], np.int64))])
    hw = n.node("Slice", [s, n.init("from2", np.array([2], np.int64)), n.init("to_end", np.array([2**63 - 1], np.int64)),
                          n.init("axis0", np.array([0], np.int64)), n.init("step1", np.array([1], np.int64))])
    view = n.node("Concat", [batch, n.init("groups", np.array([3], np.int64)), per_group, hw], axis=0)
    t = n.node("Transpose", [n.node("Reshape", [x, view])], perm=[0, 2, 1, 3, 4])
    y = n.node("Reshape", [t, n.node("Concat", [batch, n.init("minus1", np.array([-1], np.int64)), hw], axis=0)])
    y = n.node("Relu", [n.bn(n.conv(y, "pw", 12, 8, 1), "bn2", 8)])
    y = n.node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])  # [N, 8, 3, 3]
    ys = n.node("Shape", [y])
    flat = n.node("Concat", [n.node("Unsqueeze", [n.node("Gather", [ys, n.init("j0", np.array(0, np.int64))]),
                                                  n.init("ax0c", np.array([0], np.int64))]),
                             n.init("rest", np.array([-1], np.int64))], axis=0)
    y = n.node("Reshape", [y, flat])
    y = n.node("Gemm", [y, n.init("fc.weight", n.weight((5, 72), 72)), n.init("fc.bias", np.zeros(5, np.float32))],
               transB=1)
    return n.model("input", y, opset, ["N", 3, 6, 6], 2)


def pad_block(opset):
    """DenseNet's Pad and its kin: zero Pads that the next Conv, AveragePool (count_include_pad
    turned on) and MaxPool (of a Relu's output) take as their own padding, DenseNet's all-zero
    Pad before a transition's AveragePool (an identity), and Pads that stay pad2d nodes: a
    non-zero constant_value with uneven counts (the axes input from opset 18 on), zeros before a
    MaxPool of something that may be negative, and negative pads (a crop)."""
    n = Net(10)

    def pads(name, begin_hw, end_hw):
        if opset >= 18:  # only H and W, through the axes input
            return [n.init(name, np.array(begin_hw + end_hw, np.int64)), "", n.init(name + ".axes", np.array([-2, -1], np.int64))]
        return [n.init(name, np.array([0, 0] + begin_hw + [0, 0] + end_hw, np.int64))]

    a = n.node("Relu", [n.bn(n.conv("input", "c1", 3, 6, 3, pad=1), "bn1", 6)])
    p = n.node("Pad", [a] + pads("pad1", [1, 1], [1, 1]), mode="constant")
    b = n.conv(p, "c2", 6, 6, 3)  # [N, 6, 8, 8]
    zeros = n.node("Constant", [], value=numpy_helper.from_array(np.zeros(8, np.int64), "z"))
    c = n.node("AveragePool", [n.node("Pad", [b, zeros])], kernel_shape=[2, 2], strides=[2, 2])  # [N, 6, 4, 4]
    d = n.node("AveragePool", [n.node("Pad", [c] + pads("pad3", [1, 1], [1, 1]))], kernel_shape=[3, 3], strides=[1, 1])
    e = n.node("MaxPool", [n.node("Pad", [n.node("Relu", [d])] + pads("pad4", [1, 1], [1, 1]))], kernel_shape=[3, 3],
               strides=[1, 1])
    value = n.init("pad5.value", np.float32(-0.75))
    f5 = pads("pad5", [1, 0], [0, 2])
    f = n.node("Pad", [e, f5[0], value] + f5[2:])  # [N, 6, 5, 6]
    f = n.node("MaxPool", [f], kernel_shape=[2, 2], strides=[1, 1])  # [N, 6, 4, 5]
    g = n.node("MaxPool", [n.node("Pad", [f] + pads("pad6", [1, 1], [1, 1]))], kernel_shape=[3, 3], strides=[1, 1])
    h = n.node("Pad", [g] + pads("crop", [0, -1], [-1, 0]))  # [N, 6, 3, 4]
    y = n.node("Flatten", [n.node("GlobalAveragePool", [h])], axis=1)
    y = n.node("Gemm", [y, n.init("fc.weight", n.weight((5, 6), 6)), n.init("fc.bias", np.zeros(5, np.float32))],
               transB=1)
    return n.model("input", y, opset, ["N", 3, 8, 8], 2)


def split_block(opset):
    """ShuffleNet v2's x.chunk(2, dim=1) as PyTorch exports it with a dynamic batch: two Slices on
    channels whose bounds are Shape, Gather, Add, Div and Mul arithmetic; a Split (sizes an input
    at 13, num_outputs at 18, its last chunk the smaller one); a Slice with a negative start, an
    INT64_MAX end and a whole-axis slice of H beside it; and a Slice of a Gemm's [N, features]."""
    n = Net(11)
    a = n.node("Relu", [n.bn(n.conv("input", "c1", 3, 8, 3, pad=1), "bn1", 8)])
    s = n.node("Shape", [a])
    axis = n.init("axis1", np.array([1], np.int64))
    half = n.node("Div", [n.node("Add", [n.node("Gather", [s, n.init("i1", np.array(1, np.int64))], axis=0),
                                         n.init("one", np.array([1], np.int64))]), n.init("two", np.array([2], np.int64))])
    x1 = n.node("Slice", [a, n.init("zero", np.array([0], np.int64)), n.node("Mul", [half, n.init("m1", np.array([1], np.int64))]), axis])
    x2 = n.node("Slice", [a, n.node("Mul", [half, n.init("m1b", np.array([1], np.int64))]),
                          n.node("Mul", [half, n.init("m2", np.array([2], np.int64))]), axis])
    br = n.node("Relu", [n.bn(n.conv(x2, "branch", 4, 4, 1), "branch_bn", 4)])
    y = n.node("Concat", [x1, br], axis=1)  # [N, 8, 6, 6]
    if opset >= 18:
        parts = n.node("Split", [y], n_out=3, axis=1, num_outputs=3)  # 3, 3, 2 channels
    else:
        parts = n.node("Split", [y, n.init("sizes", np.array([3, 5], np.int64))], n_out=2, axis=-3)
    z = n.node("Concat", [parts[-1], parts[0]] + parts[1:-1], axis=1)
    z = n.node("Slice", [z, n.init("starts", np.array([-5, 0], np.int64)),
                         n.init("ends", np.array([2**63 - 1, 99], np.int64)), n.init("axes", np.array([1, 2], np.int64)),
                         n.init("steps", np.array([1, 1], np.int64))])  # channels 3..7, all rows
    z = n.node("Relu", [n.conv(z, "c2", 5, 6, 3, pad=1, bias=True)])
    z = n.node("Flatten", [n.node("GlobalAveragePool", [z])], axis=1)
    z = n.node("Gemm", [z, n.init("fc.weight", n.weight((9, 6), 6)), n.init("fc.bias", np.zeros(9, np.float32))],
               transB=1)
    z = n.node("Slice", [z, n.init("f_from", np.array([2], np.int64)), n.init("f_to", np.array([7], np.int64)),
                         n.init("f_axis", np.array([-1], np.int64))])
    return n.model("input", z, opset, ["N", 3, 6, 6], 2)


def pad_slice_misuse(kind):
    """What trident refuses of Pad, Slice and Split, each with a sentence: a reflect Pad, a Pad
    of the channel axis, a Slice of height, a Slice of channels with step 2 and a Split of width."""
    n = Net(12)
    x = n.conv("input", "c1", 3, 4, 3, pad=1)
    if kind == "pad_reflect":
        y = n.node("Pad", [x, n.init("p", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))], mode="reflect")
    elif kind == "pad_channels":
        y = n.node("Pad", [x, n.init("p", np.array([0, 1, 0, 0, 0, 1, 0, 0], np.int64))])
    elif kind == "slice_height":
        y = n.node("Slice", [x, n.init("a", np.array([1], np.int64)), n.init("b", np.array([3], np.int64)),
                             n.init("ax", np.array([2], np.int64))])
    elif kind == "slice_step":
        y = n.node("Slice", [x, n.init("a", np.array([0], np.int64)), n.init("b", np.array([4], np.int64)),
                             n.init("ax", np.array([1], np.int64)), n.init("st", np.array([2], np.int64))])
    else:
        y = n.node("Split", [x, n.init("sizes", np.array([2, 2], np.int64))], n_out=2, axis=3)[0]
    return n.model("input", y, 13, ["N", 3, 4, 4], 4)


def vgg_head(opset, reshape):
    """A VGG-style classifier: the [N,C,H,W] features flattened with H*W > 1 (Flatten then
    Gemm(transB=1), or Reshape [0,-1] then MatMul + Add), so trident must reorder the weight
    columns from ONNX's (c, h, w) feature order to its NHWC (h, w, c) order."""
    n = Net(4)
    y = n.node("Relu", [n.conv("input", "c1", 3, 6, 3, pad=1, bias=True)])
    y = n.node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])  # [N, 6, 4, 5]
    if reshape:
        shape = n.node("Constant", [], value=numpy_helper.from_array(np.array([0, -1], np.int64), "s"))
        y = n.node("Reshape", [y, shape])
        y = n.node("MatMul", [y, n.init("fc.w_kn", n.weight((120, 7), 120))])
        y = n.node("Add", [y, n.init("fc.b", np.linspace(-1, 1, 7).astype(np.float32))])
    else:
        y = n.node("Flatten", [y], axis=1)
        y = n.node("Gemm", [y, n.init("fc.w", n.weight((7, 120), 120)), n.init("fc.b", np.ones(7, np.float32))],
                   transB=1)
    return n.model("input", y, opset, ["N", 3, 8, 10], 2)


def exported_head(opset):
    """What PyTorch's default (dynamo) exporter writes for a torchvision-style head: MaxPool with
    ceil_mode=1, adaptive average pooling to 1x1 as ReduceMean over H, W (axes an attribute before
    opset 18, an input from 18 on) with keepdims=0 straight into Gemm; saved with its weights in an
    external data file."""
    n = Net(6)
    y = n.node("Relu", [n.bn(n.conv("input", "c1", 3, 8, 3, pad=1), "bn1", 8)])
    y = n.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)  # 6x6 -> 3x3 (floor: 2x2)
    if opset >= 18:
        y = n.node("ReduceMean", [y, n.init("axes", np.array([-2, -1], np.int64))], keepdims=0)
    else:
        y = n.node("ReduceMean", [y], axes=[2, 3], keepdims=0)
    y = n.node("Gemm", [y, n.init("fc.w", n.weight((5, 8), 8)), n.init("fc.b", np.ones(5, np.float32))], transB=1)
    return n.model("input", y, opset, ["N", 3, 6, 6], 2)


def dynamo_unoptimized(training_mode):
    """What torch.onnx.export(dynamo=True, optimize=False) writes (PyTorch 2.15, opset 20): a bias-free
    convolution's zero bias as Expand(CastLike(0, x), Expand(Shape(w)[0:1], [1])), BatchNormalization
    kept, ReduceMean's axes a Reshape of a constant, Dropout with constant ratio and training_mode
    inputs (true in a training-mode trace), and the fixed batch of the trace in the head's Reshape."""
    n = Net(8)
    w = n.init("conv.weight", n.weight((6, 3, 3, 3), 27))
    channels = n.node("Shape", [w], start=0, end=1)
    dims = n.node("Expand", [channels, n.node("Constant", [], value_ints=[1])])
    zero = n.node("CastLike", [n.node("Constant", [], value=numpy_helper.from_array(np.array(0, np.float32))), "input"])
    bias = n.node("Expand", [zero, dims])
    y = n.node("Conv", ["input", w, bias], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1],
               group=1)
    y = n.node("Relu", [n.bn(y, "bn", 6)])
    axes = n.node("Reshape", [n.node("Constant", [], value=numpy_helper.from_array(np.array([-1, -2], np.int64))),
                              n.node("Constant", [], value_ints=[-1])])
    y = n.node("ReduceMean", [y, axes], keepdims=1, noop_with_empty_axes=0)
    y = n.node("Reshape", [y, n.init("head_shape", np.array([2, 6], np.int64))])  # the trace's batch of 2
    ratio = n.node("Constant", [], value=numpy_helper.from_array(np.array(0.3, np.float32)))
    mode = n.node("Constant", [], value=numpy_helper.from_array(np.array(training_mode, np.bool_)))
    y = n.node("Dropout", [y, ratio, mode])
    y = n.node("Gemm", [y, n.init("fc.weight", n.weight((4, 6), 6)), n.init("fc.bias", np.zeros(4, np.float32))],
               transB=1)
    return n.model("input", y, 20, [2, 3, 5, 5], 2)


def random_dropout(cast_like):
    """An in-place dropout as the dynamo exporter writes it (MobileNet v3's head, p = 0.2):
    RandomUniformLike → Less(·, 0.8) → Cast → Div(·, 0.8) → Mul(x, ·); with optimize=False the
    keep probability comes through CastLike to the draw's type and the Cast is a CastLike."""
    n = Net(9)
    y = n.node("Gemm", ["input", n.init("fc1.weight", n.weight((8, 6), 6)), n.init("fc1.bias", np.zeros(8, np.float32))],
               transB=1)
    like = n.init("self_float", np.zeros((2, 8), np.float32))  # the trace's batch, baked in
    draw = n.node("RandomUniformLike", [like], low=0.0, high=1.0)
    if cast_like:
        keep = n.node("CastLike", [n.node("Constant", [], value_float=0.8), draw])
        mask = n.node("CastLike", [n.node("Less", [draw, keep]), like])
    else:
        mask = n.node("Cast", [n.node("Less", [draw, n.init("p_cast", np.array(0.8, np.float32))])], to=TensorProto.FLOAT)
    y = n.node("Mul", [y, n.node("Div", [mask, n.init("keep", np.array(0.8, np.float32))])])
    y = n.node("Gemm", [y, n.init("fc2.weight", n.weight((3, 8), 8)), n.init("fc2.bias", np.zeros(3, np.float32))],
               transB=1)
    return n.model("input", y, 20, [2, 6], 2)


def folded_batchnorm(exporter):
    """A Conv whose batch norm an exporter folded away: the dynamo exporter's rewriter names its rule
    in the node's metadata; the TorchScript exporter (eval mode) writes new onnx::Conv_<n> initializers."""
    n = Net(10)
    if exporter == "dynamo":
        y = n.conv("input", "conv1", 3, 4, 3, pad=1, bias=True)
        entry = n.nodes[-1].metadata_props.add()
        entry.key, entry.value = "pkg.onnxscript.rewriter.rule_name", "RemoveOptionalBiasFromConv, FuseBatchNormIntoConv"
    else:
        w = n.init("onnx::Conv_12", n.weight((4, 3, 3, 3), 27))
        b = n.init("onnx::Conv_13", np.zeros(4, np.float32))
        y = n.node("Conv", ["input", w, b], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    m = n.model("input", n.node("Relu", [y]), 17, ["N", 3, 6, 6], 4)
    m.producer_name = "pytorch"
    return m


def convnext_block(opset):
    """ConvNeXt's block as PyTorch's exporters write it: a 7x7 depthwise Conv, Transpose(0,2,3,1) to
    channels-last, LayerNorm over the channels, MatMul [C,4C] + Add bias, GELU, MatMul back + bias,
    Transpose(0,3,1,2), the layer scale (Mul by [C,1,1]) and the residual Add; then the head's
    LayerNorm2d and Gemm. LayerNorm is the LayerNormalization op from opset 17 and, before it, the
    TorchScript exporter's ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add; GELU is the Gelu op from
    opset 20 and Div(√2)/Erf/Add/Mul/Mul before it. At opset 20 the pooling is the dynamo exporter's
    ReduceMean → Reshape [-1] → Gather(arange) for batch 1."""
    n = Net(9)
    c = 8

    def scalar(hint, v):  # as the TorchScript exporter writes them: Constant nodes, not initializers
        return n.node("Constant", [], hint, value=numpy_helper.from_array(np.float32(v)))

    def layernorm(x, name, eps=1e-6):
        g = n.init(name + ".weight", n.rng.uniform(0.5, 1.5, c).astype(np.float32))
        b = n.init(name + ".bias", (n.rng.standard_normal(c) * 0.1).astype(np.float32))
        if opset >= 17:
            return n.node("LayerNormalization", [x, g, b], axis=-1, epsilon=eps)
        if name == "head_norm":  # a weight shared through an Identity, as the TorchScript exporter writes it
            g = n.node("Identity", [g])
        mean = n.node("ReduceMean", [x], axes=[-1])
        d = n.node("Sub", [x, mean])
        var = n.node("ReduceMean", [n.node("Pow", [d, scalar("two", 2)])], axes=[-1])
        std = n.node("Sqrt", [n.node("Add", [var, scalar("eps", eps)])])
        return n.node("Add", [n.node("Mul", [n.node("Div", [d, std]), g]), b])

    def gelu(x):
        if opset >= 20:
            return n.node("Gelu", [x])
        e = n.node("Erf", [n.node("Div", [x, scalar("sqrt2", np.sqrt(2))])])
        y = n.node("Mul", [x, n.node("Add", [e, scalar("one", 1)])])
        return n.node("Mul", [y, scalar("half", 0.5)])

    x = n.conv("input", "stem", 3, c, 2, stride=2, bias=True)
    y = n.conv(x, "dw", c, c, 7, pad=3, bias=True, group=c)
    y = layernorm(n.node("Transpose", [y], perm=[0, 2, 3, 1]), "norm")
    y = n.node("Add", [n.node("MatMul", [y, n.init("fc1.w", n.weight((c, 4 * c), c))]),
                       n.init("fc1.b", (n.rng.standard_normal(4 * c) * 0.1).astype(np.float32))])
    y = gelu(y)
    y = n.node("Add", [n.node("MatMul", [y, n.init("fc2.w", n.weight((4 * c, c), 4 * c))]),
                       n.init("fc2.b", (n.rng.standard_normal(c) * 0.1).astype(np.float32))])
    y = n.node("Transpose", [y], perm=[0, 3, 1, 2])
    y = n.node("Add", [n.node("Mul", [y, n.init("scale", n.rng.uniform(0.5, 1.5, (c, 1, 1)).astype(np.float32))]), x])
    if opset >= 20:
        y = n.node("ReduceMean", [y, n.init("axes", np.array([-1, -2], np.int64))], keepdims=1)
        flat = n.node("Reshape", [y, n.init("flat", np.array([-1], np.int64))])
        y = n.node("Gather", [flat, n.init("strided", np.arange(c, dtype=np.int64).reshape(1, c, 1, 1))], axis=0)
    else:
        y = n.node("GlobalAveragePool", [y])
    y = n.node("Transpose", [layernorm(n.node("Transpose", [y], perm=[0, 2, 3, 1]), "head_norm")], perm=[0, 3, 1, 2])
    y = n.node("Flatten", [y], axis=1)
    y = n.node("Gemm", [y, n.init("fc.w", n.weight((5, c), c)), n.init("fc.b", np.zeros(5, np.float32))], transB=1)
    return n.model("input", y, opset, ["N", 3, 8, 8], 2)


def flatten_then_relu(opset=13):
    """A flatten of H*W > 1 read by something other than Gemm/MatMul: refused, with a reason."""
    n = Net(5)
    y = n.node("Flatten", [n.conv("input", "c1", 3, 4, 3, pad=1)], axis=1)
    return n.model("input", n.node("Relu", [y]), opset, ["N", 3, 4, 4], 2)


def shape_misuse(kind):
    """Shape-arithmetic ops where trident cannot fold them: Gather from a computed tensor's values,
    a Div of two computed tensors, and an integer division by zero: refused, with a reason."""
    n = Net(9)
    x = n.conv("input", "c1", 3, 4, 3, pad=1)
    if kind == "gather":
        y = n.node("Gather", [x, n.init("i0", np.array([0], np.int64))], axis=0)
        return n.model("input", y, 13, ["N", 3, 4, 4], 4)
    if kind == "div":
        return n.model("input", n.node("Div", [x, x]), 13, ["N", 3, 4, 4], 4)
    s = n.node("Div", [n.node("Shape", [x]), n.init("zero", np.array(0, np.int64))])
    y = n.node("Reshape", [x, n.node("Concat", [n.node("Slice", [s, n.init("a", np.array([0], np.int64)),
                                                                 n.init("b", np.array([1], np.int64))]),
                                                n.init("m1", np.array([-1], np.int64))], axis=0)])
    return n.model("input", y, 13, ["N", 3, 4, 4], 2)


def shuffle_misuse(relu_on_view):
    """A channel shuffle's 5-D view read by a Relu, or a Transpose that is no shuffle's nor a
    channels-last permute: refused."""
    n = Net(7)
    x = n.conv("input", "c1", 3, 4, 3, pad=1)
    if relu_on_view:
        v = n.node("Reshape", [x, n.init("split_shape", np.array([-1, 2, 2, 4, 4], np.int64))])
        y = n.node("Relu", [v])
        return n.model("input", y, 13, ["N", 3, 4, 4], 5)
    return n.model("input", n.node("Transpose", [x], perm=[0, 1, 3, 2]), 13, ["N", 3, 4, 4], 4)


def channels_last_misuse():
    """A channels-last view (Transpose(0,2,3,1)) read by a Relu: refused with the readers it may have."""
    n = Net(8)
    x = n.node("Transpose", [n.conv("input", "c1", 3, 4, 3, pad=1)], perm=[0, 2, 3, 1])
    return n.model("input", n.node("Relu", [x]), 13, ["N", 3, 4, 4], 4)


def resnet(depth, fold_bn, opset=17):
    """torchvision ResNet-18/50 layer by layer; with fold_bn, BN lives in the conv bias."""
    n = Net(depth)
    eps = 1e-5

    def cbn(x, name, bn_name, cin, cout, k, stride, pad, relu):
        if fold_bn:
            w = n.weight((cout, cin, k, k), cin * k * k)
            p = n.bn_params(bn_name, cout)
            f = p["weight"] / np.sqrt(p["running_var"] + eps)
            wn = n.init(name + ".weight", (w * f[:, None, None, None]).astype(np.float32))
            bn_ = n.init(name + ".bias", (p["bias"] - p["running_mean"] * f).astype(np.float32))
            y = n.node("Conv", [x, wn, bn_], name, kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4)
        else:
            y = n.bn(n.conv(x, name, cin, cout, k, stride, pad), bn_name, cout)
        return n.node("Relu", [y]) if relu else y

    y = cbn("input", "conv1", "bn1", 3, 64, 7, 2, 3, True)
    y = n.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    bottleneck = depth == 50
    blocks = [2, 2, 2, 2] if depth == 18 else [3, 4, 6, 3]
    cin = 64
    for li, (nb, width) in enumerate(zip(blocks, [64, 128, 256, 512])):
        for bi in range(nb):
            stride = 2 if li > 0 and bi == 0 else 1
            pre = f"layer{li + 1}.{bi}"
            cout = width * 4 if bottleneck else width
            if bottleneck:
                h = cbn(y, pre + ".conv1", pre + ".bn1", cin, width, 1, 1, 0, True)
                h = cbn(h, pre + ".conv2", pre + ".bn2", width, width, 3, stride, 1, True)
                h = cbn(h, pre + ".conv3", pre + ".bn3", width, cout, 1, 1, 0, False)
            else:
                h = cbn(y, pre + ".conv1", pre + ".bn1", cin, width, 3, stride, 1, True)
                h = cbn(h, pre + ".conv2", pre + ".bn2", width, width, 3, 1, 1, False)
            sc = y
            if stride != 1 or cin != cout:
                sc = cbn(y, pre + ".downsample.0", pre + ".downsample.1", cin, cout, 1, stride, 0, False)
            y = n.node("Relu", [n.node("Add", [h, sc])])
            cin = cout
    y = n.node("GlobalAveragePool", [y])
    y = n.node("Flatten", [y], axis=1)
    w = n.init("fc.weight", n.weight((1000, cin), cin))
    y = n.node("Gemm", [y, w, n.init("fc.bias", np.zeros(1000, np.float32))], transB=1)
    return n.model("input", y, opset, ["N", 3, 224, 224], 2)


def bn_training(opset=15):
    n = Net(4)
    y = n.bn(n.conv("input", "conv", 3, 4, 3, pad=1), "bn", 4, training=True)
    return n.model("input", n.node("Relu", [y]), opset, ["N", 3, 6, 6], 4)


def qdq_quantized(float_model, out_dir, name, per_channel, activation_type, channels_hw):
    """`float_model` quantized by onnxruntime's own quantizer (quantize_static, the QDQ format),
    as a user quantizes for onnxruntime: calibrated on two random batches."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Batches(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(7)
            self.batches = iter([{"input": rng.standard_normal((1,) + channels_hw).astype(np.float32)}
                                 for _ in range(2)])

        def get_next(self):
            return next(self.batches, None)

    src = os.path.join(out_dir, name + ".float.tmp.onnx")
    dst = os.path.join(out_dir, name + ".tmp.onnx")
    onnx.save(float_model, src)
    quantize_static(src, dst, Batches(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                    activation_type=getattr(QuantType, activation_type), weight_type=QuantType.QInt8)
    model = onnx.load(dst)
    for f in (src, dst):
        os.remove(f)
    return model


def qdq_misuse(kind):
    """What trident refuses of QDQ models, each with a sentence: a QuantizeLinear read by a Conv,
    a DequantizeLinear with another scale than its QuantizeLinear, and one of an activation no
    QuantizeLinear made; and a small valid one for the fuzz test."""
    n = Net(13)
    x = n.conv("input", "c1", 3, 4, 3, pad=1)
    s = n.init("s", np.array(0.05, np.float32))
    z = n.init("z", np.array(0, np.int8))
    if kind == "qdq_small":  # valid: a pair, then a Conv whose int8 weights a DequantizeLinear reads (the fuzz seed)
        wq = n.init("wq", n.rng.integers(-127, 128, (4, 4, 1, 1)).astype(np.int8))
        ws = n.init("ws", np.full(4, 0.02, np.float32))
        w = n.node("DequantizeLinear", [wq, ws, n.init("wz", np.zeros(4, np.int8))], axis=0)
        y = n.node("Conv", [n.node("DequantizeLinear", [n.node("QuantizeLinear", [x, s, z]), s, z]), w])
    elif kind == "qdq_integer_read":
        y = n.conv(n.node("QuantizeLinear", [x, s, z]), "c2", 4, 4, 1)
    elif kind == "qdq_other_scale":
        y = n.node("DequantizeLinear", [n.node("QuantizeLinear", [x, s, z]), n.init("s2", np.array(0.1, np.float32)), z])
    else:
        y = n.node("DequantizeLinear", [x, s, z])
    return n.model("input", y, 13, ["N", 3, 4, 4], 4)


def reference(path, model, batches, out_dir, name, channels_hw):
    # The graph as written, without onnxruntime's own rewrites: its PadFusion (1.20) folds a zero
    # Pad into the AveragePool after it but leaves count_include_pad 0, so the padded zeros no
    # longer count (pad_block's second AveragePool).
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(100)
    for b in batches:
        x = rng.standard_normal((b,) + channels_hw).astype(np.float32)
        (y,) = sess.run(None, {"input": x})
        x.tofile(os.path.join(out_dir, f"{name}.b{b}.input.bin"))
        np.asarray(y, np.float32).tofile(os.path.join(out_dir, f"{name}.b{b}.output.bin"))
        yield {"batch": b, "input_shape": list(x.shape), "output_shape": list(y.shape)}


def corrupt(out_dir, good_path):
    data = open(good_path, "rb").read()
    files = {"truncated.onnx": data[: len(data) // 2], "empty.onnx": b"",
             "random_bytes.onnx": np.random.default_rng(7).bytes(4096)}
    base = onnx.load(good_path)

    def variant(fn):
        m = onnx.ModelProto()
        m.CopyFrom(base)
        fn(m)
        return m.SerializeToString()

    def drop_weight(m):
        del m.graph.initializer[0]  # conv.weight

    def unsupported(m):
        m.graph.node[2].op_type = "Softmax"

    def f64(m):
        t = m.graph.initializer[0]
        arr = numpy_helper.to_array(t).astype(np.float64)
        t.CopyFrom(numpy_helper.from_array(arr, t.name))

    def bad_bn(m):
        t = m.graph.initializer[1]  # bn.weight
        t.CopyFrom(numpy_helper.from_array(np.ones(5, np.float32), t.name))

    def absurd(m):
        t = m.graph.initializer[0]
        del t.dims[:]
        t.dims.extend([1 << 20, 1 << 20, 1 << 10, 3])

    def absurd_input(m):
        m.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 1 << 23
        m.graph.input[0].type.tensor_type.shape.dim[3].dim_value = 1 << 23

    def bad_attr(m):
        m.graph.node[0].attribute.append(helper.make_attribute("ceil_mode", 1))

    def old_opset(m):
        m.opset_import[0].version = 7

    for name, fn in [("missing_initializer", drop_weight), ("unsupported_op", unsupported),
                     ("wrong_dtype", f64), ("shape_mismatch", bad_bn), ("absurd_size", absurd),
                     ("absurd_input", absurd_input), ("unsupported_attribute", bad_attr),
                     ("old_opset", old_opset)]:
        files[name + ".onnx"] = variant(fn)
    files["flatten_then_relu.onnx"] = flatten_then_relu().SerializeToString()
    files["shuffle_view_read.onnx"] = shuffle_misuse(True).SerializeToString()
    files["lone_transpose.onnx"] = shuffle_misuse(False).SerializeToString()
    files["channels_last_read.onnx"] = channels_last_misuse().SerializeToString()
    for kind in ("gather", "div", "div_by_zero"):
        files[f"shape_{kind}.onnx"] = shape_misuse(kind).SerializeToString()
    for kind in ("pad_reflect", "pad_channels", "slice_height", "slice_step", "split_width"):
        files[f"{kind}.onnx"] = pad_slice_misuse(kind).SerializeToString()
    for kind in ("qdq_small", "qdq_integer_read", "qdq_other_scale", "qdq_lone_dequantize"):
        files[f"{kind}.onnx"] = qdq_misuse(kind).SerializeToString()
    # Every initializer reading the same bytes of one external file (a 2 kB model would load as
    # many copies as it has tensors): refused once the tensors read more than the file holds.
    shared = onnx.ModelProto()
    shared.CopyFrom(base)
    longest = max(len(numpy_helper.to_array(t).tobytes()) for t in shared.graph.initializer)
    with open(os.path.join(out_dir, "shared.bin"), "wb") as f:
        f.write(np.zeros(longest, np.uint8).tobytes())  # room for the longest tensor alone
    for t in shared.graph.initializer:
        length = len(numpy_helper.to_array(t).tobytes())
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
        for key, value in (("location", "shared.bin"), ("offset", "0"), ("length", str(length))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
    files["external_shared.onnx"] = shared.SerializeToString()
    # Random numbers that are no dropout (a Greater where dropout's Less would be): refused.
    lone = random_dropout(False)
    for node in lone.graph.node:
        if node.op_type == "Less":
            node.op_type = "Greater"
    files["random_uniform_alone.onnx"] = lone.SerializeToString()
    for name, b in files.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(b)
    return sorted(files)


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    with open(__file__, "rb") as f:
        stamp = hashlib.sha256(f.read()).hexdigest()
    manifest_path = os.path.join(out_dir, "manifest.json")
    if os.path.exists(manifest_path):  # up to date: made by this very script
        with open(manifest_path) as f:
            if json.load(f).get("stamp") == stamp:
                print(f"make_models: {out_dir} is up to date")
                return
        os.remove(manifest_path)
    manifest = {"models": [], "corrupt": []}

    def save(name, model, batches, chw, kind, check=True, external=False):
        if check:
            onnx.checker.check_model(model)
        path = os.path.join(out_dir, name + ".onnx")
        if external:  # weights in one file beside the model, small tensors inline, as the dynamo exporter does
            onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                      location=name + ".onnx.data", size_threshold=64)
        else:
            onnx.save(model, path)
        refs = list(reference(path, model, batches, out_dir, name, chw)) if batches else []
        manifest["models"].append({"name": name, "kind": kind, "opset": model.opset_import[0].version,
                                   "refs": refs})

    for opset in (13, 18):
        save(f"conv_bn_relu_op{opset}", conv_bn_relu(opset), [1, 2], (3, 10, 10), "small")
        save(f"ops_a_op{opset}", ops_a(opset), [1, 3], (4, 16, 16), "small")
        save(f"ops_b_op{opset}", ops_b(opset), [2], (3, 9, 9), "small")
        save(f"vgg_head_op{opset}", vgg_head(opset, False), [1, 2], (3, 8, 10), "small")
        save(f"vgg_head_reshape_op{opset}", vgg_head(opset, True), [1, 2], (3, 8, 10), "small")
        save(f"exported_head_op{opset}", exported_head(opset), [1, 2], (3, 6, 6), "small", external=True)
        save(f"mobile_block_op{opset}", mobile_block(opset), [1, 2], (3, 12, 12), "small")
        save(f"efficient_block_op{opset}", efficient_block(opset), [2], (3, 9, 9), "small")
        save(f"shuffle_block_op{opset}", shuffle_block(opset), [1, 3], (3, 6, 6), "small")
        save(f"dynamic_shapes_op{opset}", dynamic_shapes(opset), [1, 3], (3, 6, 6), "small")
        save(f"pad_block_op{opset}", pad_block(opset), [1, 2], (3, 8, 8), "small")
        save(f"split_block_op{opset}", split_block(opset), [1, 3], (3, 6, 6), "small")
    for opset in (13, 17):
        save(f"convnext_block_op{opset}", convnext_block(opset), [1, 2], (3, 8, 8), "small")
    save("convnext_block_op20", convnext_block(20), [1], (3, 8, 8), "small", external=True)
    save("bn_training_op15", bn_training(), [], None, "training")
    save("dynamo_unoptimized", dynamo_unoptimized(False), [2], (3, 5, 5), "small")
    save("dynamo_unoptimized_training", dynamo_unoptimized(True), [], None, "training")
    for cast_like in (False, True):
        save(f"random_dropout{'_cast_like' if cast_like else ''}", random_dropout(cast_like), [], None, "training")
    for exporter in ("dynamo", "torchscript"):
        save(f"folded_bn_{exporter}", folded_batchnorm(exporter), [], None, "training")
    for depth in (18, 50):
        for fold in (True, False):
            save(f"resnet{depth}_{'eval' if fold else 'bn'}", resnet(depth, fold), [1, 2], (3, 224, 224), "resnet")
    # onnxruntime's QDQ quantization of the BN-folded ResNet-18: per-channel int8 weights with s8
    # activations (its defaults but per_channel), and per-tensor weights with u8 activations.
    for qname, per_channel, act in (("resnet18_qdq", True, "QInt8"), ("resnet18_qdq_per_tensor", False, "QUInt8")):
        save(qname, qdq_quantized(resnet(18, True), out_dir, qname, per_channel, act, (3, 224, 224)), [1],
             (3, 224, 224), "qdq")
    manifest["corrupt"] = corrupt(out_dir, os.path.join(out_dir, "conv_bn_relu_op13.onnx"))
    manifest["stamp"] = stamp
    with open(manifest_path + ".tmp", "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(manifest_path + ".tmp", manifest_path)  # last: a killed run leaves no manifest
    print(f"make_models: wrote {len(manifest['models'])} models to {out_dir}")


if __name__ == "__main__":
    main()
