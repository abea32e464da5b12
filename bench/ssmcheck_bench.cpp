// ssmcheck_bench: for a preset's shape (default qwen3-next-80b, 36 GDN layers; nemotron-h-8b for
// 24 Mamba-2 layers) and batch 1..128, the device time and effective bandwidth of decode (FP32
// and FP16 h), verify K = 2..4 (exact arm; the WY arm too where the model has GDN layers) and the
// batched copies, against a device-to-device cudaMemcpy measured in the same run.
// Each op is captured once in a CUDA graph (every layer's launches) and replayed; the time is
// the mean of the timed replays between two events. Bandwidth counts state bytes only: h and
// conv read once and written once, plus the intermediates a verify writes.
//   ssmcheck_bench [--preset NAME] [--layers N] [--max-batch B | --batches B,B,..] [--reps R] [--quick] [--json FILE]
// --batches times those batch sizes only (for ncu: `--batches 32 --layers 1 --reps 1` makes the
// first kernels launched those of one decode at B = 32).
// --json writes the table as JSON (docs/report.md, "Benchmark JSON"), which
// `ssmcheck report --bench FILE --html OUT` draws against the copy ceiling.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cuda/check.h"
#include "cuda/engine.h"
#include "fixtures/generators.h"

using namespace ssm;
using namespace ssm::cuda;

namespace {

struct Options {
  int layers = 0, max_batch = 128, reps = 10;  // layers 0: all of the preset's
  std::vector<int> batches;                    // empty: 1, 2, 4, .. max_batch
  std::string preset = "qwen3-next-80b", json;
};

// "1,32,128" -> {1, 32, 128}; empty when any item is not a whole number in 1..4096.
std::vector<int> parse_batches(const std::string& text) {
  std::vector<int> v;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    char* stop = nullptr;
    const long b = std::strtol(item.c_str(), &stop, 10);
    if (item.empty() || *stop != '\0' || b < 1 || b > 4096) return {};
    v.push_back(int(b));
    at = end + 1;
  }
  return v;
}

nlohmann::json g_rows = nlohmann::json::array();  // --json: every row printed

// Seconds per launch(): `reps` of them back to back on s, between two events.
double seconds_per(cudaStream_t s, int reps, const std::function<void()>& launch) {
  cudaEvent_t a, b;
  SSM_CUDA(cudaEventCreate(&a));
  SSM_CUDA(cudaEventCreate(&b));
  SSM_CUDA(cudaEventRecord(a, s));
  for (int i = 0; i < reps; ++i) launch();
  SSM_CUDA(cudaEventRecord(b, s));
  SSM_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  SSM_CUDA(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return double(ms) * 1e-3 / reps;
}

double time_graph(cudaStream_t s, const std::function<void()>& enqueue, int reps) {
  enqueue();  // warm-up outside the graph (first-use attributes, caches)
  SSM_CUDA(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  SSM_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  enqueue();
  SSM_CUDA(cudaStreamEndCapture(s, &g));
  SSM_CUDA(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 2; ++i) SSM_CUDA(cudaGraphLaunch(ge, s));
  const double t = seconds_per(s, reps, [&] { SSM_CUDA(cudaGraphLaunch(ge, s)); });
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  return t;
}

double copy_bandwidth(cudaStream_t s, int reps) {
  const size_t bytes = size_t(2) << 30;
  void *x = nullptr, *y = nullptr;
  SSM_CUDA(cudaMalloc(&x, bytes));
  SSM_CUDA(cudaMalloc(&y, bytes));
  SSM_CUDA(cudaMemsetAsync(x, 1, bytes, s));
  // a plain stream copy (a memcpy node inside a graph ran at ~2.8 TB/s on the H200 here)
  SSM_CUDA(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s));
  const double t = seconds_per(s, reps, [&] { SSM_CUDA(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s)); });
  cudaFree(x);
  cudaFree(y);
  return 2.0 * double(bytes) / t;  // read + write
}

