// Op cases of the classifier head and the optimizer: linear with its data and weight gradients (±
// bias; square, skinny and odd shapes; f32 matmuls on cuda use TF32, Row::Tf32), softmax
// cross-entropy and its gradient (class counts from 3 to several thousand), sgd_update over
// several tensors with and without momentum, weight decay and Nesterov, in place and into separate
// buffers, and adamw_update at its first and a later step, with loss scaling and with a skipped
// (overflowed) step; both optimizers also with f16/bf16 gradients beside f32 parameters.
#include <algorithm>
#include <cmath>
#include <limits>

#include "support/op_cases/family.h"

namespace trident::test_support::op_family {
namespace {

using ir::Attrs;

ir::Graph linear_graph(DType t, int64_t N, int64_t I, int64_t O, bool bias) {
  ir::Graph g;
  std::vector<int> in{g.add_input("x", {N, I}, t), g.add_parameter("w", {O, I}, {}, t)};
  if (bias) in.push_back(g.add_parameter("b", {O}, {}, t));
  g.add_node1("linear", in, {}, "y");
  const int dy = g.add_input("dy", {N, O}, t);
  g.add_node1("linear_backward_data", {dy, in[1]}, {}, "dx");
  g.add_node("linear_backward_weight", {in[0], dy}, {{"has_bias", int64_t{bias}}}, "wgrad");
  return g;
}

// logits [N,K] in `d`; labels are drawn in 0..2 by the runner, so K ≥ 3.
ir::Graph loss_graph(DType d, int64_t N, int64_t K) {
  ir::Graph g;
  const int logits = g.add_input("logits", {N, K}, d);
  const int labels = g.add_input("labels", {N}, DType::i32);
  g.add_node1("softmax_cross_entropy", {logits, labels}, {}, "loss");
  g.add_node1("softmax_cross_entropy_backward", {logits, labels, g.add_input("dloss", {1}, d)}, {}, "dlogits");
  return g;
}

// Logits four times wider (confident rows), labels over every class: each row's label from its
// first logit, so every draw has its own.
void wide_logits_any_label(GraphRunner& r, const ir::Graph& g) {
  map_values(r, g, {"logits"}, [](double v) { return 4 * v; });
  const int lv = g.find_value("logits");
  const int64_t K = g.value(lv).shape[1];
  const std::vector<double> logits = r.values(lv);
  TensorView labels = r.view(g.find_value("labels"));
  for (int64_t i = 0; i < labels.numel(); ++i) {
    const double u = (logits[static_cast<size_t>(i * K)] + 4) / 8;  // in [0, 1)
    labels.as<int32_t>()[i] = static_cast<int32_t>(std::clamp<int64_t>(static_cast<int64_t>(u * K), 0, K - 1));
  }
}

// `grads`: the gradients' dtype; f16/bf16 beside the f32 parameters is fold_gradient_cast's form.
ir::Graph sgd_graph(const std::vector<Shape>& shapes, const Attrs& hyper, bool state_roles, DType grads = DType::f32) {
  ir::Graph g;
  std::vector<int> in{g.add_input("lr", {1})};
  const size_t n = shapes.size();
  for (size_t i = 0; i < n; ++i)
    in.push_back(state_roles ? g.add_parameter("p" + std::to_string(i), shapes[i], {})
                             : g.add_input("p" + std::to_string(i), shapes[i]));
  for (size_t i = 0; i < n; ++i) in.push_back(g.add_input("g" + std::to_string(i), shapes[i], grads));
  for (size_t i = 0; i < n; ++i)
    in.push_back(state_roles ? g.add_state("m" + std::to_string(i), shapes[i], {})
                             : g.add_input("m" + std::to_string(i), shapes[i]));
  Attrs a = hyper;
  a.set("count", static_cast<int64_t>(n));
  g.add_node("sgd_update", in, a, "sgd");
  return g;
}

// adamw_update over `shapes`: lr, params p<i>, grads g<i>, moments m<i> and v<i>, the step count,
// and with loss scaling the scale and good-step count.
ir::Graph adamw_graph(const std::vector<Shape>& shapes, const Attrs& hyper, bool state_roles, bool scaling,
                      DType grads = DType::f32) {
  ir::Graph g;
  std::vector<int> in{g.add_input("lr", {1})};
  const size_t n = shapes.size();
  auto param = [&](const std::string& name, const Shape& s) {
    return state_roles ? g.add_parameter(name, s, {}) : g.add_input(name, s);
  };
  auto state = [&](const std::string& name, const Shape& s) {
    return state_roles ? g.add_state(name, s, {}) : g.add_input(name, s);
  };
  for (size_t i = 0; i < n; ++i) in.push_back(param("p" + std::to_string(i), shapes[i]));
  for (size_t i = 0; i < n; ++i) in.push_back(g.add_input("g" + std::to_string(i), shapes[i], grads));
  for (size_t i = 0; i < n; ++i) in.push_back(state("m" + std::to_string(i), shapes[i]));
  for (size_t i = 0; i < n; ++i) in.push_back(state("v" + std::to_string(i), shapes[i]));
  in.push_back(state("step", {1}));
  Attrs a = hyper;
  a.set("count", static_cast<int64_t>(n));
  if (scaling) {
    in.push_back(state("loss_scale", {1}));
    in.push_back(state("good_steps", {1}));
    a.set("loss_scaling", int64_t{1});
    a.set("growth_interval", int64_t{3});
  }
  g.add_node("adamw_update", in, a, "adamw");
  return g;
}

void set_scalar(GraphRunner& r, const ir::Graph& g, const char* name, float v) {
  r.view(g.find_value(name)).as<float>()[0] = v;
}

// The draw made into an AdamW state: second moments non-negative, the step count `step`, the
// rate 0.01; with loss scaling the gradients times 1024 (the scale) and 2 good steps so far, so
// this step doubles the scale.
void adamw_inputs(GraphRunner& r, const ir::Graph& g, size_t n, float step) {
  std::vector<std::string> second, grads;
  for (size_t i = 0; i < n; ++i) {
    second.push_back("v" + std::to_string(i));
    grads.push_back("g" + std::to_string(i));
  }
  map_values(r, g, second, [](double v) { return v * v; });
  set_scalar(r, g, "lr", 0.01f);
  set_scalar(r, g, "step", step);
  if (g.find_value("loss_scale") >= 0) {
    map_values(r, g, grads, [](double v) { return v * 1024; });
    set_scalar(r, g, "loss_scale", 1024.f);
    set_scalar(r, g, "good_steps", 2.f);
  }
}

}  // namespace

void add_linear_loss_sgd_cases(std::vector<OpCase>& cases) {
  // One node a case on small integers, per element.
  struct Linear {
    const char* name;
    int64_t N, I, O;
    bool bias;
  };
  for (const Linear& l : {Linear{"Bias", 8, 20, 10, true}, Linear{"NoBias", 8, 20, 10, false},
                          Linear{"OddSizes", 5, 33, 7, true}, Linear{"SingleSample", 1, 64, 3, false}}) {
    const int64_t N = l.N, I = l.I, O = l.O;
    const bool bias = l.bias;
    auto one = [&](const std::string& op, std::function<ir::Graph(DType)> build) {
      OpCase c = per_element_case(op + "_" + l.name, std::move(build), Fill::SmallInts);
      c.row = Row::Tf32;
      cases.push_back(std::move(c));
    };
    one("linear", [=](DType d) {
      ir::Graph g;
      std::vector<int> in{g.add_input("x", {N, I}, d), g.add_parameter("w", {O, I}, {}, d)};
      if (bias) in.push_back(g.add_parameter("b", {O}, {}, d));
      g.add_node1("linear", in, {}, "fc");
      return g;
    });
    one("linear_backward_data", [=](DType d) {
      ir::Graph g;
      g.add_node1("linear_backward_data", {g.add_input("dy", {N, O}, d), g.add_parameter("w", {O, I}, {}, d)}, {},
                  "fc.dgrad");
      return g;
    });
    one("linear_backward_weight", [=](DType d) {
      ir::Graph g;
      g.add_node("linear_backward_weight", {g.add_input("x", {N, I}, d), g.add_input("dy", {N, O}, d)},
                 {{"has_bias", int64_t{bias}}}, "fc.wgrad");
      return g;
    });
  }
  // Forward and both backward passes in one graph, relative to the tensor's scale.
  struct Dims {
    int64_t N, I, O;
  };
  for (const Dims& d : {Dims{8, 16, 8}, Dims{32, 512, 10}, Dims{256, 2048, 1000}, Dims{5, 24, 40}})
    for (bool bias : {false, true}) {
      std::vector<std::string> outs{"y", "dx", bias ? "wgrad.dw" : "wgrad"};
      if (bias) outs.push_back("wgrad.db");
      OpCase c;
      c.name = "linear_fwd_bwd_N" + std::to_string(d.N) + "_I" + std::to_string(d.I) + "_O" + std::to_string(d.O) +
               (bias ? "_bias" : "");
      c.build = [=](DType t) { return linear_graph(t, d.N, d.I, d.O, bias); };
      c.dtypes = kF32F16;
      c.outputs = outs;
      c.row = Row::Tf32;
      c.seeds = {51};
      cases.push_back(std::move(c));
    }

  // Softmax cross-entropy: wide logits, labels over every class, per element.
  for (const Shape& s : {Shape{6, 10}, Shape{1, 3}, Shape{9, 17}}) {
    const Shape ls{s[0]};
    OpCase fwd = per_element_case(
        "softmax_cross_entropy_" + tag(s),
        [=](DType d) {
          ir::Graph g;
          g.add_node1("softmax_cross_entropy", {g.add_input("logits", s, d), g.add_input("labels", ls, DType::i32)}, {},
                      "loss");
          return g;
        },
        Fill::Uniform);
    OpCase bwd = per_element_case(
        "softmax_cross_entropy_backward_" + tag(s),
        [=](DType d) {
          ir::Graph g;
          g.add_node1(
              "softmax_cross_entropy_backward",
              {g.add_input("logits", s, d), g.add_input("labels", ls, DType::i32), g.add_input("dloss", {1}, d)}, {},
              "loss.backward");
          return g;
        },
        Fill::Uniform);
    fwd.prepare = bwd.prepare = wide_logits_any_label;
    cases.push_back(std::move(fwd));
    cases.push_back(std::move(bwd));
    // With label smoothing (ε = 0.1): the row sums and the ε/K share.
    OpCase smooth = per_element_case(
        "softmax_cross_entropy_smoothed_" + tag(s),
        [=](DType d) {
          ir::Graph g;
          const int logits = g.add_input("logits", s, d), labels = g.add_input("labels", ls, DType::i32);
          const ir::Attrs eps{{"label_smoothing", 0.1}};
          g.add_node1("softmax_cross_entropy", {logits, labels}, eps, "loss");
          g.add_node1("softmax_cross_entropy_backward", {logits, labels, g.add_input("dloss", {1}, d)}, eps,
                      "loss.backward");
          return g;
        },
        Fill::Uniform);
    smooth.prepare = wide_logits_any_label;
    cases.push_back(std::move(smooth));
  }
  for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {7, 10}, {256, 10}, {33, 1000}, {3, 5003}}) {
    OpCase c;
    c.name = "softmax_cross_entropy_fwd_bwd_N" + std::to_string(N) + "_K" + std::to_string(K);
    c.build = [N = N, K = K](DType d) { return loss_graph(d, N, K); };
    c.dtypes = kF32F16;
    c.outputs = {"loss", "dlogits"};
    c.seeds = {31};
    cases.push_back(std::move(c));
  }

  // sgd_update: lr 0.1, three small tensors, in place and into separate buffers.
  for (int64_t nesterov : {0, 1})
    for (bool separate : {false, true}) {
      const Attrs hyper{{"momentum", 0.9}, {"weight_decay", 1e-2}, {"nesterov", nesterov}};
      OpCase c = per_element_case(
          std::string("sgd_update_small") + (nesterov ? "_nesterov" : "") + (separate ? "_separate" : ""),
          [=](DType) {
            return sgd_graph({{3, 4}, {5}, {2, 3, 3, 2}}, hyper, false);
          },
          Fill::Uniform);
      c.prepare = [](GraphRunner& r, const ir::Graph& g) { r.view(g.find_value("lr")).as<float>()[0] = 0.1f; };
      c.separate_outputs = separate;
      cases.push_back(std::move(c));
    }
  // Parameters of odd sizes (as the planner lays them out: parameters, inputs, state), with and
  // without momentum, weight decay and Nesterov.
  const std::vector<Shape> params = {{3}, {10, 3, 3, 3}, {64}, {1000, 7}, {5}};
  std::vector<std::string> updated;
  for (size_t i = 0; i < params.size(); ++i) {
    updated.push_back("p" + std::to_string(i));
    updated.push_back("m" + std::to_string(i));
  }
  const std::pair<const char*, Attrs> hypers[] = {
      {"plain", {{"momentum", 0.0}, {"weight_decay", 0.0}, {"nesterov", int64_t{0}}}},
      {"momentum", {{"momentum", 0.9}, {"weight_decay", 5e-4}, {"nesterov", int64_t{0}}}},
      {"nesterov", {{"momentum", 0.9}, {"weight_decay", 1e-4}, {"nesterov", int64_t{1}}}},
  };
  for (const auto& [name, attrs] : hypers) {
    const Attrs hyper = attrs;
    OpCase c;
    c.name = std::string("sgd_update_tensor_table_") + name;
    c.build = [=](DType) { return sgd_graph(params, hyper, true); };
    c.outputs = updated;
    c.seeds = {41};
    cases.push_back(std::move(c));
  }

  // adamw_update: three small tensors at the first step (bias correction 1 − β^1) and at the
  // fifth, in place and into separate buffers; then loss-scaled steps, one of them overflowed
  // (an inf gradient: nothing but the scale changes).
  const std::vector<Shape> small = {{3, 4}, {5}, {2, 3, 3, 2}};
  for (float step : {0.f, 4.f})
    for (bool separate : {false, true}) {
      const Attrs hyper{{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}};
      OpCase c = per_element_case(std::string("adamw_update_small_step") + std::to_string(int(step) + 1) +
                                      (separate ? "_separate" : ""),
                                  [=](DType) { return adamw_graph(small, hyper, false, false); });
      c.prepare = [=](GraphRunner& r, const ir::Graph& g) { adamw_inputs(r, g, small.size(), step); };
      c.separate_outputs = separate;
      cases.push_back(std::move(c));
    }
  for (bool overflow : {false, true}) {
    const Attrs hyper{{"beta1", 0.8}, {"beta2", 0.99}, {"eps", 1e-6}, {"weight_decay", 0.1}};
    OpCase c = per_element_case(std::string("adamw_update_loss_scaled") + (overflow ? "_overflow" : ""),
                                [=](DType) { return adamw_graph(small, hyper, false, true); });
    c.prepare = [=](GraphRunner& r, const ir::Graph& g) {
      adamw_inputs(r, g, small.size(), 2);
      if (overflow) r.view(g.find_value("g1")).as<float>()[3] = std::numeric_limits<float>::infinity();
    };
    cases.push_back(std::move(c));
  }
  // Gradients in f16 and bf16 beside the f32 parameters (fold_gradient_cast), against the same
  // step reading their f32 values: SGD in place and over the tensor table, AdamW loss-scaled with
  // and without an overflow (an inf in f16). cuda's form (the cpu backend keeps f32 gradients).
  for (bool table : {false, true}) {
    const Attrs hyper{{"momentum", 0.9}, {"weight_decay", 5e-4}, {"nesterov", int64_t{0}}};
    OpCase c;
    c.name = std::string("sgd_update_narrow_gradients") + (table ? "_tensor_table" : "");
    c.build = [=](DType d) { return table ? sgd_graph(params, hyper, true, d) : sgd_graph(small, hyper, false, d); };
    c.dtypes = {DType::f16, DType::bf16};
    if (table) c.outputs = updated;
    c.prepare = [](GraphRunner& r, const ir::Graph& g) { r.view(g.find_value("lr")).as<float>()[0] = 0.1f; };
    c.measure = Measure::PerElement;
    c.backends = {"cuda"};
    cases.push_back(std::move(c));
  }
  for (bool overflow : {false, true}) {
    const Attrs hyper{{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}};
    OpCase c = per_element_case(std::string("adamw_update_narrow_gradients_loss_scaled") + (overflow ? "_overflow" : ""),
                                [=](DType d) { return adamw_graph(small, hyper, false, true, d); });
    c.dtypes = {DType::f16, DType::bf16};
    c.prepare = [=](GraphRunner& r, const ir::Graph& g) {
      adamw_inputs(r, g, small.size(), 2);
      if (!overflow) return;
      TensorView g1 = r.view(g.find_value("g1"));
      g1.as<uint16_t>()[3] = g1.dtype == DType::f16 ? 0x7c00 : 0x7f80;  // +inf
    };
    c.backends = {"cuda"};
    cases.push_back(std::move(c));
  }
  // Parameters of odd sizes laid out by the planner (parameters, inputs, state): the tensor table.
  std::vector<std::string> adamw_updated{"step"};
  for (size_t i = 0; i < params.size(); ++i)
    for (const char* s : {"p", "m", "v"}) adamw_updated.push_back(s + std::to_string(i));
  {
    const Attrs hyper{{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.05}};
    OpCase c;
    c.name = "adamw_update_tensor_table";
    c.build = [=](DType) { return adamw_graph(params, hyper, true, false); };
    c.prepare = [=](GraphRunner& r, const ir::Graph& g) { adamw_inputs(r, g, params.size(), 1); };
    c.outputs = adamw_updated;
    c.seeds = {41};
    cases.push_back(std::move(c));
  }
  // The overflow check over the tensor table, loss-scaled: an inf deep inside the 7,000-element
  // gradient (in the 16-byte vectors the check reads) or a NaN among the last elements of the
  // 270-element one (read one by one). Either skips the step: only the scale and the good-step
  // count change. f32 gradients, and f16/bf16 ones (cuda's form).
  for (const bool narrow : {false, true})
    for (const bool nan_in_tail : {false, true}) {
      const Attrs hyper{{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.05}};
      OpCase c;
      c.name = std::string("adamw_update_tensor_table_") + (nan_in_tail ? "nan_in_tail" : "inf_inside") +
               (narrow ? "_narrow_gradients" : "");
      c.build = [=](DType d) { return adamw_graph(params, hyper, true, true, narrow ? d : DType::f32); };
      c.prepare = [=](GraphRunner& r, const ir::Graph& g) {
        adamw_inputs(r, g, params.size(), 1);
        TensorView grad = r.view(g.find_value(nan_in_tail ? "g1" : "g3"));
        const int64_t at = nan_in_tail ? 268 : 4003;
        if (grad.dtype == DType::f32)
          grad.as<float>()[at] = nan_in_tail ? std::numeric_limits<float>::quiet_NaN()
                                             : std::numeric_limits<float>::infinity();
        else if (grad.dtype == DType::f16)
          grad.as<uint16_t>()[at] = nan_in_tail ? 0x7e00 : 0x7c00;
        else
          grad.as<uint16_t>()[at] = nan_in_tail ? 0x7fc0 : 0x7f80;
      };
      c.outputs = adamw_updated;
      c.outputs.push_back("loss_scale");
      c.outputs.push_back("good_steps");
      c.seeds = {43};
      if (narrow) {
        c.dtypes = {DType::f16, DType::bf16};
        c.backends = {"cuda"};
      }
      cases.push_back(std::move(c));
    }
}

}  // namespace trident::test_support::op_family
