// Shape arithmetic folded at import. An exporter that keeps the batch dynamic computes a
// Reshape's target from the input's dims at run time: x.view(x.size(0), -1) becomes Shape →
// Gather → Unsqueeze → Concat → Reshape, a channel shuffle's view adds Slice and Div. trident
// compiles for one batch, so those dims are known here: Shape of a computed tensor is a
// constant, and Gather, Unsqueeze, Slice, Cast, integer Add/Sub/Mul/Div and Concat of constants
// are evaluated into constants that the Reshape (or shuffle) reads as if the file held them.
// The dynamo exporter with optimize=False adds Expand and CastLike of constants (a bias-free
// convolution's zero bias, Expand(CastLike(0, x), Shape(w)[0:1])): evaluated the same way.
// The same ops on a computed tensor's values, not its dims, are refused with the node named
// (a Slice of a computed tensor's channels is a channel_slice: onnx_pad_slice.cpp).
#include <algorithm>
#include <limits>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/printable.h"
#include "frontend/onnx/onnx_detail.h"

namespace trident::frontend::onnx_detail {

namespace {

// ONNX's normalisation of an axis or index against an extent: negative counts from the end.
bool normalise(int64_t& v, int64_t extent) {
  if (v < -extent || v >= extent) return false;
  if (v < 0) v += extent;
  return true;
}

}  // namespace

void Importer::define_const(const onnx::NodeProto& n, Shape dims, std::vector<int64_t> values) {
  Const c;
  c.name = n.output(0);
  c.dims = std::move(dims);
  c.i = std::move(values);
  c.derived = true;
  consts_[n.output(0)] = std::move(c);
}

const Const& Importer::integer_const(const onnx::NodeProto& n, int i, const char* what) const {
  if (has_input(n, i) && values_.count(n.input(i)))
    fail(n, "its " + std::string(what) + " " + quoted_name(n.input(i)) + " is computed; trident folds " + n.op_type() +
                " only in shape arithmetic, on constants and the dims of tensors (Shape)");
  const Const& c = constant_of(n, i);
  if (c.is_float) fail(n, "its " + std::string(what) + " " + quoted_name(c.name) + " must hold integers (shape arithmetic)");
  if (c.dims.size() > 1) fail(n, "its " + std::string(what) + " " + quoted_name(c.name) + " must be a scalar or 1-D");
  return c;
}

void Importer::shape(const onnx::NodeProto& n) {
  allow_attrs(n, {"start", "end"});
  expect_io(n, 1, 1, 1);
  Shape dims;
  if (is_const(n.input(0))) {
    dims = constant_of(n, 0).dims;
  } else {
    const Shape& s = out_.graph.value(activation(n, 0)).shape;
    dims = s.size() == 4 ? Shape{s[0], s[3], s[1], s[2]} : s;  // trident's NHWC as ONNX's NCHW
  }
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t start = attr_int(n, "start", 0), end = attr_int(n, "end", rank);
  // Opset 15's rule: negative from the end, then clamped to [0, rank].
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  const int64_t count = std::max(start, end) - start;
  define_const(n, {count}, std::vector<int64_t>(dims.begin() + start, dims.begin() + start + count));
}

void Importer::gather(const onnx::NodeProto& n) {
  allow_attrs(n, {"axis"});
  expect_io(n, 2, 2, 1);
  if (gather_from_flat(n)) return;  // the dynamo exporter's as_strided identity (onnx_layernorm.cpp)
  const Const& data = integer_const(n, 0, "data");
  const Const& idx = integer_const(n, 1, "indices");
  if (data.dims.size() != 1) fail(n, "gathers from " + quoted_name(data.name) + ", which is not 1-D");
  if (attr_int(n, "axis", 0) != 0) fail(n, "gathers along an axis other than 0 of a 1-D tensor");
  std::vector<int64_t> out;
  for (int64_t k : idx.i) {
    if (!normalise(k, data.dims[0])) fail(n, "index " + std::to_string(k) + " is out of range for " + quoted_name(data.name));
    out.push_back(data.i[static_cast<size_t>(k)]);
  }
  define_const(n, idx.dims, std::move(out));
}

void Importer::unsqueeze(const onnx::NodeProto& n) {
  allow_attrs(n, {"axes"});
  expect_io(n, 1, 2, 1);
  const Const& data = integer_const(n, 0, "data");
  const std::vector<int64_t> axes = out_.opset >= 13 ? integer_const(n, 1, "axes").i : attr_ints(n, "axes");
  const int64_t rank = static_cast<int64_t>(data.dims.size() + axes.size());
  if (axes.empty() || rank > 8) fail(n, "needs 1 to " + std::to_string(8 - data.dims.size()) + " axes");
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    if (!normalise(a, rank) || inserted[static_cast<size_t>(a)]) fail(n, "axes " + shape_str(axes) + " are not distinct axes of the result");
    inserted[static_cast<size_t>(a)] = true;
  }
  Shape dims;
  size_t next = 0;
  for (int64_t a = 0; a < rank; ++a) dims.push_back(inserted[static_cast<size_t>(a)] ? 1 : data.dims[next++]);
  define_const(n, std::move(dims), data.i);
}

