// Long sequences on the CUDA kernels against the reference: every compared tensor must pass, and
// the worst error over tolerance per class is printed. These runs are the measurement behind
// docs/tolerances.md "Mamba-2" and "PLE output" (how much of each FP32 limit the kernels use, at
// which row).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "tests/cuda_test_support.h"

namespace ssm::test {
namespace {

using Param = std::tuple<std::string, HMode, double>;  // preset, mode, decay

// 6 prefilled rows, then 160 rows of decodes and verified-and-committed drafts: long enough that
// the state's carried error is at its plateau (decay 0: no forgetting, the worst case).
std::string long_script() {
  std::string s = "alloc; prefill 6; checkpoint";
  for (int i = 0; i < 20; ++i) s += "; decode; decode; decode; decode; verify 4; commit 4 4";
  return s;
}

class MarginsGpu : public GpuTestP<Param> {};

TEST_P(MarginsGpu, LongSequencesStayWithinTheClasses) {
  GpuCase c;
  c.preset = std::get<0>(GetParam());
  c.layers = c.preset == "nemotron-h-8b" ? 1 : 0;
  c.mode = std::get<1>(GetParam());
  c.decay = std::get<2>(GetParam());
  c.seed = 5;
  c.slots = 1;
  c.capacity = 4;
  std::printf("gpu case: %s\n", c.name().c_str());
  const fuzz::ReplayResult r = fuzz::check_script(
      c.config(), parse_script(long_script()), [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); },
      [] { return std::unique_ptr<Backend>(new cuda::CudaBackend()); }, cmp::Tolerances::defaults(),
      cmp::Strictness::classes);
  ASSERT_TRUE(r.pass) << r.report.substr(0, 6000);
  ASSERT_GT(r.margins.size(), 160u);
  std::map<std::string, const cmp::TensorMargin*> worst;  // per class and tensor family
  for (const cmp::TensorMargin& m : r.margins) {
    const std::string field = m.where.tensor.substr(0, m.where.tensor.find('['));
    const std::string key = std::string(cmp::to_string(m.cls)) + " " + field;
    if (!worst.count(key) || m.error_ratio > worst[key]->error_ratio) worst[key] = &m;
  }
  for (const auto& [key, m] : worst)
    std::printf("  worst %-28s %.3f of its tolerance at op %d (%s)\n", key.c_str(), m->error_ratio,
                m->where.op_index, m->where.op.c_str());
}

std::vector<Param> params() {
  std::vector<Param> v;
  for (const char* p : {"nemotron-h-8b", "mamba-odd-a", "mamba-odd-b", "mamba-odd-c"})
    for (HMode m : {HMode::f32, HMode::f16})
      for (double decay : {0.0, 0.5}) v.emplace_back(p, m, decay);
  // the PLE output (its carried rows are copies: exact); 166 rows cross every conv tap many times
  for (const char* p : {"ple-tiny", "ple-odd"}) v.emplace_back(p, HMode::f32, 0.5);
  return v;
}

std::string param_name(const ::testing::TestParamInfo<Param>& i) {
  return gtest_name(std::get<0>(i.param) + "_" + to_string(std::get<1>(i.param)) + "_decay" +
                  std::to_string(int(std::get<2>(i.param) * 10)));
}

INSTANTIATE_TEST_SUITE_P(Presets, MarginsGpu, ::testing::ValuesIn(params()), param_name);

}  // namespace
}  // namespace ssm::test
