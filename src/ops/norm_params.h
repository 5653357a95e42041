// The attributes of a normalisation, typed once: eps (batch and layer norm) and momentum (batch
// norm's running statistics), with their defaults and checks. Every op, pass, exporter and kernel
// reads them through NormParams::of and copies them with copy_to, so no file spells the names or
// the defaults again and a fused node carries exactly what its batch norm had.
#pragma once
#include <cmath>

#include "core/error.h"
#include "ir/graph.h"

namespace trident::ops {

struct NormParams {
  static constexpr double kDefaultEps = 1e-5, kDefaultMomentum = 0.1;
  double eps = kDefaultEps;
  double momentum = kDefaultMomentum;  // running = (1 − momentum)·running + momentum·batch

  static NormParams of(const ir::Node& n) {
    NormParams p;
    p.eps = n.attrs.f("eps", kDefaultEps);
    p.momentum = n.attrs.f("momentum", kDefaultMomentum);
    return p;
  }
  // Throws the sentence a node's validation gives for values no normalisation can take.
  void check() const {
    if (!(eps > 0) || !std::isfinite(eps)) throw Error("attribute 'eps' must be positive and finite");
    if (!(momentum >= 0 && momentum <= 1)) throw Error("attribute 'momentum' must lie in [0, 1]");
  }
  void copy_to(ir::Attrs& a) const {
    a.set("eps", eps);
    a.set("momentum", momentum);
  }
  void copy_eps_to(ir::Attrs& a) const { a.set("eps", eps); }  // ops without running statistics
};

}  // namespace trident::ops