void Importer::slice(const onnx::NodeProto& n) {
  allow_attrs(n, {});
  expect_io(n, 3, 5, 1);
  if (!is_const(n.input(0))) return channel_slice(n);  // a computed tensor: onnx_pad_slice.cpp
  const Const& data = integer_const(n, 0, "data");
  if (data.dims.size() != 1) fail(n, "slices " + quoted_name(data.name) + ", which is not 1-D");
  const Const& starts = integer_const(n, 1, "starts");
  const Const& ends = integer_const(n, 2, "ends");
  if (starts.i.size() != 1 || ends.i.size() != 1) fail(n, "needs one start and one end (a 1-D tensor has one axis)");
  if (has_input(n, 3)) {
    const Const& axes = integer_const(n, 3, "axes");
    int64_t axis = axes.i.size() == 1 ? axes.i[0] : 1;
    if (!normalise(axis, 1)) fail(n, "axis " + std::to_string(axis) + " is not the axis of a 1-D tensor");
  }
  if (has_input(n, 4) && integer_const(n, 4, "steps").i != std::vector<int64_t>{1})
    fail(n, "only step 1 is supported");
  const int64_t len = data.dims[0];
  // ONNX's clamping: negative from the end, then into [0, len] (ends may be INT64_MAX).
  auto clamp = [len](int64_t v) { return std::clamp<int64_t>(v < 0 ? (v < -len ? 0 : v + len) : v, 0, len); };
  const int64_t b = clamp(starts.i[0]), e = std::max(b, clamp(ends.i[0]));
  define_const(n, {e - b}, std::vector<int64_t>(data.i.begin() + b, data.i.begin() + e));
}

void Importer::cast(const onnx::NodeProto& n) {
  allow_attrs(n, {"to", "saturate"});
  expect_io(n, 1, 1, 1);
  const int64_t to = attr_int(n, "to", 0);
  if (!is_const(n.input(0))) {
    if (to != onnx::TensorProto::FLOAT) fail(n, "casts a computed tensor to a type other than float");
    define(n, 0, activation(n, 0));  // trident computes in float already
    return;
  }
  const Const& c = constant_of(n, 0);
  Const out = c;
  out.name = n.output(0);
  out.derived = true;
  if (to == onnx::TensorProto::FLOAT) {
    if (!c.is_float) out.f.assign(c.i.begin(), c.i.end()), out.i.clear(), out.is_float = true;
  } else if (to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32) {
    if (c.is_float) {
      out.i.clear();
      for (float v : c.f) {
        if (!(v > -9.2e18f && v < 9.2e18f)) fail(n, "a value does not fit an integer");
        out.i.push_back(static_cast<int64_t>(v));  // toward zero, as onnxruntime casts
      }
      out.f.clear(), out.is_float = false;
    }
  } else {
    fail(n, "casts a constant to type " + std::to_string(to) + "; trident folds casts to float, int32 and int64");
  }
  consts_[n.output(0)] = std::move(out);
}

