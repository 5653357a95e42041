// Test support: two executables of one f32 classifier (a pass on and off) trained side by side
// from the same parameters, images and labels; every loss, parameter, momentum and running
// statistic must be equal bit for bit. For passes that change where arithmetic happens, not
// what it computes.
#pragma once
#include <gtest/gtest.h>

#include <cstring>

#include "core/random.h"
#include "runtime/executable.h"

namespace trident::test_support {

inline void expect_bitwise_same_steps(runtime::Executable& a, runtime::Executable& b, int steps, int64_t classes) {
  for (runtime::Executable* exe : {&a, &b}) {
    exe->init_parameters(3);
    Rng r(2);
    TensorView img = exe->find("images"), lab = exe->find("labels");
    for (int64_t i = 0; i < img.numel(); ++i) img.as<float>()[i] = static_cast<float>(r.uniform(-1, 1));
    for (int64_t i = 0; i < lab.numel(); ++i) lab.as<int32_t>()[i] = static_cast<int32_t>(i % classes);
    exe->find("lr").as<float>()[0] = 0.05f;
  }
  for (int step = 0; step < steps; ++step) {
    a.run();
    b.run();
    EXPECT_EQ(a.view(a.loss()).as<float>()[0], b.view(b.loss()).as<float>()[0]) << "loss of step " << step;
  }
  int compared = 0;
  for (int v = 0; v < b.graph().num_values(); ++v) {
    const ir::Value& val = b.graph().value(v);
    if (val.role != ir::ValueRole::Parameter && val.role != ir::ValueRole::State) continue;
    TensorView want = b.view(v), got = a.find(val.name);
    ASSERT_EQ(want.bytes(), got.bytes()) << val.name;
    EXPECT_EQ(std::memcmp(want.data, got.data, want.bytes()), 0) << val.name;
    ++compared;
  }
  EXPECT_GT(compared, 10);
}

}  // namespace trident::test_support
