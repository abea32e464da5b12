// capture_overhead: what asynchronous capture (capture/ssmcheck_capture.h, ABI minor 5) adds to an
// engine's step, with ssmcheck's own CUDA engine playing the engine (issue 44 item 1). Steps of
// decode (one "decode @0..B-1" op) and of verify K (one "verify K @0..B-1" op, then B ops
// "commit 2 K @s" on the device), timed with capture off, then with inputs + outputs of every op,
// then with that and the full state (h, conv and, after a verify, the K-1 intermediates, of every
// sequence and layer) every N steps, side by side in one run:
//   capture_overhead [--preset NAME] [--layers N] [--batch B] [--k K] [--steps S] [--every 1,16,256]
//                    [--staging-gb G] [--device-staging-gb G] [--policy block|drop] [--max-gb G]
//                    [--only decode|verify] [--no-direct] [--dir DIR] [--keep]
// (--only: one kind of step; --no-direct: with a device ring, its rows only.)
// Device pointers: the state is the engine's pool (DevicePool slot addresses); the engine's input
// and output staging buffers are private, so the inputs and outputs captured are device arrays of
// the same shapes owned here ([layer][entry] blocks of x | a | b | z, and of out), which moves the
// same bytes. The traces go to DIR (default: a fresh directory under $TMPDIR or /tmp), one per
// configuration, removed after it is timed unless --keep. A configuration's steps are capped so its
// trace stays under --max-gb (default 16; at least 2 steps), and a state every N steps with N above
// its steps is measured once (step 0) and also shown with that state's cost (over the inputs +
// outputs row) spread over N steps.
// With --device-staging-gb G (ABI minor 7, ssmc_set_device_staging) every capture configuration is
// run twice, side by side: the direct way (the engine's stream waits for the device-to-host copies)
// and through a device ring of G GiB (it waits for the device-to-device copies into the ring only).
// Columns: ms/step engine = from the first step's launch to the engine's stream finishing the last
// (what the engine sees); ms/step host = the engine's thread inside the capture's calls per step
// (they run while the GPU works on the step, so they add to the step only when longer than it);
// ms/step all = the same until every op is written (ssmc_flush: the writer's pace, which bounds a
// long run under SSMC_BLOCK); MB/step captured; states dropped; ops staged on the device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "capture/ssmcheck_capture.h"
#include "cuda/check.h"
#include "cuda/engine.h"
#include "fixtures/generators.h"

using namespace ssm;
using namespace ssm::cuda;

namespace {

struct Options {
  std::string preset = "qwen3-next-80b", policy = "block", dir, only;
  bool direct = true;
  int layers = 0, batch = 32, k = 4, steps = 64;
  std::vector<int> every = {1, 16, 256};
  double staging_gb = 12, max_gb = 16, device_staging_gb = 0;
  bool keep = false;
};

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

void check(ssmc_status s, const char* what) {
  if (s != SSMC_OK) throw std::runtime_error(std::string(what) + ": " + ssmc_last_error());
}

// The bench's engine: the CUDA engine's pool and kernels, plus device arrays for inputs and outputs.
struct Bench {
  const Options& o;
  ModelSpec spec;
  Model model;
  Engine e;
  std::vector<int> slots;
  int L = 0;
  // per layer: floats per (entry, row) of x | a | b | z, and of out
  std::vector<size_t> in_w, out_w;
  std::vector<size_t> in_off, out_off;  // per layer: start of its [B][rows][w] block (floats)
  float *in_dev = nullptr, *out_dev = nullptr;
  int rows = 0;
  std::vector<CopyDesc> commit;