void Importer::fold_arithmetic(const onnx::NodeProto& n) {
  const Const& a = integer_const(n, 0, "first input");
  const Const& b = integer_const(n, 1, "second input");
  if (a.i.size() != b.i.size() && a.i.size() != 1 && b.i.size() != 1)
    fail(n, "operands of " + std::to_string(a.i.size()) + " and " + std::to_string(b.i.size()) + " values do not broadcast");
  const bool a_longer = a.i.size() >= b.i.size();
  const size_t count = std::max(a.i.size(), b.i.size());
  const std::string& t = n.op_type();
  std::vector<int64_t> out;
  for (size_t k = 0; k < count; ++k) {
    const int64_t x = a.i[a.i.size() == 1 ? 0 : k], y = b.i[b.i.size() == 1 ? 0 : k];
    int64_t r = 0;
    bool overflow = false;
    if (t == "Add") overflow = __builtin_add_overflow(x, y, &r);
    else if (t == "Sub") overflow = __builtin_sub_overflow(x, y, &r);
    else if (t == "Mul") overflow = __builtin_mul_overflow(x, y, &r);
    else if (y == 0) fail(n, "divides by zero");
    else if (x == std::numeric_limits<int64_t>::min() && y == -1) overflow = true;
    else r = x / y;  // toward zero, as onnxruntime divides integers
    if (overflow) fail(n, "overflows 64-bit integers");
    out.push_back(r);
  }
  define_const(n, a_longer ? a.dims : b.dims, std::move(out));
}

void Importer::fold_concat(const onnx::NodeProto& n) {
  std::vector<int64_t> out;
  for (int i = 0; i < n.input_size(); ++i) {
    const Const& c = integer_const(n, i, "input");
    if (c.dims.size() != 1) fail(n, "concatenates " + quoted_name(c.name) + ", which is not 1-D (shape arithmetic)");
    if (out.size() + c.i.size() > 64) fail(n, "makes a shape of more than 64 values");
    out.insert(out.end(), c.i.begin(), c.i.end());
  }
  const int64_t count = static_cast<int64_t>(out.size());
  define_const(n, {count}, std::move(out));
}

// Reshape(constant, shape): the same values with new dims (0 copies an extent unless allowzero,
// one -1 takes the rest). The dynamo exporter reshapes ReduceMean's axes so.
void Importer::fold_reshape(const onnx::NodeProto& n) {
  const Const& data = constant_of(n, 0);
  const Const& shape = integer_const(n, 1, "shape");
  if (shape.dims.size() != 1 || shape.i.size() > 8) fail(n, "its shape " + quoted_name(shape.name) + " must be 1-D, of at most 8 values");
  const bool allowzero = attr_int(n, "allowzero", 0) != 0;
  Shape dims;
  int64_t known = 1, infer_at = -1;
  for (size_t k = 0; k < shape.i.size(); ++k) {
    int64_t d = shape.i[k];
    if (d == 0 && !allowzero) {
      if (k >= data.dims.size()) fail(n, "copies extent " + std::to_string(k) + ", which its data does not have");
      d = data.dims[k];
    }
    if (d == -1) {
      if (infer_at >= 0) fail(n, "has more than one -1 in its shape");
      infer_at = static_cast<int64_t>(k);
    } else if (d < 0) {
      fail(n, "has the negative extent " + std::to_string(d) + " in its shape");
    } else {
      known = checked_mul(known, d, "Reshape");
    }
    dims.push_back(d);
  }
  const int64_t count = data.numel();
  if (infer_at >= 0) {
    if (known == 0 || count % known != 0) fail(n, "cannot reshape " + std::to_string(count) + " values to " + shape_str(shape.i));
    dims[static_cast<size_t>(infer_at)] = count / known;
  } else if (known != count) {
    fail(n, "cannot reshape " + std::to_string(count) + " values to " + shape_str(shape.i));
  }
  Const out = data;
  out.name = n.output(0);
  out.dims = std::move(dims);
  out.derived = true;
  consts_[n.output(0)] = std::move(out);
}

