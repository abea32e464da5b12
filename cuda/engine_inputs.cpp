// Staging of a batch's rows by name (see engine.h): each layer's inputs (LayerSpec::inputs(), in
// order) packed into one pinned buffer and copied to io_ in one copy, the slot table first; a
// kernel finds an input by its LayerRows member (staged). The outputs come back the same way, in
// one copy from out_.
#include <algorithm>
#include <cstring>

#include "cuda/check.h"
#include "cuda/engine.h"

namespace ssm::cuda {

namespace {
size_t align4(size_t floats) { return (floats + 3) / 4 * 4; }  // 16-byte aligned regions

// Width of a layer's per-token input kept in LayerRows::*member (0 when the kind has none).
int64_t input_width(const LayerSpec& s, std::vector<float> LayerRows::*member) {
  for (const InputField& f : s.inputs())
    if (f.member == member) return f.width;
  return 0;
}
}  // namespace

void Engine::stage_inputs(const std::vector<int>& pool_slots, const std::vector<StepInputs>& in, int rows) {
  const int B = int(pool_slots.size());
  const size_t R = size_t(rows);
  size_t off = align4(size_t(B));  // the slot table comes first
  size_t out_off = 0;
  io_off_.clear();
  size_t most_qkv = 0, most_gb = 0, most_o = 0;
  for (const LayerSpec& s : model_.spec.layers) {
    LayerIo o{};
    const size_t n = size_t(B) * R;
    for (const InputField& f : s.inputs()) {  // the kind's inputs, in order (core/layer_geometry.cpp)
      o.in.push_back(off);
      off += align4(n * size_t(f.width));
    }
    o.out = out_off;
    out_off += align4(n * size_t(s.out_dim()));
    o.ple_out = out_off;
    out_off += align4(n * size_t(s.ple.channels));
    io_off_.push_back(o);
    most_qkv = std::max(most_qkv, n * size_t(s.conv_dim()));
    most_gb = std::max(most_gb, n * size_t(input_width(s, &LayerRows::dt_in)) * 2);  // a gate pair per head
    most_o = std::max(most_o, n * size_t(s.out_dim()));
  }
  reserve(io_, off * 4, "io scratch");
  reserve(out_, out_off * 4, "out scratch");
  reserve(qkv_, most_qkv * 4, "qkv scratch");
  reserve(o_, most_o * 4, "o scratch");
  reserve(gb_, most_gb * 4, "gate scratch");
  reserve_host(off * 4, out_off * 4);

  std::memcpy(host_in_.get(), pool_slots.data(), size_t(B) * sizeof(int));
  float* h = host_in_.as<float>();
  for (size_t l = 0; l < model_.spec.layers.size(); ++l) {
    const std::vector<InputField> fields = model_.spec.layers[l].inputs();
    for (int b = 0; b < B; ++b) {
      const LayerRows& r = in[size_t(b) % in.size()].layers[l];
      const size_t row0 = size_t(b) * R;
      for (size_t i = 0; i < fields.size(); ++i) {
        const std::vector<float>& v = r.*(fields[i].member);
        std::memcpy(h + io_off_[l].in[i] + row0 * size_t(fields[i].width), v.data(), v.size() * 4);
      }
    }
  }
  SSM_CUDA(cudaMemcpyAsync(io_.get(), host_in_.get(), off * 4, cudaMemcpyHostToDevice, main_));
  batch_ = B;
}

const float* Engine::staged(int l, std::vector<float> LayerRows::*member) const {
  const std::vector<InputField> fields = model_.spec.layers[size_t(l)].inputs();
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].member == member) return reinterpret_cast<const float*>(io_.get()) + io_off_[size_t(l)].in[i];
  return nullptr;
}

std::vector<StepOutputs> Engine::download_outputs(int rows) {
  size_t total = 0;
  for (size_t l = 0; l < model_.spec.layers.size(); ++l)
    total = io_off_[l].ple_out + align4(size_t(batch_) * size_t(rows) * size_t(model_.spec.layers[l].ple.channels));
  SSM_CUDA(cudaMemcpyAsync(host_out_.get(), out_.get(), total * 4, cudaMemcpyDeviceToHost, main_));
  SSM_CUDA(cudaStreamSynchronize(main_));
  const float* h = host_out_.as<const float>();
  std::vector<StepOutputs> outs;
  outs.resize(size_t(batch_));
  for (int b = 0; b < batch_; ++b) {
    StepOutputs& o = outs[size_t(b)];
    o.rows = rows;
    for (size_t l = 0; l < model_.spec.layers.size(); ++l) {
      const size_t n = size_t(rows) * size_t(model_.spec.layers[l].out_dim());
      const float* src = h + io_off_[l].out + size_t(b) * n;
      o.layers.emplace_back(src, src + n);
      const size_t np = size_t(rows) * size_t(model_.spec.layers[l].ple.channels);
      const float* ple = h + io_off_[l].ple_out + size_t(b) * np;
      o.ple.emplace_back(ple, ple + np);
    }
  }
  return outs;
}

}  // namespace ssm::cuda
