// Golden and faulty traces of GDN models replayed on the CUDA backend (gpu label; the Mamba-2 and
// mixed traces are the reference's, replayed by the cpu tests): golden ones must agree under
// the tolerance classes, faulty ones must be pinpointed at their documented op, layer and tensor.
// Skips with the reason where no device is usable (fails instead with SSMCHECK_REQUIRE_GPU=1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "cuda/cuda_backend.h"
#include "formats/trace.h"
#include "tests/cuda_test_support.h"
#include "replay/replay.h"

namespace ssm::test {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> traces(const std::string& dir) {
  std::vector<std::string> v;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".h5") v.push_back(e.path().string());
  std::sort(v.begin(), v.end());
  return v;
}

// The traces whose every layer CUDA runs (GDN): the others (Mamba-2, mixed) are the reference's.
std::vector<cmp::Trace> cuda_traces(const std::string& dir) {
  std::vector<cmp::Trace> v;
  for (const std::string& p : traces(dir)) {
    cmp::Trace t = cmp::read_trace(p);
    const auto& layers = t.header.model.spec.layers;
    if (std::all_of(layers.begin(), layers.end(), [](const LayerSpec& l) { return l.kind == LayerKind::gdn; }))
      v.push_back(std::move(t));
  }
  return v;
}

class TraceGpu : public GpuTest {
 protected:
  // SSMCHECK_FIXTURES_DIR in the environment points a packed binary at the fixtures it carries
  const std::string dir_ = std::string(std::getenv("SSMCHECK_FIXTURES_DIR") ? std::getenv("SSMCHECK_FIXTURES_DIR")
                                                                           : SSMCHECK_FIXTURES_DIR) +
                           "/traces";
};

TEST_F(TraceGpu, GoldenTracesReplayOnCuda) {
  const auto files = cuda_traces(dir_);
  ASSERT_FALSE(files.empty()) << "no GDN golden traces in " << dir_;
  for (const cmp::Trace& t : files) {
    const std::string& p = t.source;
    SCOPED_TRACE(p);
    cuda::CudaBackend b;
    const replay::ReplayResult r = replay::replay_trace(t, b);
    EXPECT_TRUE(r.pass()) << p << "\n" << r.text();
    EXPECT_EQ(b.check_guards(), "");
  }
}

TEST_F(TraceGpu, FaultyTracesArePinpointedOnCuda) {
  const auto files = cuda_traces(dir_ + "/faulty");
  ASSERT_FALSE(files.empty()) << "no GDN faulty traces in " << dir_ << "/faulty";
  for (const cmp::Trace& t : files) {
    SCOPED_TRACE(t.source);
    ASSERT_TRUE(t.header.expect.has_value());
    cuda::CudaBackend b;
    const replay::ReplayResult r = replay::replay_trace(t, b);
    ASSERT_FALSE(r.pass());
    EXPECT_TRUE(r.matches(*t.header.expect))
        << "expected " << t.header.expect->text() << ", got " << r.divergences.front().headline();
  }
}

}  // namespace
}  // namespace ssm::test