  Bench(const Options& opt) : o(opt), spec(make_preset(opt.preset, opt.layers)) {
    GenConfig gen;
    gen.seed = 3;
    model = make_model(spec, gen);
    L = int(spec.layers.size());
    PoolConfig pool;
    pool.h_mode = HMode::f32;
    pool.max_slots = o.batch;
    pool.conv_capacity = o.k - 1;
    pool.snapshot_slots = 0;
    e.create_pool(model, pool);
    for (int b = 0; b < o.batch; ++b) slots.push_back(e.alloc(0));
    for (int s : slots)
      for (const CopyDesc& c : e.restore_copies(s, 2)) commit.push_back(c);
  }
  ~Bench() {
    cudaFree(in_dev);
    cudaFree(out_dev);
  }

  // Stages `r` rows of inputs in the engine and in the bench's own arrays.
  void stage(int r) {
    rows = r;
    GenConfig gen;
    gen.seed = 5;
    std::vector<StepInputs> distinct;
    for (int q = 0; q < 4; ++q) distinct.push_back(make_inputs(spec, gen, r, q, 0, r));
    e.stage_inputs(slots, distinct, r);
    in_w.clear();
    out_w.clear();
    in_off.clear();
    out_off.clear();
    size_t ni = 0, no = 0;
    for (const LayerSpec& s : spec.layers) {
      in_w.push_back(size_t(s.conv_dim() + 2 * s.nv + s.out_dim()));
      out_w.push_back(size_t(s.out_dim()));
      in_off.push_back(ni);
      out_off.push_back(no);
      ni += in_w.back() * size_t(o.batch) * size_t(r);
      no += out_w.back() * size_t(o.batch) * size_t(r);
    }
    cudaFree(in_dev);
    cudaFree(out_dev);
    SSM_CUDA(cudaMalloc(reinterpret_cast<void**>(&in_dev), ni * 4));
    SSM_CUDA(cudaMalloc(reinterpret_cast<void**>(&out_dev), no * 4));
    SSM_CUDA(cudaMemset(out_dev, 0, no * 4));
    std::vector<float> host(ni);
    for (int l = 0; l < L; ++l)
      for (int b = 0; b < o.batch; ++b) {
        const LayerRows& lr = distinct[size_t(b % 4)].layers[size_t(l)];
        float* p = host.data() + in_off[size_t(l)] + size_t(b) * in_w[size_t(l)] * size_t(r);
        for (const std::vector<float>* v : {&lr.conv_in, &lr.dt_in, &lr.beta_in, &lr.gate_in})
          p = std::copy(v->begin(), v->end(), p);
      }
    SSM_CUDA(cudaMemcpy(in_dev, host.data(), ni * 4, cudaMemcpyHostToDevice));
    SSM_CUDA(cudaDeviceSynchronize());
  }

  void enqueue_step(bool verify) {
    e.enqueue_rows(rows, verify ? rows - 1 : 0, VerifyArm::exact, false);
    if (verify) e.enqueue_copies(commit);
  }

  std::string selector() const {
    std::string s = " @";
    for (int b = 0; b < o.batch; ++b) s += (b ? "," : "") + std::to_string(b);
    return s;
  }

