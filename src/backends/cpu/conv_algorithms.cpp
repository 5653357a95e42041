// The choice between oneDNN's implementations of an inference convolution (see the header):
// candidates from oneDNN's own list, timed on zero-filled scratch tensors the way the kernel
// will run them (with the reorders a blocked layout costs), once per signature.
#include "backends/cpu/conv_algorithms.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <vector>

#include "backends/cpu/plan_cache.h"

namespace trident::cpu {

namespace {

using dnnl::algorithm;

// The convolutions Winograd's F(m,3) transforms compute: a 3x3 window, unit stride, no
// dilation, one group. oneDNN decides the rest (instruction set, padding, channel counts).
bool winograd_shape(const ConvSetup& s) {
  const DnnlWindow& g = s.geom;
  return s.groups == 1 && s.kernel_h == 3 && s.kernel_w == 3 && g.strides == Dims{1, 1} &&
         g.dilates == Dims{0, 0};
}

// One implementation: the algorithm and its position in oneDNN's list for the descriptor.
struct Candidate {
  algorithm alg;
  int position = 0;
  std::string impl;
  bool winograd() const { return alg == algorithm::convolution_winograd; }
  std::string name() const { return std::string(winograd() ? "winograd (" : "direct (") + impl + ")"; }
};

// Up to `most` implementations of `alg` in oneDNN's order, without its reference loops.
std::vector<Candidate> candidates(const ConvSetup& s, const ConvPostOps& post, algorithm alg,
                                  size_t most) {
  std::vector<Candidate> out;
  try {
    walk_forward_implementations(
        s, dnnl::prop_kind::forward_inference, post_ops_attr(post), alg,
        [&](const dnnl::convolution_forward::primitive_desc& pd, int position) {
          std::string impl = pd.impl_info_str();
          if (impl.rfind("ref", 0) != 0) out.push_back({alg, position, std::move(impl)});
          return out.size() < most;
        });
  } catch (const dnnl::error&) {
    // no implementation of this algorithm for the convolution on this machine
  }
  return out;
}

std::string candidate_key(const std::string& key, const Candidate& c) {
  return key + (c.winograd() ? "|winograd#" : "|direct#") + std::to_string(c.position);
}

CachedPrimitive build(const ConvSetup& s, const ConvPostOps& post, const std::string& key,
                      const Candidate& c) {
  return OnednnContext::instance().get(candidate_key(key, c), [&] {
    return forward_pd(s, dnnl::prop_kind::forward_inference, post_ops_attr(post), c.alg, c.position);
  });
}

// ---- timing ----

// One primitive run with its arguments, outside any kernel.
struct TrialStep {
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
};

memory zeroed(const memory::desc& md) {
  memory m(md, OnednnContext::instance().engine());
  std::memset(m.get_data_handle(), 0, md.get_size());
  return m;
}

double run_trial(std::vector<TrialStep>& steps) {
  dnnl::stream& stream = OnednnContext::instance().stream();
  const auto t0 = std::chrono::steady_clock::now();
  for (TrialStep& t : steps) t.prim.execute(stream, t.args);
  stream.wait();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The candidate as its kernel would run it: on the NHWC tensors, or (blocked) with the
// reorders into and out of its own layout.
// The NHWC input and output `x`, `y` are shared by every candidate's trial.
std::vector<TrialStep> trial(const ConvSetup& s, const CachedPrimitive& p, const std::string& key,
                             bool blocked, bool sum, const memory& x, const memory& y) {
  std::unordered_map<int, memory> args{{DNNL_ARG_WEIGHTS, zeroed(p.pd.weights_desc())}};
  if (s.bias.get_size() > 0) args[DNNL_ARG_BIAS] = zeroed(s.bias);
  if (p.pd.scratchpad_desc().get_size() > 0) args[DNNL_ARG_SCRATCHPAD] = zeroed(p.pd.scratchpad_desc());
  if (!blocked) {
    args[DNNL_ARG_SRC] = x;
    args[DNNL_ARG_DST] = y;
    return {{p.prim, std::move(args)}};
  }
  const memory xb = zeroed(p.pd.src_desc()), yb = zeroed(p.pd.dst_desc());
  args[DNNL_ARG_SRC] = xb;
  args[DNNL_ARG_DST] = yb;
  std::vector<TrialStep> steps;
  steps.push_back({reorder_primitive(key + ".src", s.src, xb.get_desc()).prim,
                   {{DNNL_ARG_FROM, x}, {DNNL_ARG_TO, xb}}});
  if (sum)
    steps.push_back({reorder_primitive(key + ".acc", s.dst, yb.get_desc()).prim,
                     {{DNNL_ARG_FROM, y}, {DNNL_ARG_TO, yb}}});
  steps.push_back({p.prim, std::move(args)});
  steps.push_back({reorder_primitive(key + ".dst", yb.get_desc(), s.dst).prim,
                   {{DNNL_ARG_FROM, yb}, {DNNL_ARG_TO, y}}});
  return steps;
}

// Times every candidate: one warm-up run each (a candidate over twice the fastest warm-up is
// dropped), then the best of several rounds that alternate between the candidates, so that
// the machine's load affects them alike. Returns the chosen index and the note for explain.
TimedChoice time_candidates(const ConvSetup& s, const ConvPostOps& post, const std::string& key,
                            const std::vector<Candidate>& cands) {
  std::vector<std::vector<TrialStep>> trials;
  std::vector<double> best;
  const memory x = zeroed(s.src), y = zeroed(s.dst);
  for (const Candidate& c : cands) {
    const std::string ckey = candidate_key(key, c);
    trials.push_back(trial(s, build(s, post, key, c), ckey, c.winograd(), post.sum, x, y));
    best.push_back(run_trial(trials.back()));
  }
  const double fastest_warmup = *std::min_element(best.begin(), best.end());
  std::vector<bool> timed(cands.size());
  for (size_t i = 0; i < cands.size(); ++i) timed[i] = best[i] <= 2 * fastest_warmup;
  // Small convolutions get more rounds (a best of many is steadier on a busy machine); about
  // 40 ms per candidate, between 2 and 10 rounds.
  const int rounds = std::clamp(static_cast<int>(40.0 / std::max(fastest_warmup, 1e-3)), 2, 10);
  for (int round = 0; round < rounds; ++round)
    for (size_t i = 0; i < cands.size(); ++i)
      if (timed[i]) best[i] = std::min(round == 0 ? 1e300 : best[i], run_trial(trials[i]));
  // The fastest direct implementation, unless a Winograd one beats it by 5 %.
  size_t choice = cands.size();
  for (size_t i = 0; i < cands.size(); ++i)
    if (timed[i] && !cands[i].winograd() && (choice == cands.size() || best[i] < best[choice])) choice = i;
  for (size_t i = 0; i < cands.size(); ++i)
    if (timed[i] && cands[i].winograd() &&
        (choice == cands.size() ||
         best[i] < (cands[choice].winograd() ? 1.0 : 0.95) * best[choice]))
      choice = i;
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.3f ms", best[choice]);
  std::string note = cands[choice].name() + ", timed " + ms;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (i == choice) continue;
    std::snprintf(ms, sizeof ms, timed[i] ? "%.3f ms" : "%.3f ms (warm-up)", best[i]);
    note += "; " + cands[i].name() + " " + ms;
  }
  return {static_cast<int>(choice), note};
}

// The bytes time_candidates allocates for `cands`: the shared input and output, and each
// candidate's weights, bias, scratchpad and blocked copies.
uint64_t trial_footprint(const ConvSetup& s, const ConvPostOps& post, const std::string& key,
                         const std::vector<Candidate>& cands) {
  uint64_t bytes = s.src.get_size() + s.dst.get_size();
  for (const Candidate& c : cands) {
    const CachedPrimitive p = build(s, post, key, c);
    bytes += p.pd.weights_desc().get_size() + s.bias.get_size() + p.pd.scratchpad_desc().get_size();
    if (c.winograd()) bytes += p.pd.src_desc().get_size() + p.pd.dst_desc().get_size();
  }
  return bytes;
}

// What a timed choice among `cands` is keyed by: the convolution and the candidates in order.
std::string candidates_key(const std::string& key, const std::vector<Candidate>& cands) {
  std::string out = key + "|candidates";
  for (const Candidate& c : cands) out += "," + candidate_key("", c);
  return out;
}

}  // namespace

ConvPlan plan_inference_conv(const ConvSetup& s, const ConvPostOps& post, const std::string& key,
                             int winograd, bool autotune, uint64_t trial_bytes, const std::string& plan_cache_dir) {
  // Winograd is a candidate when requested, or when automatic and timed.
  std::vector<Candidate> cands;
  if ((winograd == 1 || (winograd < 0 && autotune)) && winograd_shape(s))
    cands = candidates(s, post, algorithm::convolution_winograd, autotune ? 4 : 1);
  const bool only_winograd = winograd == 1 && !cands.empty();
  if (!only_winograd) {
    // oneDNN's first two implementations of the direct algorithm (e.g. brgconv and jit).
    std::vector<Candidate> direct = candidates(s, post, algorithm::convolution_direct, autotune ? 2 : 1);
    cands.insert(cands.begin(), direct.begin(), direct.end());
  }
  if (cands.empty()) throw dnnl::error(dnnl_unimplemented, "no convolution implementation");
  TimedChoice choice{0, only_winograd ? cands[0].name() + ", as requested" : std::string()};
  // Chosen on this machine by an earlier run, among the same candidates, and not yet in this
  // one: taken untimed.
  const std::string persisted = OnednnContext::with_thread_count(candidates_key(key, cands));
  if (autotune && cands.size() > 1 && !OnednnContext::instance().known_choice(candidates_key(key, cands))) {
    const std::optional<TimedChoice> known = cached_choice(plan_cache_dir, persisted);
    if (known && known->index < static_cast<int>(cands.size())) {
      const Candidate& c = cands[static_cast<size_t>(known->index)];
      return {build(s, post, key, c), candidate_key(key, c), c.winograd(), known->note + "; from the plan cache"};
    }
  }
  std::string left_out;
  while (autotune && cands.size() > 1 && trial_footprint(s, post, key, cands) > trial_bytes) {
    left_out += (left_out.empty() ? "" : ", ") + cands.back().name();
    cands.pop_back();
  }
  if (!left_out.empty()) {
    left_out = "; not timed for lack of memory: " + left_out;
    if (cands.size() == 1) choice.note = cands[0].name() + left_out;
  }
  if (autotune && cands.size() > 1) {
    choice = OnednnContext::instance().choice(candidates_key(key, cands),
                                              [&] { return time_candidates(s, post, key, cands); });
    if (left_out.empty()) store_choice(plan_cache_dir, persisted, choice);  // timed among them all
    choice.note += left_out;
  }
  const Candidate& c = cands[static_cast<size_t>(choice.index)];
  return {build(s, post, key, c), candidate_key(key, c), c.winograd(), choice.note};
}

}  // namespace trident::cpu