// Expand(data, shape): numpy's broadcast of data to shape. The dynamo exporter writes a
// bias-free convolution's bias as Expand(CastLike(0, x), Shape(weight)[0:1]); a constant's
// expansion is evaluated here, and an activation's only when it is the identity.
void Importer::expand(const onnx::NodeProto& n) {
  allow_attrs(n, {});
  expect_io(n, 2, 2, 1);
  const Const& shape = integer_const(n, 1, "shape");
  if (shape.dims.size() != 1 || shape.i.size() > 8) fail(n, "its shape " + quoted_name(shape.name) + " must be 1-D, of at most 8 values");
  Shape in;
  const bool computed = !is_const(n.input(0));
  if (computed) {
    const Shape& s = out_.graph.value(activation(n, 0)).shape;
    in = s.size() == 4 ? Shape{s[0], s[3], s[1], s[2]} : s;  // trident's NHWC as ONNX's NCHW
  } else {
    in = constant_of(n, 0).dims;
  }
  // Right-aligned broadcast: each axis equal, or 1 on one side.
  const size_t rank = std::max(in.size(), shape.i.size());
  Shape out(rank);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t a = k + in.size() >= rank ? in[k + in.size() - rank] : 1;
    const int64_t b = k + shape.i.size() >= rank ? shape.i[k + shape.i.size() - rank] : 1;
    if (a != b && a != 1 && b != 1)
      fail(n, "cannot broadcast " + shape_str(in) + " to " + shape_str(shape.i));
    if (b < 0) fail(n, "its shape " + shape_str(shape.i) + " has a negative extent");
    out[k] = a == 1 ? b : a;
  }
  if (computed) {
    if (out != in) fail(n, "expands the computed tensor " + quoted_name(n.input(0)) + " from " + shape_str(in) + " to " +
                               shape_str(out) + "; trident expands constants only");
    define(n, 0, activation(n, 0));
    return;
  }
  int64_t count = 1;
  for (int64_t d : out)
    if ((count = checked_mul(count, d, "Expand")) > (int64_t{1} << 24)) fail(n, "makes a constant of more than 2^24 elements");
  const Const& data = constant_of(n, 0);
  Const c;
  c.name = n.output(0);
  c.dims = out;
  c.is_float = data.is_float;
  c.derived = true;
  // Element k of the output reads the input at k's coordinates, extents of 1 read index 0.
  std::vector<int64_t> in_stride(rank, 0);
  for (int64_t k = static_cast<int64_t>(rank) - 1, s = 1; k >= 0; --k) {
    const size_t j = static_cast<size_t>(k);
    const int64_t a = j + in.size() >= rank ? in[j + in.size() - rank] : 1;
    in_stride[j] = a == 1 ? 0 : s;
    s *= a;
  }
  for (int64_t flat = 0; flat < count; ++flat) {
    int64_t rest = flat, src = 0;
    for (int64_t k = static_cast<int64_t>(rank) - 1; k >= 0; --k) {
      const size_t j = static_cast<size_t>(k);
      src += (rest % out[j]) * in_stride[j];
      rest /= out[j];
    }
    if (c.is_float) c.f.push_back(data.f[static_cast<size_t>(src)]);
    else c.i.push_back(data.i[static_cast<size_t>(src)]);
  }
  consts_[n.output(0)] = std::move(c);
}

