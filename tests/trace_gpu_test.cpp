// Golden and faulty traces (GDN, Mamba-2 and mixed models) replayed on the CUDA backend (gpu
// label): golden ones must agree under the tolerance classes, faulty ones must be pinpointed at
// their documented op, layer and tensor.
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

// Every trace of a directory, and how many of them hold Mamba-2 layers (CUDA runs both kinds).
std::vector<formats::Trace> cuda_traces(const std::string& dir, int* with_mamba2) {
  std::vector<formats::Trace> v;
  *with_mamba2 = 0;
  for (const std::string& p : traces(dir)) {
    v.push_back(formats::read_trace(p));
    const auto& layers = v.back().header.model.spec.layers;
    if (std::any_of(layers.begin(), layers.end(), [](const LayerSpec& l) { return l.kind == LayerKind::mamba2; }))
      ++*with_mamba2;
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
  int mamba2 = 0;
  const auto files = cuda_traces(dir_, &mamba2);
  ASSERT_FALSE(files.empty()) << "no golden traces in " << dir_;
  EXPECT_GE(mamba2, 2) << "the Mamba-2 and mixed golden traces are missing from " << dir_;
  for (const formats::Trace& t : files) {
    const std::string& p = t.source;
    SCOPED_TRACE(p);
    cuda::CudaBackend b;
    const replay::ReplayResult r = replay::replay_trace(t, b);
    EXPECT_TRUE(r.pass()) << p << "\n" << r.text();
    EXPECT_EQ(b.check_guards(), "");
  }
}

TEST_F(TraceGpu, FaultyTracesArePinpointedOnCuda) {
  int mamba2 = 0;
  const auto files = cuda_traces(dir_ + "/faulty", &mamba2);
  ASSERT_FALSE(files.empty()) << "no faulty traces in " << dir_ << "/faulty";
  EXPECT_GE(mamba2, 2) << "the Mamba-2 faulty traces are missing from " << dir_ << "/faulty";
  for (const formats::Trace& t : files) {
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