void row(const char* op, const char* h, int B, double t, double bytes, double copy_bw) {
  const double bw = bytes / t;
  std::printf("| %-14s | %-3s | %4d | %10.1f | %8.0f | %5.1f%% |\n", op, h, B, t * 1e6, bw * 1e-9, 100.0 * bw / copy_bw);
  std::fflush(stdout);
  if (B > 0)
    g_rows.push_back({{"op", op}, {"h", h}, {"batch", B}, {"time_us", t * 1e6}, {"gbs", bw * 1e-9},
                      {"of_copy", bw / copy_bw}});
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--preset" && i + 1 < argc) o.preset = argv[++i];
    else if (a == "--layers" && i + 1 < argc) o.layers = std::atoi(argv[++i]);
    else if (a == "--max-batch" && i + 1 < argc) o.max_batch = std::atoi(argv[++i]);
    else if (a == "--batches" && i + 1 < argc) {
      o.batches = parse_batches(argv[++i]);
      if (o.batches.empty()) {
        std::fprintf(stderr, "ssmcheck_bench: --batches '%s': expected batch sizes 1..4096, comma-separated\n", argv[i]);
        return 2;
      }
      o.max_batch = *std::max_element(o.batches.begin(), o.batches.end());
    }
    else if (a == "--reps" && i + 1 < argc) o.reps = std::atoi(argv[++i]);
    else if (a == "--quick") { o.max_batch = 8; o.reps = 3; }
    else if (a == "--json" && i + 1 < argc) o.json = argv[++i];
    else {
      std::fprintf(stderr, "usage: ssmcheck_bench [--preset NAME] [--layers N] [--max-batch B | --batches B,B,..] [--reps R] [--quick] "
                           "[--json FILE]\n");
      return 2;
    }
  }
  try {
    cudaDeviceProp prop{};
    SSM_CUDA(cudaGetDeviceProperties(&prop, 0));
    const ModelSpec spec = make_preset(o.preset, o.layers);
    GenConfig gen;
    gen.seed = 3;
    const Model model = make_model(spec, gen);
    const LayerSpec& ls = spec.layers[0];
    const int L = int(spec.layers.size());
    bool has_gdn = false;  // the WY arm exists for GDN layers only
    for (const LayerSpec& s : spec.layers) has_gdn = has_gdn || s.kind == LayerKind::gdn;
    std::vector<int> batches = o.batches;
    if (batches.empty())
      for (int b = 1; b <= o.max_batch; b *= 2) batches.push_back(b);

    double copy_bw = 0;
    std::printf("device: %s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    std::printf("model: %s, %d layers of %s\n\n", spec.name.c_str(), L, ls.name().c_str());
    std::printf("| op             | h   |    B |   time us | GB/s     | of copy |\n");
    std::printf("|----------------|-----|------|-----------|----------|---------|\n");

    for (HMode mode : {HMode::f32, HMode::f16_pool}) {
      const bool f16 = mode != HMode::f32;
      const char* hname = f16 ? "f16" : "f32";
      PoolConfig pool;
      pool.h_mode = mode;
      pool.max_slots = o.max_batch;
      pool.conv_capacity = 3;
      pool.snapshot_slots = 0;
      Engine e;
      e.create_pool(model, pool);
      if (copy_bw == 0) {
        copy_bw = copy_bandwidth(e.main_stream(), o.reps);
        row("d2d cudaMemcpy", "-", 0, (size_t(2) << 31) / copy_bw, double(size_t(2) << 31), copy_bw);
      }
      std::vector<int> slots;
      for (int b = 0; b < o.max_batch; ++b) slots.push_back(e.alloc(0));
      std::vector<StepInputs> distinct;
      double layer_bytes = 0;  // h and conv of one sequence, every layer
      for (const LayerSpec& s : spec.layers) layer_bytes += double(s.h_elems()) * (f16 ? 2 : 4) + double(s.conv_elems()) * 4;

      for (int B : batches) {
        const std::vector<int> sl(slots.begin(), slots.begin() + B);
        for (int K : {1, 2, 3, 4}) {
          distinct.clear();
          for (int q = 0; q < 4; ++q) distinct.push_back(make_inputs(spec, gen, K, q, 0, K));
          e.stage_inputs(sl, distinct, K);
          // state bytes: H0 and window read once; K-1 intermediates and the final state written
          const double bytes = double(B) * layer_bytes * (1 + K);
          if (K == 1) {
            const double t = time_graph(e.main_stream(), [&] { e.enqueue_rows(1, 0, VerifyArm::exact, f16); }, o.reps);
            row("decode", hname, B, t, bytes, copy_bw);
          } else {
            for (VerifyArm arm : {VerifyArm::exact, VerifyArm::wy}) {
              if (arm == VerifyArm::wy && !has_gdn) continue;
              const double t = time_graph(e.main_stream(), [&] { e.enqueue_rows(K, K - 1, arm, f16); }, o.reps);
              const std::string name = "verify K=" + std::to_string(K) + (arm == VerifyArm::wy ? " wy" : " ex");
              row(name.c_str(), hname, B, t, bytes, copy_bw);
            }
          }
        }
        std::vector<CopyDesc> ck, rb;
        for (int s : sl) {
          for (const CopyDesc& c : e.checkpoint_copies(s)) ck.push_back(c);
          for (const CopyDesc& c : e.restore_copies(s, 1)) rb.push_back(c);
        }
        const double cbytes = 2.0 * double(B) * layer_bytes;
        row("checkpoint", hname, B, time_graph(e.main_stream(), [&] { e.enqueue_copies(ck); }, o.reps), cbytes, copy_bw);
        row("rollback n=1", hname, B, time_graph(e.main_stream(), [&] { e.enqueue_copies(rb); }, o.reps), cbytes, copy_bw);
      }
    }
    if (!o.json.empty()) {
      const nlohmann::json j = {{"tool", "ssmcheck_bench"}, {"device", prop.name}, {"sms", prop.multiProcessorCount},
                                {"model", spec.name}, {"layers", L}, {"layer", ls.name()}, {"reps", o.reps},
                                {"copy_gbs", copy_bw * 1e-9}, {"rows", g_rows}};
      std::ofstream out(o.json);
      out << j.dump(2) << "\n";
      if (!out) throw std::runtime_error("cannot write " + o.json);
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "ssmcheck_bench: %s\n", ex.what());
    return 1;
  }
  return 0;
}
