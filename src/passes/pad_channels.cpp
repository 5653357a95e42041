// pad_channels: convolutions whose input channels do not fill 16-byte vectors (the 3-channel
// image, odd widths) read zero-padded copies of their input and weight instead, so cuDNN can
// use its vectorised tensor-core kernels; the extra channels multiply zeros, so every output
// is unchanged. The copies are resize_channels nodes, whose backward drops the padding again:
// gradients, checkpoints and outputs keep the user's shapes. On by default for the cuda
// backend (CompileOptions::channel_padding); training runs it before autodiff.
#include <map>

#include "ir/op_registry.h"
#include "passes/pass.h"

namespace trident::passes {

namespace {

bool reads_conv_input(const std::string& op) {
  return op == "conv2d" || op == "conv2d_epilogue" || op == "cbr" || op == "cbar";
}

}  // namespace

void pad_channels(ir::Graph& g, PassContext& ctx) {
  if (!ctx.options.pads_channels()) return;
  std::map<int, int> padded;  // value → its padded copy (a shared input is padded once)
  std::vector<int> order;
  const std::vector<int> before = g.order();  // a copy: add_node appends to the order
  for (int nid : before) {
    const ir::Node& n = g.node(nid);
    if (reads_conv_input(n.op) && n.attrs.i("groups", 1) == 1 && n.inputs.size() >= 2) {
      const ir::Value& x = g.value(n.inputs[0]);
      const int64_t vector = 16 / static_cast<int64_t>(dtype_size(x.dtype));
      const int64_t c = x.shape.empty() ? 0 : x.shape.back();
      if (c > 0 && c % vector != 0) {
        const int64_t to = (c + vector - 1) / vector * vector;
        for (size_t i : {size_t{0}, size_t{1}}) {
          const int v = g.node(nid).inputs[i];
          auto it = padded.find(v);
          if (it == padded.end()) {
            const int p = g.add_node1("resize_channels", {v}, {{"channels", to}},
                                      g.value(v).name + ".pad" + std::to_string(to));
            order.push_back(g.num_nodes() - 1);
            it = padded.emplace(v, p).first;
          }
          g.node(nid).inputs[i] = it->second;
        }
      }
    }
    order.push_back(nid);
  }
  g.set_order(std::move(order));
}

}  // namespace trident::passes