  // The ops of one step through the capture: inputs and outputs always, the state when asked.
  void capture_step(ssmc_trace* t, bool verify, bool state) {
    const std::string op = (verify ? "verify " + std::to_string(rows) : std::string("decode")) + selector();
    check(ssmc_begin_op(t, op.c_str()), "ssmc_begin_op");
    check(ssmc_op_stream(t, e.main_stream()), "ssmc_op_stream");
    for (int l = 0; l < L; ++l) {
      const LayerSpec& s = spec.layers[size_t(l)];
      for (int b = 0; b < o.batch; ++b) {
        const float* x = in_dev + in_off[size_t(l)] + size_t(b) * in_w[size_t(l)] * size_t(rows);
        const float* a = x + size_t(s.conv_dim()) * size_t(rows);
        const float* bb = a + size_t(s.nv) * size_t(rows);
        const float* z = bb + size_t(s.nv) * size_t(rows);
        check(ssmc_op_inputs(t, b, l, x, a, bb, z, SSMC_DEVICE), "ssmc_op_inputs");
        check(ssmc_op_outputs(t, b, l, out_dev + out_off[size_t(l)] + size_t(b) * out_w[size_t(l)] * size_t(rows),
                              SSMC_DEVICE),
              "ssmc_op_outputs");
      }
    }
    if (state) {
      const DevicePool& p = e.pool();
      const int n_inter = verify ? rows - 1 : 0;
      for (int b = 0; b < o.batch; ++b) {
        const int sl = slots[size_t(b)];
        check(ssmc_state_begin(t, b, sl, verify ? rows : 0), "ssmc_state_begin");
        for (int l = 0; l < L; ++l) {
          check(ssmc_state_tensor(t, b, l, "h", 0, SSMC_F32, p.h(l, sl), SSMC_DEVICE), "h");
          check(ssmc_state_tensor(t, b, l, "conv", 0, SSMC_F32, p.conv(l, sl), SSMC_DEVICE), "conv");
          for (int i = 0; i < n_inter; ++i) {
            check(ssmc_state_tensor(t, b, l, "h_intermediate", i, SSMC_F32, p.h_intermediate(l, sl, i), SSMC_DEVICE),
                  "h_intermediate");
            check(ssmc_state_tensor(t, b, l, "conv_intermediate", i, SSMC_F32, p.conv_intermediate(l, sl, i),
                                    SSMC_DEVICE),
                  "conv_intermediate");
          }
        }
      }
    }
    check(ssmc_end_op(t), "ssmc_end_op");
    if (!verify) return;
    for (int b = 0; b < o.batch; ++b) {
      const std::string c = "commit 2 " + std::to_string(rows) + " @" + std::to_string(b);
      check(ssmc_begin_op(t, c.c_str()), "ssmc_begin_op");
      check(ssmc_end_op(t), "ssmc_end_op");
    }
  }

  ssmc_trace* open(const std::string& path, bool device_ring) {
    ssmc_trace* t = nullptr;
    check(ssmc_open(path.c_str(), "capture_overhead", "cuda", spec.name.c_str(), "f32", &t), "ssmc_open");
    std::vector<int> cap(size_t(o.batch), o.k - 1);
    check(ssmc_set_pool(t, o.batch, cap.data(), o.k - 1, 0), "ssmc_set_pool");
    for (int l = 0; l < L; ++l) {
      const LayerSpec& s = spec.layers[size_t(l)];
      const LayerWeights& w = model.weights[size_t(l)];
      const ssmc_layer_desc d = {
          s.nk, s.nv, s.kd, s.vd, s.d_conv, s.conv_bias ? 1 : 0, s.output_gate == OutputGate::sigmoid ? 1 : 0, s.eps};
      check(ssmc_add_layer(t, &d, w.conv_w.data(), s.conv_bias ? w.conv_bias.data() : nullptr, w.A_log.data(),
                           w.dt_bias.data(), w.norm_w.data()),
            "ssmc_add_layer");
    }
    check(ssmc_set_async(t, int64_t(o.staging_gb * double(1ull << 30)),
                         o.policy == "drop" ? SSMC_DROP_STATES : SSMC_BLOCK),
          "ssmc_set_async");
    if (device_ring)
      check(ssmc_set_device_staging(t, int64_t(o.device_staging_gb * double(1ull << 30))), "ssmc_set_device_staging");
    // allocs first, so the trace reads as a run of the engine (captured before the timing)
    for (int b = 0; b < o.batch; ++b) {
      check(ssmc_begin_op(t, ("alloc @" + std::to_string(b)).c_str()), "ssmc_begin_op");
      check(ssmc_end_op(t), "ssmc_end_op");
    }
    check(ssmc_flush(t), "ssmc_flush");
    return t;
  }