// Transpose(constant, perm): the dynamo exporter with optimize=False leaves nn.Linear's
// weight.T as a Transpose of the initializer. The result keeps an initializer's name, so the
// parameter it becomes is named as in PyTorch's state dict.
void Importer::fold_transpose(const onnx::NodeProto& n) {
  const Const& data = constant_of(n, 0);
  const size_t rank = data.dims.size();
  std::vector<int64_t> perm = attr_ints(n, "perm");
  if (perm.empty())
    for (size_t k = rank; k > 0; --k) perm.push_back(static_cast<int64_t>(k - 1));
  std::vector<bool> seen(rank, false);
  if (perm.size() != rank) fail(n, "perm " + shape_str(perm) + " does not permute " + std::to_string(rank) + " axes");
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)])
      fail(n, "perm " + shape_str(perm) + " is not a permutation of " + std::to_string(rank) + " axes");
    seen[static_cast<size_t>(p)] = true;
  }
  Const out = data;
  if (data.derived) out.name = n.output(0);
  for (size_t k = 0; k < rank; ++k) out.dims[k] = data.dims[static_cast<size_t>(perm[k])];
  // Output element o, at coordinates c, reads input coordinates c' with c'[perm[k]] = c[k].
  std::vector<int64_t> in_stride(rank, 1);
  for (size_t k = rank; k-- > 1;) in_stride[k - 1] = in_stride[k] * data.dims[k];
  const int64_t count = data.numel();
  for (int64_t o = 0; o < count; ++o) {
    int64_t rest = o, src = 0;
    for (size_t k = rank; k-- > 0;) {
      src += (rest % out.dims[k]) * in_stride[static_cast<size_t>(perm[k])];
      rest /= out.dims[k];
    }
    if (data.is_float) out.f[static_cast<size_t>(o)] = data.f[static_cast<size_t>(src)];
    else out.i[static_cast<size_t>(o)] = data.i[static_cast<size_t>(src)];
  }
  consts_[n.output(0)] = std::move(out);
}

// ConstantOfShape(shape): a tensor of those dims holding attribute value's one element (a float
// 0 by default). The TorchScript exporter's stochastic depth draws like one of [N, 1, 1, 1].
void Importer::constant_of_shape(const onnx::NodeProto& n) {
  allow_attrs(n, {"value"});
  expect_io(n, 1, 1, 1);
  const Const& shape = integer_const(n, 0, "shape");
  if (shape.dims.size() != 1 || shape.i.size() > 8) fail(n, "its shape " + quoted_name(shape.name) + " must be 1-D, of at most 8 values");
  Const value;
  value.is_float = true;
  value.f = {0.f};
  if (const auto* a = attr(n, "value", onnx::AttributeProto::TENSOR)) {
    try {
      value = read_tensor(a->t(), label_ + ": node '" + node_name(n) + "': ", external_);
    } catch (const Error& e) {
      fail(n, e.what());
    }
    if (value.numel() != 1) fail(n, "its value must hold one element");
  }
  int64_t count = 1;
  for (int64_t d : shape.i) {
    if (d < 0) fail(n, "its shape " + shape_str(shape.i) + " has a negative extent");
    if ((count = checked_mul(count, d, "ConstantOfShape")) > (int64_t{1} << 24))
      fail(n, "makes a constant of more than 2^24 elements");
  }
  Const c;
  c.name = n.output(0);
  c.dims = shape.i;
  c.is_float = value.is_float;
  c.derived = true;
  if (c.is_float) c.f.assign(static_cast<size_t>(count), value.f[0]);
  else c.i.assign(static_cast<size_t>(count), value.i[0]);
  consts_[n.output(0)] = std::move(c);
}

// CastLike(x, target): x in target's element type. trident computes activations in float, so a
// computed x with a float target is itself; a constant x becomes float or integer like target.
void Importer::cast_like(const onnx::NodeProto& n) {
  allow_attrs(n, {"saturate"});
  expect_io(n, 2, 2, 1);
  const bool target_float = !is_const(n.input(1)) ? (activation(n, 1), true) : constant_of(n, 1).is_float;
  if (!is_const(n.input(0))) {
    if (!target_float) fail(n, "casts a computed tensor to an integer type");
    define(n, 0, activation(n, 0));
    return;
  }
  Const out = constant_of(n, 0);
  out.name = n.output(0);
  out.derived = true;
  if (target_float && !out.is_float) {
    out.f.assign(out.i.begin(), out.i.end()), out.i.clear(), out.is_float = true;
  } else if (!target_float && out.is_float) {
    out.i.clear();
    for (float v : constant_of(n, 0).f) {
      if (!(v > -9.2e18f && v < 9.2e18f)) fail(n, "a value does not fit an integer");
      out.i.push_back(static_cast<int64_t>(v));
    }
    out.f.clear(), out.is_float = false;
  }
  consts_[n.output(0)] = std::move(out);
}

}  // namespace trident::frontend::onnx_detail
