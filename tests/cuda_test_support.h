// Support for the gpu tests: the device-or-skip fixture, a case (preset, pool, seed) printed as
// one string, and a driver that runs one op script on the reference and the CUDA backend side by
// side, comparing outputs and every live sequence's state after every op.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "compare/compare.h"
#include "core/errors.h"
#include "core/runner.h"
#include "cuda/cuda_backend.h"
#include "fixtures/case_config.h"
#include "fixtures/generators.h"
#include "fuzz/campaign.h"
#include "reference/reference_backend.h"
#include "tests/support/ctest_gpu.h"

namespace ssm::test {

// Skips (or, with SSMCHECK_REQUIRE_GPU=1, fails) when no CUDA device is usable.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda::device_available(&why)) return;
    const char* req = std::getenv("SSMCHECK_REQUIRE_GPU");
    if (req && std::string(req) == "1") FAIL() << "SSMCHECK_REQUIRE_GPU=1: " << why;
    GTEST_SKIP() << why;
  }
};

template <typename P>
class GpuTestP : public GpuTest, public ::testing::WithParamInterface<P> {};

struct GpuCase {
  std::string preset = "tiny";
  int layers = 0;
  HMode mode = HMode::f32;
  uint64_t seed = 1;
  int slots = 3;
  int capacity = 4;
  double decay = 0.5;

  ModelSpec spec() const { return make_preset(preset, layers); }
  GenConfig gen() const {
    GenConfig g;
    g.seed = seed;
    g.decay = decay;
    return g;
  }
  Model model() const { return make_model(spec(), gen()); }
  PoolConfig pool() const {
    PoolConfig p;
    p.h_mode = mode;
    p.max_slots = slots;
    p.conv_capacity = capacity;
    p.h_capacity.assign(size_t(slots), capacity);
    return p;
  }
  CaseConfig config() const {
    CaseConfig c;
    c.preset = preset;
    c.layers = layers;
    c.h_mode = mode;
    c.slots = slots;
    c.capacity = {capacity};
    c.conv_capacity = capacity;
    c.gen = gen();
    return c;
  }
  // The flags that rebuild this case with the ssmcheck CLI.
  std::string name() const {
    std::ostringstream s;
    s << "--preset " << preset;
    if (layers) s << " --layers " << layers;
    s << " --h-mode " << to_string(mode) << " --slots " << slots << " --capacity " << capacity
      << " --conv-capacity " << capacity << " --seed " << seed << " --decay " << decay;
    return s.str();
  }
};

inline std::string state_report(const cmp::StateReport& r) {
  std::string s = r.text();
  return s.size() > 6000 ? s.substr(0, 6000) + "\n..." : s;
}

// Runs `script` through the reference and the CUDA backend in lockstep (fuzz/lockstep.h):
// error kinds must agree; outputs of real rows and the state of every live sequence are
// compared after every op under the default tolerance classes, and the guard bands of every
// device allocation are checked after every op.
inline void run_pair(const GpuCase& c, const std::string& script) {
  SCOPED_TRACE("case: " + c.name() + " script: " + script);
  std::printf("gpu case: %s seed=%llu\n", c.name().c_str(), static_cast<unsigned long long>(c.seed));
  const fuzz::ReplayResult r = fuzz::check_script(
      c.config(), parse_script(script), [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); },
      [] { return std::unique_ptr<Backend>(new cuda::CudaBackend()); }, cmp::Tolerances::defaults(),
      cmp::Strictness::classes, "", [](Backend& b) { return static_cast<cuda::CudaBackend&>(b).check_guards(); });
  ASSERT_TRUE(r.pass) << c.name() << "\n" << (r.report.size() > 6000 ? r.report.substr(0, 6000) : r.report);
}

// Two CUDA backends on the same case.
struct GpuPair {
  GpuCase c;
  ModelSpec spec;
  std::unique_ptr<cuda::CudaBackend> a = std::make_unique<cuda::CudaBackend>();
  std::unique_ptr<cuda::CudaBackend> b = std::make_unique<cuda::CudaBackend>();
  explicit GpuPair(const GpuCase& cc) : c(cc), spec(cc.spec()) {
    const Model m = c.model();
    a->create_pool(m, c.pool());
    b->create_pool(m, c.pool());
  }
  StepInputs inputs(int op, int seq, int rows) const { return make_inputs(spec, c.gen(), op, seq, 0, rows); }
};

// A GoogleTest parameter name from printable parts: every character that is not a letter or a
// digit becomes '_' ("odd-a" "f16-pool" -> "odd_a_f16_pool").
inline std::string gtest_name(std::string s) {
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

inline cmp::StateReport bitwise_state(const SequenceState& x, const SequenceState& y, const std::string& what) {
  cmp::Where w;
  w.op = what;
  return cmp::compare_state(x, y, cmp::Tolerances::defaults(), w, cmp::Strictness::bitwise);
}

// Bitwise equality of two output sets (rows [0, count) of `got` against `ref` rows [first, ..)),
// the PLE outputs included.
inline std::string outputs_diff(const StepOutputs& ref, int first, const StepOutputs& got) {
  auto diff = [&](const std::vector<std::vector<float>>& rv, const std::vector<std::vector<float>>& gv,
                  const char* what) -> std::string {
    if (rv.size() != gv.size()) return std::string(what) + ": layer counts differ";
    for (size_t l = 0; l < gv.size(); ++l) {
      const size_t width = rv[l].size() / size_t(ref.rows);
      if (gv[l].size() + size_t(first) * width > rv[l].size())
        return std::string(what) + " layer " + std::to_string(l) + ": sizes differ";
      for (size_t i = 0; i < gv[l].size(); ++i) {
        const float r = rv[l][size_t(first) * width + i], g = gv[l][i];
        if (std::memcmp(&r, &g, 4) != 0)
          return std::string(what) + " layer " + std::to_string(l) + " element " + std::to_string(i) + ": " +
                 std::to_string(r) + " vs " + std::to_string(g);
      }
    }
    return "";
  };
  const std::string d = diff(ref.layers, got.layers, "output");
  return d.empty() ? diff(ref.ple, got.ple, "ple_output") : d;
}

}  // namespace ssm::test