  double io_bytes() const {
    double n = 0;
    for (int l = 0; l < L; ++l) n += double(in_w[size_t(l)] + out_w[size_t(l)]) * 4.0 * o.batch * rows;
    return n;
  }
  double state_bytes(bool verify) const {
    double n = 0;
    const int copies = 1 + (verify ? rows - 1 : 0);
    for (const LayerSpec& s : spec.layers) n += double(s.h_elems() + s.conv_elems()) * 4.0 * copies * o.batch;
    return n;
  }
};

struct Row {
  double engine = 0, host = 0, all = 0, mb = 0;
  int steps = 0, states = 0;
  int64_t dropped = 0, staged = 0;
};

// One configuration: `every` 0 = no states, -1 = capture off; device_ring: through the device staging.
Row run(Bench& b, bool verify, int every, bool device_ring, const std::string& dir, int tag) {
  Row r;
  const double per_step = b.io_bytes() + (every > 0 ? b.state_bytes(verify) / every : 0);
  r.steps = b.o.steps;
  if (every >= 0) r.steps = std::max(2, std::min(b.o.steps, int(b.o.max_gb * 1e9 / per_step)));
  const std::string path = dir + "/capture_" + std::to_string(tag) + ".h5";
  ssmc_trace* t = every >= 0 ? b.open(path, device_ring) : nullptr;
  for (int i = 0; i < 3; ++i) b.enqueue_step(verify);  // warm-up
  SSM_CUDA(cudaStreamSynchronize(b.e.main_stream()));
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < r.steps; ++i) {
    b.enqueue_step(verify);
    if (t) {
      const bool state = every > 0 && i % every == 0;
      r.states += state;
      const Clock::time_point h0 = Clock::now();
      b.capture_step(t, verify, state);
      r.host += seconds(h0, Clock::now());
    }
  }
  SSM_CUDA(cudaStreamSynchronize(b.e.main_stream()));
  const Clock::time_point t1 = Clock::now();
  if (t) check(ssmc_flush(t), "ssmc_flush");
  const Clock::time_point t2 = Clock::now();
  r.engine = seconds(t0, t1) * 1e3 / r.steps;
  r.host *= 1e3 / r.steps;
  r.all = seconds(t0, t2) * 1e3 / r.steps;
  r.mb = (b.io_bytes() * (every >= 0) + b.state_bytes(verify) * r.states / r.steps) / 1e6;
  if (t) {
    r.dropped = ssmc_states_dropped(t);
    r.staged = ssmc_device_staged(t);
    check(ssmc_close(t), "ssmc_close");
    if (!b.o.keep) std::filesystem::remove(path);
  }
  return r;
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> v;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const int n = std::atoi(text.substr(at, end - at).c_str());
    if (n < 1) return {};
    v.push_back(n);
    at = end + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--preset") o.preset = next();
    else if (a == "--layers") o.layers = std::atoi(next().c_str());
    else if (a == "--batch") o.batch = std::atoi(next().c_str());
    else if (a == "--k") o.k = std::atoi(next().c_str());
    else if (a == "--steps") o.steps = std::atoi(next().c_str());
    else if (a == "--every") o.every = parse_list(next());
    else if (a == "--staging-gb") o.staging_gb = std::atof(next().c_str());
    else if (a == "--device-staging-gb") o.device_staging_gb = std::atof(next().c_str());
    else if (a == "--max-gb") o.max_gb = std::atof(next().c_str());
    else if (a == "--policy") o.policy = next();
    else if (a == "--dir") o.dir = next();
    else if (a == "--keep") o.keep = true;
    else if (a == "--only") o.only = next();
    else if (a == "--no-direct") o.direct = false;
    else {
      std::fprintf(stderr,
                   "usage: capture_overhead [--preset NAME] [--layers N] [--batch B] [--k K] [--steps S] "
                   "[--every 1,16,256] [--staging-gb G] [--device-staging-gb G] [--policy block|drop] [--max-gb G] "
                   "[--only decode|verify] [--no-direct] [--dir DIR] [--keep]\n");
      return 2;
    }
  }
  if (o.every.empty() || o.batch < 1 || o.k < 2 || o.steps < 2 || (o.policy != "block" && o.policy != "drop") ||
      (!o.only.empty() && o.only != "decode" && o.only != "verify") || (!o.direct && o.device_staging_gb <= 0)) {
    std::fprintf(
        stderr,
        "capture_overhead: bad --every, --batch, --k (>= 2), --steps (>= 2), --policy, --only or --no-direct (needs --device-staging-gb)\n");
    return 2;
  }
  std::string made;
  try {
    if (o.dir.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/capture-overhead-XXXXXX";
      if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot make a directory from " + tmpl);
      o.dir = made = tmpl;
    }
    cudaDeviceProp prop{};
    SSM_CUDA(cudaGetDeviceProperties(&prop, 0));
    Bench b(o);
    std::printf(
        "device: %s; model: %s, %d layers of %s; B = %d; staging %.1f GiB, device staging %.1f GiB, policy %s; "
        "traces in %s\n",
        prop.name, b.spec.name.c_str(), b.L, b.spec.layers[0].name().c_str(), o.batch, o.staging_gb,
        o.device_staging_gb, o.policy.c_str(), o.dir.c_str());
    std::printf(
        "\n| step        | capture                        | steps | states | ms/step engine | added  | ms/step host "
        "| ms/step all | added  | MB/step | states dropped | ops staged on device |\n");
    std::printf(
        "|-------------|--------------------------------|-------|--------|----------------|--------|--------------"
        "|-------------|--------|---------|----------------|----------------------|\n");
    int tag = 0;
    for (bool verify : {false, true}) {
      if (!o.only.empty() && verify != (o.only == "verify")) continue;
      b.stage(verify ? o.k : 1);
      const std::string step = verify ? "verify K=" + std::to_string(o.k) + "+c" : "decode";
      const Row off = run(b, verify, -1, false, o.dir, tag++);
      auto print = [&](const std::string& what, const Row& r) {
        std::printf(
            "| %-11s | %-30s | %5d | %6d | %14.3f | %5.1f%% | %12.3f | %11.3f | %5.1f%% | %7.0f | %14lld | %20lld |\n",
            step.c_str(), what.c_str(), r.steps, r.states, r.engine, 100.0 * (r.engine / off.engine - 1), r.host, r.all,
            100.0 * (r.all / off.engine - 1), r.mb, (long long)r.dropped, (long long)r.staged);
        std::fflush(stdout);
      };
      print("off", off);
      for (bool ring : {false, true}) {
        if ((ring && o.device_staging_gb <= 0) || (!ring && !o.direct)) continue;
        const std::string how = ring ? " (device ring)" : "";
        const Row io = run(b, verify, 0, ring, o.dir, tag++);
        print("inputs+outputs" + how, io);
        for (int n : o.every) {
          const Row r = run(b, verify, n, ring, o.dir, tag++);
          print("+ state every " + std::to_string(n) + how, r);
          if (r.steps >= n || r.states == 0) continue;
          // fewer steps than N: the states this run took, their cost (over inputs + outputs alone)
          // spread over N steps each, as a run of N steps or more would spread it
          const double per_state = double(r.steps) / r.states / n;
          Row d = io;
          d.engine = io.engine + (r.engine - io.engine) * per_state;
          d.host = io.host + (r.host - io.host) * per_state;
          d.all = io.all + (r.all - io.all) * per_state;
          d.mb = io.mb + (r.mb - io.mb) * per_state;
          d.steps = d.states = 0;
          d.staged = 0;
          print("  its state over " + std::to_string(n) + " steps" + how, d);
        }
      }
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "capture_overhead: %s\n", ex.what());
    if (!made.empty() && !o.keep) std::filesystem::remove_all(made);
    return 1;
  }
  if (!made.empty() && !o.keep) std::filesystem::remove_all(made);
  return 0;
}
