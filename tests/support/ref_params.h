// Parameter grid of the reference's metamorphic tests: small odd presets x h modes x seeds.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "core/model.h"

namespace ssm::test {

using RefParam = std::tuple<std::string, HMode, uint64_t>;

inline auto ref_grid() {
  return ::testing::Combine(::testing::Values("tiny", "odd-a", "odd-b", "odd-c", "odd-d"),
                            ::testing::Values(HMode::f32, HMode::f16, HMode::f16_pool),
                            ::testing::Values(uint64_t(11), uint64_t(2024)));
}

inline std::string ref_param_name(const ::testing::TestParamInfo<RefParam>& info) {
  std::string s = std::get<0>(info.param) + "_" + to_string(std::get<1>(info.param)) + "_seed" +
                  std::to_string(std::get<2>(info.param));
  for (char& c : s)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

}  // namespace ssm::test
