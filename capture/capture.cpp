// The C ABI of ssmcheck_capture.h over formats::TraceWriter: collects one op at a time (inputs,
// outputs, refusal, states copied from host or device memory) and appends it on ssmc_end_op.
#include "ssmcheck_capture.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <fmt/core.h>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <thread>
#include <type_traits>

#include "async.h"
#include "core/conventions.h"
#include "core/layer_attrs.h"
#include "formats/model_attrs.h"
#include "formats/trace.h"
#ifdef SSMC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

using namespace ssm;

thread_local std::string g_error;

struct Failure {
  ssmc_status status;
  std::string what;
};

// A layer's state fields as they arrive.
struct PendingLayer {
  std::optional<Tensor> h, conv, h_checkpoint, conv_checkpoint;
  std::map<int, Tensor> h_inter, conv_inter;
  // the PLE carry (a hosting layer): live, checkpoint, snapshots, each history with its conv
  std::optional<Tensor> ple_history, ple_conv, ple_history_checkpoint, ple_conv_checkpoint;
  std::map<int, Tensor> ple_history_snapshot, ple_conv_snapshot;
};
struct PendingSeq {
  int slot = -1, last_verify_k = 0;
  std::map<int, PendingLayer> layers;
  std::optional<Tensor> stage;
};

struct PendingOp {
  formats::TraceOp op;
  std::map<int, PendingSeq> states;
};

void copy_in(void* dst, const void* src, size_t bytes, ssmc_memory mem, const char* what) {
  if (!src) throw Failure{SSMC_ERR_ARGUMENT, std::string(what) + ": null pointer"};
  if (bytes == 0) return;
  if (mem == SSMC_HOST) {
    std::memcpy(dst, src, bytes);
    return;
  }
  if (mem != SSMC_DEVICE) throw Failure{SSMC_ERR_ARGUMENT, std::string(what) + ": memory must be SSMC_HOST or SSMC_DEVICE"};
#ifdef SSMC_WITH_CUDA
  const cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess)
    throw Failure{SSMC_ERR_DEVICE, fmt::format("{}: cudaMemcpy of {} bytes from device pointer {} failed: {}", what,
                                               bytes, src, cudaGetErrorString(e))};
#else
  throw Failure{SSMC_ERR_DEVICE, std::string(what) +
                                     ": SSMC_DEVICE pointer, but this libssmcheck_capture was built without CUDA "
                                     "(copy to host first, or rebuild with CUDA)"};
#endif
}

std::vector<float> floats(const float* p, size_t n, ssmc_memory mem, const char* what) {
  std::vector<float> v(n);
  copy_in(v.data(), p, n * 4, mem, what);
  return v;
}

}  // namespace

namespace {
// The op an asynchronous capture is building (ssmc_set_async): its calls with their pointers,
// host bytes copied at the call, device pointers copied at ssmc_end_op.
struct Building {
  ssm::Op op;
  ssmc_async::QueuedOp q;
  std::vector<char> heap;
  void* stream = nullptr;  // cudaStream_t (ssmc_op_stream); null: the legacy default stream
};
}  // namespace

struct ssmc_trace {
  std::string path;
  formats::TraceHeader header;
  std::map<int, StateLayout> layouts;  // by layer: how the engine keeps its state (ssmc_set_layer_convention)
  bool pool_set = false;
  std::unique_ptr<formats::TraceWriter> writer;  // created by the first begin_op
  std::optional<PendingOp> op;
  // A handle shared by threads: every call holds `mu`, and an op begun by one thread is built and
  // ended by that thread only (another thread's calls on it are refused, SSMC_ERR_ORDER).
  mutable std::mutex mu;
  std::thread::id op_thread;
  // Asynchronous capture (ABI minor 5): the writer thread replays each op into `inner` (a capture
  // of its own, which owns the TraceWriter); `async` is declared after it, so it stops first.
  std::unique_ptr<ssmc_trace> inner;
  std::unique_ptr<ssmc_async::Async> async;
  std::optional<Building> building;
  int accepted = 0;            // ops ssmc_end_op queued
  int64_t states_dropped = 0;  // of them, ops whose states the drop policy left out
  bool header_written() const { return writer || inner; }
};

namespace {

// What an error message quotes is bounded: a text longer than kMaxQuote is quoted by its start and
// its size, and a whole message longer than kMaxError keeps its start and its end (a 2 MB op text
// came back twice in full through ssmc_last_error).
constexpr size_t kMaxQuote = 200, kMaxError = 4096;

// n at most, less where byte n starts inside a UTF-8 sequence (a cut never splits a character)
size_t utf8_cut(std::string_view s, size_t n) {
  if (n >= s.size()) return s.size();
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
  return n;
}

std::string quoted(std::string_view text) {
  if (text.size() <= kMaxQuote) return "'" + std::string(text) + "'";
  return "'" + std::string(text.substr(0, utf8_cut(text, kMaxQuote))) + "...' (" + std::to_string(text.size()) +
         " bytes)";
}

std::string bounded(const std::string& what) {
  if (what.size() <= kMaxError) return what;
  const size_t head = utf8_cut(what, kMaxError / 2);
  size_t tail = what.size() - kMaxError / 2;
  while (tail < what.size() && (static_cast<unsigned char>(what[tail]) & 0xc0) == 0x80) ++tail;
  return what.substr(0, head) + fmt::format(" [... {} bytes of {} left out ...] ", tail - head, what.size()) +
         what.substr(tail);
}

// parse_op's message about `text`, quoting the op once and bounded: parse_op quotes the whole op,
// then the word it stopped at (for a one-word op, the op again).
std::string op_error(std::string_view text, const std::string& what) {
  const std::string prefix = "op '" + std::string(text) + "': ";
  std::string reason = what.compare(0, prefix.size(), prefix) == 0 ? what.substr(prefix.size()) : what;
  for (size_t i = 0; i < text.size();) {  // each long word of the op the reason quotes again: by its size
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t j = i;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    const std::string_view w = text.substr(i, j - i);
    if (w.size() > kMaxQuote)
      for (size_t at; (at = reason.find(w)) != std::string::npos;)
        reason.replace(at, w.size(), fmt::format("<a word of {} bytes>", w.size()));
    i = j;
  }
  return "op " + quoted(text) + ": " + reason;
}

ssmc_status fail(ssmc_status s, const std::string& what) {
  g_error = bounded(what);
  return s;
}

// Runs f, turning Failure / FormatError / anything else into a status and g_error.
template <class F>
ssmc_status call(ssmc_trace* t, bool drops_op, F f) {
  g_error.clear();
  std::unique_lock<std::mutex> serial;
  if (t) serial = std::unique_lock<std::mutex>(t->mu);
  if (drops_op && t && (t->op || t->building) && t->op_thread != std::this_thread::get_id())
    return fail(SSMC_ERR_ORDER, "op '" + to_string(t->op ? t->op->op.op : t->building->op) +
                                    "' was begun by another thread: an op is built and ended by the thread that began "
                                    "it (one handle's ops are captured one at a time)");
  try {
    f();
    return SSMC_OK;
  } catch (const Failure& e) {
    if (drops_op && t) {
      t->op.reset();
      t->building.reset();
    }
    return fail(e.status, e.what);
  } catch (const ssm::formats::FormatError& e) {
    if (drops_op && t) {
      t->op.reset();
      t->building.reset();
    }
    const bool io = std::string(e.what()).find("writing failed") != std::string::npos ||
                    std::string(e.what()).find("rename") != std::string::npos;
    return fail(io ? SSMC_ERR_IO : SSMC_ERR_INVALID, e.what());
  } catch (const std::exception& e) {
    if (drops_op && t) {
      t->op.reset();
      t->building.reset();
    }
    return fail(SSMC_ERR_INVALID, e.what());
  }
}

// Throws Failure{s, what} unless ok. `what` is a string, or a callable that makes it: the calls an
// engine makes thousands of times per op (an entry's inputs and outputs, the layer, the entry) pass
// a lambda, so their message is built only when they fail (built eagerly, it was half the host
// time of a 2,304-call decode op: bench/capture_overhead's "ms/step host").
template <class What>
void need(bool ok, ssmc_status s, What&& what) {
  if (ok) return;
  if constexpr (std::is_invocable_v<What>) throw Failure{s, std::string(what())};
  else throw Failure{s, std::string(what)};
}

const LayerSpec& layer_of(ssmc_trace* t, int layer) {
  need(layer >= 0 && size_t(layer) < t->header.model.spec.layers.size(), SSMC_ERR_ARGUMENT,
       [&] { return fmt::format("layer {} outside 0..{}", layer, int(t->header.model.spec.layers.size()) - 1); });
  return t->header.model.spec.layers[size_t(layer)];
}

// A layer hosting a PLE carry (ssmc_set_layer_ple), for the PLE calls.
const LayerSpec& ple_layer_of(ssmc_trace* t, int layer, const char* call) {
  const LayerSpec& s = layer_of(t, layer);
  need(s.ple.hosted(), SSMC_ERR_ARGUMENT,
       fmt::format("{}: layer {} hosts no PLE carry (declare it with ssmc_set_layer_ple)", call, layer));
  return s;
}

PendingOp& current(ssmc_trace* t) {
  need(t->op.has_value(), SSMC_ERR_ORDER, "no op begun (call ssmc_begin_op first)");
  return *t->op;
}

void check_entry(const PendingOp& p, int entry);

// The outputs of an entry, created with every layer's (and PLE output's) slot empty.
StepOutputs& outputs_of(ssmc_trace* t, PendingOp& p, int entry) {
  if (p.op.outputs.empty()) p.op.outputs.resize(p.op.op.seqs.size());
  auto& o = p.op.outputs[size_t(entry)];
  if (!o) {
    o = StepOutputs();
    o->rows = p.op.op.rows();
    o->layers.resize(t->header.model.spec.layers.size());
    o->ple.resize(t->header.model.spec.layers.size());
  }
  return *o;
}

void check_entry(const PendingOp& p, int entry) {
  const Op& o = p.op.op;
  need(o.takes_inputs(), SSMC_ERR_ORDER,
       [&] { return "op '" + to_string(o) + "' takes no inputs and makes no outputs"; });
  need(entry >= 0 && size_t(entry) < o.seqs.size(), SSMC_ERR_ARGUMENT,
       [&] { return fmt::format("entry {} outside the selector's 0..{}", entry, int(o.seqs.size()) - 1); });
}

// ---- Layers, weights, inputs and outputs by name (ABI minor 6): every kind's fields come from
// LayerSpec (inputs(), weights(), state_fields(), out_dim()), so a new kind adds nothing here.

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// "'xbc' is not <what> of a mamba2 layer, mamba2(...) (its <what>s: xBC, dt, z); did you mean xBC?"
[[noreturn]] void unknown_name(const std::string& at, const std::string& name, const char* what, const LayerSpec& s,
                               const std::vector<std::string>& known) {
  std::string near;
  for (const std::string& k : known)
    if (near.empty() && near_miss(name, k)) near = k;
  const bool vowel = std::strchr("aeiou", what[0]) != nullptr;
  throw Failure{SSMC_ERR_ARGUMENT, fmt::format("{}: {} is not {} {} of the {} layer, {} (its {}s: {}){}", at,
                                               "'" + name + "'", vowel ? "an" : "a", what, to_string(s.kind), s.name(),
                                               what, known.empty() ? "none" : joined(known),
                                               near.empty() ? "" : "; did you mean " + near + "?")};
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t e : shape) s += fmt::format("[{}]", e);
  return s;
}

size_t elems(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t e : shape) n *= size_t(e);
  return n;
}

// The values of weight `f` from host `data` (f32, finite); messages "<at> weight <name> <shape>: ...".
std::vector<float> weight_values(const WeightField& f, const float* data, const std::string& at) {
  const size_t n = elems(f.shape);
  const std::string what = fmt::format("{} weight {} {}", at, f.name, shape_text(f.shape));
  std::vector<float> v = floats(data, n, SSMC_HOST, what.c_str());
  for (size_t i = 0; i < n; ++i)
    need(std::isfinite(v[i]), SSMC_ERR_ARGUMENT, fmt::format("{}: non-finite value {} at element {}", what, v[i], i));
  return v;
}

// The bounds of the trace reader (formats/model_attrs.h), so that what is written reads back.
void check_reader_bounds(const LayerSpec& s, const std::string& at) {
  need(s.h_elems() <= formats::kMaxElems && s.conv_elems() <= formats::kMaxElems, SSMC_ERR_ARGUMENT,
       fmt::format("{}: {}: layer too large (h {} or conv {} elements, at most {})", at, s.name(), s.h_elems(),
                   s.conv_elems(), formats::kMaxElems));
}

// Every weight of every layer is given (a layer added by name gets them by ssmc_set_layer_weight).
void check_weights_given(const ssmc_trace* t, const char* call) {
  const ModelSpec& m = t->header.model.spec;
  for (size_t l = 0; l < m.layers.size(); ++l)
    for (const WeightField& f : m.layers[l].weights())
      need((t->header.model.weights[l].*f.member).size() == elems(f.shape), SSMC_ERR_ORDER,
           fmt::format("{}: layer {} ({}) weight {} {} not set (ssmc_set_layer_weight)", call, l, m.layers[l].name(),
                       f.name, shape_text(f.shape)));
}

const StateLayout& layout_of(const ssmc_trace* t, int layer) {
  static const StateLayout contract;
  const auto it = t->layouts.find(layer);
  return it == t->layouts.end() ? contract : it->second;
}

// One field of a layer as ssmc_layer_field reports it: a static name and a shape.
struct NamedField {
  const char* name;
  std::vector<int64_t> dims;
};
// The fields of group "inputs" | "weights" | "outputs" | "state" of `layer` (state under the
// layer's layout conventions, as ssmc_state_tensor reads it).
std::vector<NamedField> layer_group(const ssmc_trace* t, const LayerSpec& s, int layer, const std::string& group,
                                    const char* call) {
  std::vector<NamedField> v;
  if (group == "inputs") {
    for (const InputField& f : s.inputs()) v.push_back({f.name, {f.width}});
  } else if (group == "weights") {
    for (const WeightField& f : s.weights()) v.push_back({f.name, f.shape});
  } else if (group == "outputs") {
    for (const OutputField& f : s.outputs()) v.push_back({f.name, {f.width}});
  } else if (group == "state") {
    const StateLayout& lay = layout_of(t, layer);
    for (const StateField& f : s.state_fields()) {
      const std::string n = f.name;
      const bool is_h = n == "h" || n.rfind("h_", 0) == 0, is_conv = n.rfind("conv", 0) == 0;
      v.push_back({f.name, is_h ? h_shape_in(s, lay) : is_conv ? conv_shape_in(s, lay) : f.shape});
    }
  } else {
    throw Failure{SSMC_ERR_ARGUMENT,
                  fmt::format("{}: unknown group '{}' (known: inputs, weights, outputs, state)", call, group)};
  }
  return v;
}

InputField input_named(const LayerSpec& s, const char* name, const std::string& at) {
  need(name != nullptr, SSMC_ERR_ARGUMENT, at + ": name is null");
  std::vector<std::string> known;
  for (const InputField& f : s.inputs()) {
    if (f.name == std::string(name)) return f;
    known.push_back(f.name);
  }
  unknown_name(at, name, "input", s, known);
}

OutputField output_named(const LayerSpec& s, const char* name, const std::string& at) {
  need(name != nullptr, SSMC_ERR_ARGUMENT, at + ": name is null");
  std::vector<std::string> known;
  for (const OutputField& f : s.outputs()) {
    if (f.name == std::string(name)) return f;
    known.push_back(f.name);
  }
  unknown_name(at, name, "output", s, known);
}

// The dtype an input is given in: token ids (ple_tokens) SSMC_I32 or SSMC_F32, the rest SSMC_F32.
void check_input_dtype(const InputField& f, ssmc_dtype dtype, const std::string& at) {
  const bool ids = f.member == &LayerRows::ple_tokens;
  need(dtype == SSMC_F32 || (ids && dtype == SSMC_I32), SSMC_ERR_ARGUMENT,
       fmt::format("{} {}: dtype {} ({})", at, f.name, int(dtype),
                   ids ? "token ids are SSMC_I32 or SSMC_F32" : "inputs are SSMC_F32"));
}

// Input `f` of one entry and layer: [rows][width] values (token ids checked: integers in
// 0..kMaxTokenId, held in FP32). `what` names it in messages. The path every input takes.
void put_input(ssmc_trace* t, PendingOp& p, int entry, int layer, const InputField& f, ssmc_dtype dtype,
               const void* data, ssmc_memory mem, const std::string& what) {
  StepInputs& in = p.op.inputs[size_t(entry)];
  const int rows = p.op.op.rows();
  if (in.layers.empty()) {
    in.rows = rows;
    in.layers.resize(t->header.model.spec.layers.size());
  }
  std::vector<float>& dst = in.layers[size_t(layer)].*f.member;
  need(dst.empty(), SSMC_ERR_ORDER, fmt::format("{}: given twice", what));
  const size_t n = size_t(rows) * size_t(f.width);
  if (dtype != SSMC_I32) {
    std::vector<float> v = floats(static_cast<const float*>(data), n, mem, what.c_str());
    if (f.member == &LayerRows::ple_tokens)
      for (size_t i = 0; i < n; ++i)
        need(v[i] >= 0 && v[i] <= float(kMaxTokenId) && v[i] == std::floor(v[i]), SSMC_ERR_ARGUMENT,
             fmt::format("{}: row {} holds {}, not a token id (0..{})", what, i, v[i], kMaxTokenId));
    dst = std::move(v);
    return;
  }
  std::vector<int32_t> ids(n);
  copy_in(ids.data(), data, n * 4, mem, what.c_str());
  for (size_t i = 0; i < n; ++i)
    need(ids[i] >= 0 && ids[i] <= kMaxTokenId, SSMC_ERR_ARGUMENT,
         fmt::format("{}: row {} holds {}, not a token id (0..{})", what, i, ids[i], kMaxTokenId));
  dst.assign(ids.begin(), ids.end());
}

// Output `f` of one entry and layer: [rows][width] f32. The path every output takes.
void put_output(ssmc_trace* t, PendingOp& p, int entry, int layer, const OutputField& f, const float* data,
                ssmc_memory mem, const std::string& what) {
  StepOutputs& o = outputs_of(t, p, entry);
  std::vector<float>& dst = (o.*f.member)[size_t(layer)];
  need(dst.empty(), SSMC_ERR_ORDER, fmt::format("{}: given twice", what));
  dst = floats(data, size_t(o.rows) * size_t(f.width), mem, what.c_str());
}

// A history and its conv given together, or neither.
std::optional<PleCarry> ple_pair(const std::optional<Tensor>& h, const std::optional<Tensor>& c, const std::string& where,
                                 const char* suffix) {
  need(h.has_value() == c.has_value(), SSMC_ERR_INVALID,
       fmt::format("{}: ple_history{} and ple_conv{} come together (one was given without the other)", where, suffix,
                   suffix));
  return h ? std::optional<PleCarry>(PleCarry{*h, *c}) : std::nullopt;
}

// The PLE fields of a recorded layer; the trace's validation checks them against the model.
void assemble_ple(const PendingLayer& pl, int last_verify_k, const std::string& where, LayerState& ls) {
  ls.ple = ple_pair(pl.ple_history, pl.ple_conv, where, "");
  ls.ple_checkpoint = ple_pair(pl.ple_history_checkpoint, pl.ple_conv_checkpoint, where, "_checkpoint");
  if (pl.ple_history_snapshot.empty() && pl.ple_conv_snapshot.empty()) return;  // a layer hosting none, or an error below
  for (int i = 0; i < last_verify_k; ++i) {
    need(pl.ple_history_snapshot.count(i) && pl.ple_conv_snapshot.count(i), SSMC_ERR_INVALID,
         fmt::format("{}: last_verify_k {} needs PLE snapshots 0..{} (history and conv), index {} missing", where,
                     last_verify_k, last_verify_k - 1, i));
    ls.ple_snapshots.push_back(PleCarry{pl.ple_history_snapshot.at(i), pl.ple_conv_snapshot.at(i)});
  }
  need(pl.ple_history_snapshot.size() <= size_t(last_verify_k) && pl.ple_conv_snapshot.size() <= size_t(last_verify_k),
       SSMC_ERR_INVALID,
       fmt::format("{}: PLE snapshots beyond the {} of last_verify_k {}", where, last_verify_k, last_verify_k));
}

// The op as TraceOp: pending states turned into TraceStates.
formats::TraceOp assemble(const ssmc_trace* t, PendingOp& p) {
  formats::TraceOp op = p.op;
  const size_t L = t->header.model.spec.layers.size();
  for (auto& kv : p.states) {
    formats::TraceState ts;
    ts.seq = kv.first;
    ts.state.slot = kv.second.slot;
    ts.state.last_verify_k = kv.second.last_verify_k;
    ts.state.h_prefill_stage = kv.second.stage;
    for (auto& lkv : kv.second.layers) {
      PendingLayer& pl = lkv.second;
      const std::string where = fmt::format("state of seq {} layer {}", kv.first, lkv.first);
      need(pl.h.has_value(), SSMC_ERR_INVALID, where + ": fields given but no \"h\"");
      need(pl.conv.has_value(), SSMC_ERR_INVALID, where + ": no \"conv\"");
      LayerState ls;
      ls.h = *pl.h;
      ls.h_is_f16 = pl.h->dtype() == DType::f16;
      ls.conv = *pl.conv;
      if (const auto lay = t->layouts.find(lkv.first); lay != t->layouts.end())  // conv_window d_conv-1
        ls.conv_oldest_column_absent = lay->second.conv_window == ConvWindow::d_conv_minus_1;
      ls.h_checkpoint = pl.h_checkpoint;
      ls.conv_checkpoint = pl.conv_checkpoint;
      const int n = std::max(0, kv.second.last_verify_k - 1);
      for (int i = 0; i < n; ++i) {
        need(pl.h_inter.count(i) && pl.conv_inter.count(i), SSMC_ERR_INVALID,
             fmt::format("{}: last_verify_k {} needs h and conv intermediates 0..{}, index {} missing", where,
                         kv.second.last_verify_k, n - 1, i));
        ls.h_intermediates.push_back(pl.h_inter.at(i));
        ls.conv_intermediates.push_back(pl.conv_inter.at(i));
      }
      need(pl.h_inter.size() <= size_t(n) && pl.conv_inter.size() <= size_t(n), SSMC_ERR_INVALID,
           fmt::format("{}: intermediates beyond the {} that last_verify_k {} makes valid", where, n,
                       kv.second.last_verify_k));
      assemble_ple(pl, kv.second.last_verify_k, where, ls);
      ts.layers.push_back(lkv.first);
      ts.state.layers.push_back(std::move(ls));
    }
    need(!ts.layers.empty() && ts.layers.back() < int(L), SSMC_ERR_INVALID,
         fmt::format("state of seq {}: no layer recorded (give at least one layer's \"h\")", kv.first));
    op.states.push_back(std::move(ts));
  }
  return op;
}

// A PLE field of ssmc_state_tensor (its checks: the layer hosts a carry, the field is known, the
// dtype fits; history values are checked as token ids by the trace's validation).
void ple_state_tensor(ssmc_trace* t, PendingLayer& pl, int seq, int layer, const std::string& f, int index,
                      ssmc_dtype dtype, const void* data, ssmc_memory mem) {
  const LayerSpec& s = ple_layer_of(t, layer, "ssmc_state_tensor");
  struct Field {
    const char* name;
    bool history, snapshot;
    std::optional<Tensor> PendingLayer::*one;
    std::map<int, Tensor> PendingLayer::*many;
  };
  static const Field fields[] = {
      {"ple_history", true, false, &PendingLayer::ple_history, nullptr},
      {"ple_conv", false, false, &PendingLayer::ple_conv, nullptr},
      {"ple_history_checkpoint", true, false, &PendingLayer::ple_history_checkpoint, nullptr},
      {"ple_conv_checkpoint", false, false, &PendingLayer::ple_conv_checkpoint, nullptr},
      {"ple_history_snapshot", true, true, nullptr, &PendingLayer::ple_history_snapshot},
      {"ple_conv_snapshot", false, true, nullptr, &PendingLayer::ple_conv_snapshot}};
  const Field* fd = nullptr;
  for (const Field& x : fields)
    if (f == x.name) fd = &x;
  need(fd != nullptr, SSMC_ERR_ARGUMENT,
       "ssmc_state_tensor: unknown PLE field '" + f +
           "' (known: ple_history, ple_conv, ple_history_checkpoint, ple_conv_checkpoint, ple_history_snapshot, "
           "ple_conv_snapshot)");
  need(fd->history ? dtype != SSMC_F16 : dtype == SSMC_F32, SSMC_ERR_ARGUMENT,
       "ssmc_state_tensor: " + f + (fd->history ? " holds token ids (SSMC_I32 or SSMC_F32)" : " is f32"));
  Tensor x = Tensor::zeros(DType::f32, fd->history ? ple_history_shape(s) : ple_conv_shape(s));
  if (dtype == SSMC_I32) {
    std::vector<int32_t> ids(size_t(x.size()));
    copy_in(ids.data(), data, ids.size() * 4, mem, f.c_str());
    for (size_t i = 0; i < ids.size(); ++i)
      need(ids[i] >= 0 && ids[i] <= kMaxTokenId, SSMC_ERR_ARGUMENT,
           fmt::format("ssmc_state_tensor: {} of seq {} layer {}: element {} holds {}, not a token id (0..{})", f, seq,
                       layer, i, ids[i], kMaxTokenId));
    std::copy(ids.begin(), ids.end(), x.f32());
  } else {
    copy_in(x.raw(), data, x.bytes(), mem, f.c_str());
  }
  if (!fd->snapshot) {
    std::optional<Tensor>& slot = pl.*(fd->one);
    need(!slot.has_value(), SSMC_ERR_ORDER, fmt::format("{} of seq {} layer {} given twice", f, seq, layer));
    slot = std::move(x);
    return;
  }
  need(index >= 0 && index < 65536, SSMC_ERR_ARGUMENT, fmt::format("{}: index {} out of range", f, index));
  std::map<int, Tensor>& m = pl.*(fd->many);
  need(!m.count(index), SSMC_ERR_ORDER, fmt::format("{}[{}] of seq {} layer {} given twice", f, index, seq, layer));
  m.emplace(index, std::move(x));
}

// ---- Asynchronous capture (ssmc_set_async, ABI minor 5): the engine's thread records each call
// of an op (checking what it can without the data) and queues the op at ssmc_end_op; the writer
// thread replays the calls into t->inner with host pointers into the staging arena.
using ssmc_async::Call;
using ssmc_async::Staged;

Building& building_of(ssmc_trace* t) {
  need(t->building.has_value(), SSMC_ERR_ORDER, "no op begun (call ssmc_begin_op first)");
  return *t->building;
}

void async_entry(const Building& b, int entry) {
  need(b.op.takes_inputs(), SSMC_ERR_ORDER,
       [&] { return "op '" + to_string(b.op) + "' takes no inputs and makes no outputs"; });
  need(entry >= 0 && size_t(entry) < b.op.seqs.size(), SSMC_ERR_ARGUMENT,
       [&] { return fmt::format("entry {} outside the selector's 0..{}", entry, int(b.op.seqs.size()) - 1); });
}

// A pointer argument of the op: host bytes are copied now, a device pointer is kept for end_op.
Staged stage(Building& b, const void* p, size_t bytes, ssmc_memory mem, const std::string& what) {
  Staged s;
  s.given = p != nullptr;
  s.bytes = bytes;
  if (!p || bytes == 0) return s;
  if (mem == SSMC_HOST) {
    s.heap_off = b.heap.size();
    b.heap.insert(b.heap.end(), static_cast<const char*>(p), static_cast<const char*>(p) + bytes);
  } else if (mem == SSMC_DEVICE) {
#ifdef SSMC_WITH_CUDA
    s.device = true;
    s.src = p;
#else
    throw Failure{SSMC_ERR_DEVICE, what +
                                       ": SSMC_DEVICE pointer, but this libssmcheck_capture was built without CUDA "
                                       "(copy to host first, or rebuild with CUDA)"};
#endif
  } else {
    throw Failure{SSMC_ERR_ARGUMENT, what + ": memory must be SSMC_HOST or SSMC_DEVICE"};
  }
  return s;
}

// Lays the op's calls out in one range from offset 0: host bytes first, then the device ranges
// sorted by address and merged where they touch or overlap (one copy per run). Returns its size.
size_t lay_out(Building& b, std::vector<ssmc_async::DeviceCopy>& runs) {
  struct Dev {
    const char* src;
    size_t bytes;
    Staged* s;
  };
  std::vector<Dev> dev;
  size_t at = 0;
  for (Call& c : b.q.calls)
    for (Staged& s : c.data) {
      if (!s.given || s.bytes == 0) continue;
      if (s.device) {
        dev.push_back({static_cast<const char*>(s.src), s.bytes, &s});
      } else {
        s.pos = at;
        at += (s.bytes + 15) / 16 * 16;
      }
    }
  std::sort(dev.begin(), dev.end(), [](const Dev& x, const Dev& y) { return x.src < y.src; });
  runs.clear();
  for (const Dev& d : dev) {
    const char* run = runs.empty() ? nullptr : static_cast<const char*>(runs.back().src);
    if (run && d.src <= run + runs.back().bytes) {
      runs.back().bytes = std::max(runs.back().bytes, size_t(d.src + d.bytes - run));
      d.s->pos = runs.back().pos + uint64_t(d.src - run);
    } else {
      at = (at + 255) / 256 * 256;
      runs.push_back({d.src, at, d.bytes});
      d.s->pos = at;
    }
    at = size_t(runs.back().pos) + runs.back().bytes;
  }
  return at;
}

ssmc_status status_of(const std::string& what) {
  return what.find("writing failed") != std::string::npos || what.find("rename") != std::string::npos
             ? SSMC_ERR_IO
             : SSMC_ERR_INVALID;
}

// The writer's failures not reported yet, as the error of this call.
void report_background(ssmc_trace* t) {
  const std::vector<std::string> f = t->async->take_failures();
  if (f.empty()) return;
  std::string all;
  for (const std::string& x : f) all += (all.empty() ? "" : "; ") + x;
  throw Failure{status_of(all),
                fmt::format("{} op(s) failed in the background writer and are not in the trace: {}", f.size(), all)};
}

// The capture the writer thread writes through (the header is written here, on the caller's thread).
void start_inner(ssmc_trace* t) {
  if (t->inner) return;
  need(t->pool_set, SSMC_ERR_ORDER, "ssmc_begin_op before ssmc_set_pool");
  need(!t->header.model.spec.layers.empty(), SSMC_ERR_ORDER, "ssmc_begin_op before any ssmc_add_layer");
  check_weights_given(t, "ssmc_begin_op");
  auto in = std::make_unique<ssmc_trace>();
  in->path = t->path;
  in->header = t->header;
  in->layouts = t->layouts;
  in->pool_set = true;
  in->writer = std::make_unique<formats::TraceWriter>(t->path, t->header);
  t->inner = std::move(in);
}

// Runs on the writer thread: the op's calls again, on `in`, with host pointers into the arena.
std::string write_queued(ssmc_trace* in, const ssmc_async::Async& a, const ssmc_async::QueuedOp& q) {
  if (q.text.empty()) return "";  // an op that failed at end_op: only its staging range is given back
  auto p = [&](const Call& c, size_t i) -> const void* { return c.data[i].given ? a.at(c.data[i].pos) : nullptr; };
  auto f = [&](const Call& c, size_t i) { return static_cast<const float*>(p(c, i)); };
  auto ok = [](ssmc_status st) {
    if (st != SSMC_OK) throw std::runtime_error(ssmc_last_error());
  };
  try {
    ok(ssmc_begin_op(in, q.text.c_str()));
    for (const Call& c : q.calls) switch (c.kind) {
        case Call::inputs: ok(ssmc_op_inputs(in, c.i0, c.i1, f(c, 0), f(c, 1), f(c, 2), f(c, 3), SSMC_HOST)); break;
        case Call::ple_inputs:
          ok(ssmc_op_ple_inputs(in, c.i0, c.i1, static_cast<const int32_t*>(p(c, 0)), f(c, 1), SSMC_HOST));
          break;
        case Call::outputs: ok(ssmc_op_outputs(in, c.i0, c.i1, f(c, 0), SSMC_HOST)); break;
        case Call::ple_outputs: ok(ssmc_op_ple_outputs(in, c.i0, c.i1, f(c, 0), SSMC_HOST)); break;
        case Call::input:
          ok(ssmc_op_input(in, c.i0, c.i1, c.text.c_str(), ssmc_dtype(c.i3), p(c, 0), SSMC_HOST));
          break;
        case Call::output: ok(ssmc_op_output(in, c.i0, c.i1, c.text.c_str(), f(c, 0), SSMC_HOST)); break;
        case Call::refused: ok(ssmc_op_refused(in, c.text.c_str())); break;
        case Call::state_begin: ok(ssmc_state_begin(in, c.i0, c.i1, c.i2)); break;
        case Call::state_tensor:
          ok(ssmc_state_tensor(in, c.i0, c.i1, c.text.c_str(), c.i2, ssmc_dtype(c.i3), p(c, 0), SSMC_HOST));
          break;
      }
    if (q.states_dropped) in->op->op.states_dropped = true;
    ok(ssmc_end_op(in));
    return "";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    ssmc_drop_op(in);
    return fmt::format("op {} '{}': {}", q.index, q.text, what);
  }
}

// The bytes ssmc_state_tensor reads for `field` of `layer` (its checks: field known, layer hosts it).
size_t state_bytes(ssmc_trace* t, int layer, const std::string& f, ssmc_dtype dtype) {
  const size_t esz = dtype == SSMC_F16 ? 2 : 4;
  std::vector<int64_t> shape;
  if (f == "h_prefill_stage") {
    shape = {stage_elems(t->header.model.spec)};
  } else {
    const LayerSpec& s = layer_of(t, layer);
    const StateLayout lay = t->layouts.count(layer) ? t->layouts.at(layer) : StateLayout{};
    if (f.rfind("ple_", 0) == 0)
      shape = f.find("history") != std::string::npos ? ple_history_shape(ple_layer_of(t, layer, "ssmc_state_tensor"))
                                                     : ple_conv_shape(ple_layer_of(t, layer, "ssmc_state_tensor"));
    else if (f == "h" || f == "h_checkpoint" || f == "h_intermediate") shape = h_shape_in(s, lay);
    else if (f == "conv" || f == "conv_checkpoint" || f == "conv_intermediate") shape = conv_shape_in(s, lay);
    else
      throw Failure{SSMC_ERR_ARGUMENT,
                    "ssmc_state_tensor: unknown field '" + f +
                        "' (known: h, conv, h_checkpoint, conv_checkpoint, h_intermediate, conv_intermediate, "
                        "h_prefill_stage, and on a layer hosting a PLE carry ple_history, ple_conv, their _checkpoint "
                        "and _snapshot)"};
  }
  size_t n = esz;
  for (int64_t d : shape) n *= size_t(d);
  return n;
}

void end_async(ssmc_trace* t) {
  Building& b = building_of(t);
  ssmc_async::Async& a = *t->async;
  const bool has_states = std::any_of(b.q.calls.begin(), b.q.calls.end(), [](const Call& c) { return c.is_state(); });
  std::vector<ssmc_async::DeviceCopy> runs;
  size_t n = lay_out(b, runs);
  uint64_t pos = 0;
  try {
    if (!a.reserve(n, a.policy() == ssmc_async::Policy::drop_states && has_states, pos)) {
      // the drop policy: the op goes on without its states, marked so in the trace
      b.q.calls.erase(std::remove_if(b.q.calls.begin(), b.q.calls.end(), [](const Call& c) { return c.is_state(); }),
                      b.q.calls.end());
      b.q.states_dropped = true;
      n = lay_out(b, runs);
      a.reserve(n, false, pos);
    }
  } catch (const std::length_error& e) {
    throw Failure{SSMC_ERR_INVALID, fmt::format("ssmc_end_op: op {} '{}': {} (ssmc_set_async's staging_bytes)",
                                                b.q.index, b.q.text, e.what())};
  }
  b.q.end = pos + n;
  for (Call& c : b.q.calls)
    for (Staged& s : c.data)
      if (s.given && s.bytes > 0) {
        s.pos += pos;
        if (!s.device) std::memcpy(a.at(s.pos), b.heap.data() + s.heap_off, s.bytes);
      }
  for (ssmc_async::DeviceCopy& r : runs) r.pos += pos;
  try {
    a.copy_from_device(b.q, runs, b.stream);
  } catch (const std::exception& e) {
    ssmc_async::QueuedOp hole;  // gives the reserved range back in order
    hole.end = b.q.end;
    hole.copied = b.q.copied;
    a.push(std::move(hole));
    throw Failure{SSMC_ERR_DEVICE, fmt::format("ssmc_end_op: op {} '{}': {}", b.q.index, b.q.text, e.what())};
  }
  t->states_dropped += b.q.states_dropped ? 1 : 0;
  ++t->accepted;
  a.push(std::move(b.q));
  t->building.reset();
}

// An asynchronous capture's input or output by name (ABI minor 6): the call queued with its rows of
// `width` 4-byte values staged (host bytes copied now, device arrays at ssmc_end_op).
void queue_named(Building& bu, Call::Kind kind, int entry, int layer, const char* name, int dtype, const void* data,
                 int64_t width, ssmc_memory mem, const std::string& at) {
  Call c{kind};
  c.i0 = entry;
  c.i1 = layer;
  c.i3 = dtype;
  c.text = name;
  c.data.push_back(stage(bu, data, size_t(bu.op.rows()) * size_t(width) * 4, mem, at + " " + name));
  bu.q.calls.push_back(std::move(c));
}

}  // namespace

extern "C" {

const char* ssmc_last_error(void) { return g_error.c_str(); }
int ssmc_trace_version(void) { return ssm::formats::kTraceVersion; }
int ssmc_abi_minor(void) { return SSMC_ABI_MINOR; }
int ssmc_device_support(void) {
#ifdef SSMC_WITH_CUDA
  return 1;
#else
  return 0;
#endif
}

ssmc_status ssmc_open(const char* path, const char* producer, const char* backend, const char* model_name,
                      const char* h_mode, ssmc_trace** out) {
  if (!out) return fail(SSMC_ERR_ARGUMENT, "ssmc_open: out is null");
  *out = nullptr;
  auto t = std::make_unique<ssmc_trace>();
  const ssmc_status s = call(nullptr, false, [&] {
    need(path && *path, SSMC_ERR_ARGUMENT, "ssmc_open: empty path");
    need(producer != nullptr, SSMC_ERR_ARGUMENT, "ssmc_open: producer is null");
    need(h_mode != nullptr, SSMC_ERR_ARGUMENT, "ssmc_open: h_mode is null");
    t->path = path;
    t->header.producer = producer;
    t->header.backend = backend ? backend : producer;
    t->header.model.spec.name = model_name ? model_name : "";
    try {
      t->header.pool.h_mode = parse_h_mode(h_mode);
    } catch (const std::exception& e) {
      throw Failure{SSMC_ERR_ARGUMENT, std::string("ssmc_open: ") + e.what()};
    }
  });
  if (s == SSMC_OK) *out = t.release();
  return s;
}

ssmc_status ssmc_set_pool(ssmc_trace* t, int max_slots, const int* h_capacity, int conv_capacity,
                          int snapshot_slots) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_set_pool: null trace");
  return call(t, false, [&] {
    need(!t->header_written(), SSMC_ERR_ORDER, "ssmc_set_pool after the first op");
    need(max_slots >= 1 && max_slots <= 65536, SSMC_ERR_ARGUMENT, "ssmc_set_pool: max_slots must be in 1..65536");
    PoolConfig p = t->header.pool;  // a refused call changes nothing
    p.max_slots = max_slots;
    p.conv_capacity = conv_capacity;
    p.snapshot_slots = snapshot_slots;
    p.h_capacity.clear();
    if (h_capacity) p.h_capacity.assign(h_capacity, h_capacity + max_slots);
    try {
      p.validate();  // the same bounds as the trace reader's (core/model.h)
    } catch (const std::exception& e) {
      throw Failure{SSMC_ERR_ARGUMENT, std::string("ssmc_set_pool: ") + e.what()};
    }
    t->header.pool = p;
    t->pool_set = true;
  });
}

ssmc_status ssmc_add_layer(ssmc_trace* t, const ssmc_layer_desc* d, const float* conv_w, const float* conv_bias,
                           const float* A_log, const float* dt_bias, const float* norm_w) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_add_layer: null trace");
  return call(t, false, [&] {
    need(!t->header_written(), SSMC_ERR_ORDER, "ssmc_add_layer after the first op");
    need(d != nullptr, SSMC_ERR_ARGUMENT, "ssmc_add_layer: desc is null");
    LayerSpec s;
    s.nk = d->nk;
    s.nv = d->nv;
    s.kd = d->kd;
    s.vd = d->vd;
    s.d_conv = d->d_conv;
    s.conv_bias = d->conv_bias != 0;
    s.output_gate = d->sigmoid_gate ? OutputGate::sigmoid : OutputGate::silu;
    s.eps = d->eps;
    try {
      s.validate();
    } catch (const std::exception& e) {
      throw Failure{SSMC_ERR_ARGUMENT, std::string("ssmc_add_layer: ") + e.what()};
    }
    need(!s.conv_bias || conv_bias, SSMC_ERR_ARGUMENT, "ssmc_add_layer: desc says conv_bias but the pointer is null");
    LayerWeights w;
    w.conv_w = floats(conv_w, size_t(s.conv_elems()), SSMC_HOST, "conv_w");
    if (s.conv_bias) w.conv_bias = floats(conv_bias, size_t(s.conv_dim()), SSMC_HOST, "conv_bias");
    w.A_log = floats(A_log, size_t(s.nv), SSMC_HOST, "A_log");
    w.dt_bias = floats(dt_bias, size_t(s.nv), SSMC_HOST, "dt_bias");
    w.norm_w = floats(norm_w, size_t(s.vd), SSMC_HOST, "norm_w");
    t->header.model.spec.layers.push_back(s);
    t->header.model.weights.push_back(std::move(w));
  });
}

ssmc_status ssmc_add_mamba2_layer(ssmc_trace* t, const ssmc_mamba2_layer_desc* d, const float* conv_w,
                                  const float* conv_bias, const float* A_log, const float* dt_bias, const float* D,
                                  const float* norm_w) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_add_mamba2_layer: null trace");
  return call(t, false, [&] {
    need(!t->header_written(), SSMC_ERR_ORDER, "ssmc_add_mamba2_layer after the first op");
    need(d != nullptr, SSMC_ERR_ARGUMENT, "ssmc_add_mamba2_layer: desc is null");
    const size_t index = t->header.model.spec.layers.size();
    const std::string at = fmt::format("ssmc_add_mamba2_layer: layer {}", index);
    LayerSpec s;
    s.kind = LayerKind::mamba2;
    s.nh = d->nh;
    s.hp = d->hp;
    s.ns = d->ns;
    s.ng = d->ng;
    s.d_conv = d->d_conv;
    s.conv_bias = d->conv_bias != 0;
    s.norm_before_gate = d->norm_before_gate != 0;
    s.dt_min = d->dt_min;
    // 0 (a zero-initialised desc) means no upper limit, as INFINITY does: dt_max 0 is never valid
    s.dt_max = d->dt_max == 0.0f ? std::numeric_limits<float>::infinity() : d->dt_max;
    s.eps = d->eps;
    try {
      s.validate();
    } catch (const std::exception& e) {
      throw Failure{SSMC_ERR_ARGUMENT, at + ": " + e.what()};
    }
    check_reader_bounds(s, at);
    need(!s.conv_bias || conv_bias, SSMC_ERR_ARGUMENT, at + ": desc says conv_bias but the pointer is null");
    need(s.conv_bias || !conv_bias, SSMC_ERR_ARGUMENT,
         at + ": a conv_bias pointer was given but desc.conv_bias is 0 (set it to 1, or pass NULL)");
    const std::pair<std::vector<float> LayerWeights::*, const float*> given[] = {
        {&LayerWeights::conv_w, conv_w}, {&LayerWeights::conv_bias, conv_bias}, {&LayerWeights::A_log, A_log},
        {&LayerWeights::dt_bias, dt_bias}, {&LayerWeights::D, D},           {&LayerWeights::norm_w, norm_w}};
    LayerWeights w;
    for (const WeightField& f : s.weights()) {
      const float* ptr = nullptr;
      for (const auto& [member, q] : given)
        if (member == f.member) ptr = q;
      w.*f.member = weight_values(f, ptr, at);
    }
    t->header.model.spec.layers.push_back(s);
    t->header.model.weights.push_back(std::move(w));
  });
}

ssmc_status ssmc_begin_op(ssmc_trace* t, const char* op) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_begin_op: null trace");
  return call(t, true, [&] {
    if (t->async) report_background(t);
    need(!t->op.has_value() && !t->building.has_value(), SSMC_ERR_ORDER,
         "ssmc_begin_op: the previous op was not ended (ssmc_end_op)");
    need(op != nullptr, SSMC_ERR_ARGUMENT, "ssmc_begin_op: op is null");
    if (t->async) {
      start_inner(t);
      Building b;
      try {
        b.op = parse_op(op);
      } catch (const std::exception& e) {
        throw Failure{SSMC_ERR_ARGUMENT, "ssmc_begin_op: " + op_error(op, e.what())};
      }
      b.q.text = to_string(b.op);
      b.q.index = t->accepted - t->async->failures();
      t->building = std::move(b);
      t->op_thread = std::this_thread::get_id();
      return;
    }
    if (!t->writer) {
      need(t->pool_set, SSMC_ERR_ORDER, "ssmc_begin_op before ssmc_set_pool");
      need(!t->header.model.spec.layers.empty(), SSMC_ERR_ORDER, "ssmc_begin_op before any ssmc_add_layer");
      check_weights_given(t, "ssmc_begin_op");
      t->writer = std::make_unique<formats::TraceWriter>(t->path, t->header);
    }
    PendingOp p;
    try {
      p.op.op = parse_op(op);
    } catch (const std::exception& e) {
      throw Failure{SSMC_ERR_ARGUMENT, "ssmc_begin_op: " + op_error(op, e.what())};
    }
    const Op& o = p.op.op;
    if (o.takes_inputs()) p.op.inputs.resize(o.seqs.size());
    t->op = std::move(p);
    t->op_thread = std::this_thread::get_id();
  });
}

ssmc_status ssmc_op_inputs(ssmc_trace* t, int entry, int layer, const float* x, const float* a, const float* b,
                           const float* z, ssmc_memory mem) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_op_inputs: null trace");
  return call(t, true, [&] {
    if (t->async) {
      Building& bu = building_of(t);
      async_entry(bu, entry);
      const LayerSpec& s = layer_of(t, layer);
      const std::pair<const char*, std::vector<float> LayerRows::*> members[] = {
          {"x", &LayerRows::conv_in}, {"a", &LayerRows::dt_in}, {"b", &LayerRows::beta_in}, {"z", &LayerRows::gate_in}};
      const float* ptrs[] = {x, a, b, z};
      Call c{Call::inputs};
      c.i0 = entry;
      c.i1 = layer;
      c.data.reserve(4);
      const std::vector<InputField> fields = s.inputs();
      for (size_t k = 0; k < 4; ++k) {
        int64_t width = 0;  // 0: the layer's kind takes no such input (a pointer given is refused by the writer)
        for (const InputField& f : fields)
          if (f.member == members[k].second) width = f.width;
        c.data.push_back(stage(bu, ptrs[k], size_t(bu.op.rows()) * size_t(width) * 4, mem, members[k].first));
      }
      bu.q.calls.push_back(std::move(c));
      return;
    }
    PendingOp& p = current(t);
    check_entry(p, entry);
    const LayerSpec& s = layer_of(t, layer);
    // The four pointers by parameter name and the LayerRows member they fill; which of them the
    // layer's kind takes, under which names and widths, is LayerSpec::inputs() (GDN x, a, b, z;
    // Mamba-2 xBC in x, dt in a, z).
    struct Given {
      const char* param;
      std::vector<float> LayerRows::*member;
      const float* ptr;
    };
    const Given given[] = {{"x", &LayerRows::conv_in, x},
                           {"a", &LayerRows::dt_in, a},
                           {"b", &LayerRows::beta_in, b},
                           {"z", &LayerRows::gate_in, z}};
    std::vector<InputField> fields = s.inputs();  // the kind's own; the PLE ones come by ssmc_op_ple_inputs
    fields.erase(std::remove_if(fields.begin(), fields.end(),
                                [](const InputField& f) {
                                  return f.member == &LayerRows::ple_tokens || f.member == &LayerRows::ple_x;
                                }),
                 fields.end());
    const StepInputs& in = p.op.inputs[size_t(entry)];
    need(in.layers.empty() ||
             std::all_of(fields.begin(), fields.end(),
                         [&](const InputField& f) { return (in.layers[size_t(layer)].*f.member).empty(); }),
         SSMC_ERR_ORDER, fmt::format("ssmc_op_inputs: entry {} layer {} given twice", entry, layer));
    std::string takes;
    for (const InputField& f : fields)
      for (const Given& g : given)
        if (g.member == f.member)
          takes += fmt::format("{}{}{}", takes.empty() ? "" : ", ", f.name,
                               g.param == std::string(f.name) ? "" : fmt::format(" (as {})", g.param));
    for (const Given& g : given) {
      const bool taken = std::any_of(fields.begin(), fields.end(), [&](const InputField& f) { return f.member == g.member; });
      need(taken || g.ptr == nullptr, SSMC_ERR_ARGUMENT,
           fmt::format("ssmc_op_inputs: entry {} layer {} is a {} layer, {}: it takes {}; {} must be NULL", entry, layer,
                       to_string(s.kind), s.name(), takes, g.param));
    }
    for (const InputField& f : fields) {
      const Given& g = *std::find_if(std::begin(given), std::end(given), [&](const Given& q) { return q.member == f.member; });
      // GDN's errors name the parameter as they always have; Mamba-2's name the field and where
      const std::string what = s.kind == LayerKind::gdn
                                   ? std::string(g.param)
                                   : fmt::format("ssmc_op_inputs: entry {} layer {} {} [rows][{}] (parameter {})", entry,
                                                 layer, f.name, f.width, g.param);
      put_input(t, p, entry, layer, f, SSMC_F32, g.ptr, mem, what);
    }
  });
}

ssmc_status ssmc_op_outputs(ssmc_trace* t, int entry, int layer, const float* out, ssmc_memory mem) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_op_outputs: null trace");
  return call(t, true, [&] {
    if (t->async) {
      Building& bu = building_of(t);
      async_entry(bu, entry);
      Call c{Call::outputs};
      c.i0 = entry;
      c.i1 = layer;
      c.data.push_back(stage(bu, out, size_t(bu.op.rows()) * size_t(layer_of(t, layer).out_dim()) * 4, mem, "out"));
      bu.q.calls.push_back(std::move(c));
      return;
    }
    PendingOp& p = current(t);
    check_entry(p, entry);
    const LayerSpec& s = layer_of(t, layer);
    StepOutputs& o = outputs_of(t, p, entry);
    need(o.layers[size_t(layer)].empty(), SSMC_ERR_ORDER,
         fmt::format("ssmc_op_outputs: entry {} layer {} given twice", entry, layer));
    put_output(t, p, entry, layer, output_named(s, "out", "ssmc_op_outputs"), out, mem, "out");
  });
}

ssmc_status ssmc_op_ple_outputs(ssmc_trace* t, int entry, int layer, const float* out, ssmc_memory mem) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_op_ple_outputs: null trace");
  return call(t, true, [&] {
    if (t->async) {
      Building& bu = building_of(t);
      async_entry(bu, entry);
      const LayerSpec& s = ple_layer_of(t, layer, "ssmc_op_ple_outputs");
      Call c{Call::ple_outputs};
      c.i0 = entry;
      c.i1 = layer;
      c.data.push_back(
          stage(bu, out, size_t(bu.op.rows()) * size_t(s.ple.channels) * 4, mem, "ssmc_op_ple_outputs out"));
      bu.q.calls.push_back(std::move(c));
      return;
    }
    PendingOp& p = current(t);
    check_entry(p, entry);
    const LayerSpec& s = ple_layer_of(t, layer, "ssmc_op_ple_outputs");
    StepOutputs& o = outputs_of(t, p, entry);
    need(o.ple[size_t(layer)].empty(), SSMC_ERR_ORDER,
         fmt::format("ssmc_op_ple_outputs: entry {} layer {} given twice", entry, layer));
    const std::string what = fmt::format("ssmc_op_ple_outputs: entry {} layer {} out [rows][{}]", entry, layer,
                                         s.ple.channels);
    put_output(t, p, entry, layer, output_named(s, "ple_out", "ssmc_op_ple_outputs"), out, mem, what);
  });
}

ssmc_status ssmc_op_ple_inputs(ssmc_trace* t, int entry, int layer, const int32_t* tokens, const float* x,
                               ssmc_memory mem) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_op_ple_inputs: null trace");
  return call(t, true, [&] {
    if (t->async) {
      Building& bu = building_of(t);
      async_entry(bu, entry);
      const LayerSpec& s = ple_layer_of(t, layer, "ssmc_op_ple_inputs");
      const size_t rows = size_t(bu.op.rows());
      Call c{Call::ple_inputs};
      c.i0 = entry;
      c.i1 = layer;
      c.data.push_back(stage(bu, tokens, rows * 4, mem, "ssmc_op_ple_inputs tokens"));
      c.data.push_back(stage(bu, x, rows * size_t(s.ple.channels) * 4, mem, "ssmc_op_ple_inputs x"));
      bu.q.calls.push_back(std::move(c));
      return;
    }
    PendingOp& p = current(t);
    check_entry(p, entry);
    const LayerSpec& s = ple_layer_of(t, layer, "ssmc_op_ple_inputs");
    const StepInputs& in = p.op.inputs[size_t(entry)];
    need(in.layers.empty() || in.layers[size_t(layer)].ple_x.empty(), SSMC_ERR_ORDER,
         fmt::format("ssmc_op_ple_inputs: entry {} layer {} given twice", entry, layer));
    const std::string at = fmt::format("ssmc_op_ple_inputs: entry {} layer {}", entry, layer);
    put_input(t, p, entry, layer, input_named(s, "ple_tokens", at), SSMC_I32, tokens, mem, at + " tokens");
    put_input(t, p, entry, layer, input_named(s, "ple_x", at), SSMC_F32, x, mem,
              at + fmt::format(" x [rows][{}]", s.ple.channels));
  });
}

ssmc_status ssmc_set_layer_ple(ssmc_trace* t, int layer, const ssmc_ple_desc* desc, const float* ple_w) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_set_layer_ple: null trace");
  return call(t, false, [&] {
    need(!t->header_written(), SSMC_ERR_ORDER,
         "ssmc_set_layer_ple after the first ssmc_begin_op (the header is written)");
    need(desc != nullptr, SSMC_ERR_ARGUMENT, "ssmc_set_layer_ple: desc is null");
    LayerSpec s = layer_of(t, layer);
    const std::string at = fmt::format("ssmc_set_layer_ple: layer {}", layer);
    need(!s.ple.hosted(), SSMC_ERR_ORDER, at + ": already hosts a PLE carry");
    s.ple = PleSpec{desc->channels, desc->ngram_size, desc->k_size, desc->dilation, desc->eos_id};
    need(desc->channels > 0, SSMC_ERR_ARGUMENT, at + ": channels must be >= 1");
    try {
      s.validate();
    } catch (const std::exception& e) {
      throw Failure{SSMC_ERR_ARGUMENT, at + ": " + e.what()};
    }
    const std::vector<WeightField> weights = s.weights();
    const auto f = std::find_if(weights.begin(), weights.end(),
                                [](const WeightField& x) { return x.member == &LayerWeights::ple_w; });
    std::vector<float> w = weight_values(*f, ple_w, at);
    t->header.model.spec.layers[size_t(layer)] = s;
    t->header.model.weights[size_t(layer)].ple_w = std::move(w);
  });
}

ssmc_status ssmc_set_layer_convention(ssmc_trace* t, int layer, const char* name, const char* value) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_set_layer_convention: null trace");
  return call(t, false, [&] {
    need(!t->header_written(), SSMC_ERR_ORDER,
         "ssmc_set_layer_convention after the first ssmc_begin_op (the header is written)");
    need(name != nullptr && value != nullptr, SSMC_ERR_ARGUMENT, "ssmc_set_layer_convention: name or value is null");
    LayerSpec s = layer_of(t, layer);  // a refused call changes nothing
    StateLayout lay = t->layouts.count(layer) ? t->layouts.at(layer) : StateLayout{};
    const std::string at = fmt::format("ssmc_set_layer_convention: layer {}", layer);
    try {
      set_convention(s, lay, name, value);  // core/conventions.h: the names and their parsing
      s.validate();
    } catch (const std::invalid_argument& e) {
      throw Failure{SSMC_ERR_ARGUMENT, at + ": " + e.what()};
    }
    need(lay.conv_window == ConvWindow::d_conv || s.d_conv >= 2, SSMC_ERR_ARGUMENT,
         fmt::format("{}: conv_window d_conv-1 on {}: a window of d_conv 1 keeps no column", at, s.name()));
    t->header.model.spec.layers[size_t(layer)] = s;
    t->layouts[layer] = lay;
  });
}

int ssmc_state_field_shape(ssmc_trace* t, int layer, const char* field, int64_t dims[4]) {
  if (!t) {
    fail(SSMC_ERR_ARGUMENT, "ssmc_state_field_shape: null trace");
    return -1;
  }
  std::vector<int64_t> shape;
  const ssmc_status st = call(t, false, [&] {
    need(field != nullptr && dims != nullptr, SSMC_ERR_ARGUMENT, "ssmc_state_field_shape: field or dims is null");
    const LayerSpec& s = layer_of(t, layer);
    std::vector<std::string> known;
    for (const NamedField& f : layer_group(t, s, layer, "state", "ssmc_state_field_shape")) {
      if (f.name == std::string(field)) shape = f.dims;
      known.push_back(f.name);
    }
    need(!shape.empty(), SSMC_ERR_ARGUMENT,
         "ssmc_state_field_shape: unknown field '" + std::string(field) + "' (known: " + joined(known) + ")");
  });
  if (st != SSMC_OK) return -1;
  std::copy(shape.begin(), shape.end(), dims);
  return int(shape.size());
}

// ---- ABI minor 6: by name

ssmc_status ssmc_add_layer_by_name(ssmc_trace* t, const char* kind, int n_attrs, const char* const* names,
                                   const char* const* values, int* layer) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_add_layer_by_name: null trace");
  return call(t, false, [&] {
    const size_t index = t->header.model.spec.layers.size();
    const std::string at = fmt::format("ssmc_add_layer_by_name: layer {}", index);
    need(!t->header_written(), SSMC_ERR_ORDER, "ssmc_add_layer_by_name after the first op");
    need(kind != nullptr, SSMC_ERR_ARGUMENT, at + ": kind is null");
    need(n_attrs >= 0 && n_attrs <= 4096, SSMC_ERR_ARGUMENT,
         fmt::format("{}: n_attrs {} outside 0..4096", at, n_attrs));
    need(n_attrs == 0 || (names && values), SSMC_ERR_ARGUMENT, at + ": names or values is null");
    std::vector<LayerAttr> attrs;
    std::optional<std::string> printed;  // "name", as traces write it: checked against the layer's
    for (int i = 0; i < n_attrs; ++i) {
      need(names[i] && values[i], SSMC_ERR_ARGUMENT, fmt::format("{}: attribute {}: name or value is null", at, i));
      const std::string n = names[i];
      if (n == "name") {
        need(!printed, SSMC_ERR_ARGUMENT, at + ": 'name' is given twice");
        printed = values[i];
        continue;
      }
      for (const char* layout : {"conv_window", "h_layout"})
        need(n != layout, SSMC_ERR_ARGUMENT,
             fmt::format("{}: '{}' is a layout the engine keeps its state in, not a layer attribute: declare it with "
                         "ssmc_set_layer_convention once the layer is added",
                         at, n));
      attrs.push_back({n, values[i]});
    }
    LayerSpec s;
    try {
      s = layer_from_attrs(kind, attrs, at);  // core/layer_attrs.h: names, values, requirements
    } catch (const std::invalid_argument& e) {
      throw Failure{SSMC_ERR_ARGUMENT, e.what()};
    }
    need(!printed || *printed == s.name(), SSMC_ERR_ARGUMENT,
         fmt::format("{}: name '{}' is not the layer the attributes describe, {}", at, printed.value_or(""), s.name()));
    check_reader_bounds(s, at);
    t->header.model.spec.layers.push_back(s);
    t->header.model.weights.emplace_back();  // each given by ssmc_set_layer_weight
    if (layer) *layer = int(index);
  });
}

ssmc_status ssmc_set_layer_weight(ssmc_trace* t, int layer, const char* name, const float* data, int64_t count) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_set_layer_weight: null trace");
  return call(t, false, [&] {
    need(!t->header_written(), SSMC_ERR_ORDER,
         "ssmc_set_layer_weight after the first ssmc_begin_op (the header is written)");
    const LayerSpec& s = layer_of(t, layer);
    const std::string at = fmt::format("ssmc_set_layer_weight: layer {}", layer);
    need(name != nullptr, SSMC_ERR_ARGUMENT, at + ": name is null");
    std::vector<std::string> known;
    for (const WeightField& f : s.weights()) {
      known.push_back(f.name);
      if (f.name != std::string(name)) continue;
      need(count >= 0 && size_t(count) == elems(f.shape), SSMC_ERR_ARGUMENT,
           fmt::format("{} weight {} {}: count {}, expected {}", at, f.name, shape_text(f.shape), count,
                       elems(f.shape)));
      t->header.model.weights[size_t(layer)].*f.member = weight_values(f, data, at);
      return;
    }
    unknown_name(at, name, "weight", s, known);
  });
}

ssmc_status ssmc_op_input(ssmc_trace* t, int entry, int layer, const char* name, ssmc_dtype dtype, const void* data,
                          ssmc_memory mem) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_op_input: null trace");
  return call(t, true, [&] {
    const std::string at = fmt::format("ssmc_op_input: entry {} layer {}", entry, layer);
    if (t->async) {
      Building& bu = building_of(t);
      async_entry(bu, entry);
      const InputField f = input_named(layer_of(t, layer), name, at);
      check_input_dtype(f, dtype, at);
      need(data != nullptr, SSMC_ERR_ARGUMENT, fmt::format("{} {}: null pointer", at, f.name));
      queue_named(bu, Call::input, entry, layer, f.name, int(dtype), data, f.width, mem, at);
      return;
    }
    PendingOp& p = current(t);
    check_entry(p, entry);
    const InputField f = input_named(layer_of(t, layer), name, at);
    check_input_dtype(f, dtype, at);
    put_input(t, p, entry, layer, f, dtype, data, mem, fmt::format("{} {} [rows][{}]", at, f.name, f.width));
  });
}

ssmc_status ssmc_op_output(ssmc_trace* t, int entry, int layer, const char* name, const float* data, ssmc_memory mem) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_op_output: null trace");
  return call(t, true, [&] {
    const std::string at = fmt::format("ssmc_op_output: entry {} layer {}", entry, layer);
    if (t->async) {
      Building& bu = building_of(t);
      async_entry(bu, entry);
      const OutputField f = output_named(layer_of(t, layer), name, at);
      need(data != nullptr, SSMC_ERR_ARGUMENT, fmt::format("{} {}: null pointer", at, f.name));
      queue_named(bu, Call::output, entry, layer, f.name, 0, data, f.width, mem, at);
      return;
    }
    PendingOp& p = current(t);
    check_entry(p, entry);
    const OutputField f = output_named(layer_of(t, layer), name, at);
    put_output(t, p, entry, layer, f, data, mem, fmt::format("{} {} [rows][{}]", at, f.name, f.width));
  });
}

int ssmc_layer_fields(ssmc_trace* t, int layer, const char* group) {
  if (!t) {
    fail(SSMC_ERR_ARGUMENT, "ssmc_layer_fields: null trace");
    return -1;
  }
  int n = -1;
  const ssmc_status st = call(t, false, [&] {
    need(group != nullptr, SSMC_ERR_ARGUMENT, "ssmc_layer_fields: group is null");
    n = int(layer_group(t, layer_of(t, layer), layer, group, "ssmc_layer_fields").size());
  });
  return st == SSMC_OK ? n : -1;
}

ssmc_status ssmc_layer_field(ssmc_trace* t, int layer, const char* group, int i, const char** name, int* rank,
                             int64_t dims[4]) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_layer_field: null trace");
  return call(t, false, [&] {
    need(group != nullptr && name != nullptr && rank != nullptr && dims != nullptr, SSMC_ERR_ARGUMENT,
         "ssmc_layer_field: group, name, rank or dims is null");
    const std::vector<NamedField> v = layer_group(t, layer_of(t, layer), layer, group, "ssmc_layer_field");
    need(i >= 0 && size_t(i) < v.size(), SSMC_ERR_ARGUMENT,
         fmt::format("ssmc_layer_field: layer {} {} field {} outside 0..{}", layer, group, i, int(v.size()) - 1));
    const NamedField& f = v[size_t(i)];
    need(f.dims.size() <= 4, SSMC_ERR_INVALID,
         fmt::format("ssmc_layer_field: layer {} {} {} has rank {}, more than 4", layer, group, f.name, f.dims.size()));
    *name = f.name;  // a string literal of core/ or of this file: valid for the library's lifetime
    *rank = int(f.dims.size());
    std::copy(f.dims.begin(), f.dims.end(), dims);
  });
}

ssmc_status ssmc_op_refused(ssmc_trace* t, const char* kind) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_op_refused: null trace");
  return call(t, true, [&] {
    if (t->async) {
      Building& bu = building_of(t);
      need(kind != nullptr, SSMC_ERR_ARGUMENT, "ssmc_op_refused: kind is null");
      Call c{Call::refused};
      c.text = kind;
      bu.q.calls.push_back(std::move(c));
      return;
    }
    PendingOp& p = current(t);
    need(kind != nullptr, SSMC_ERR_ARGUMENT, "ssmc_op_refused: kind is null");
    if (const auto k = parse_error_kind(kind)) {
      p.op.refused = *k;
      return;
    }
    throw Failure{SSMC_ERR_ARGUMENT, "ssmc_op_refused: unknown error kind '" + std::string(kind) +
                                         "' (known: " + known_error_kinds() + ")"};
  });
}

ssmc_status ssmc_state_begin(ssmc_trace* t, int seq, int slot, int last_verify_k) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_state_begin: null trace");
  return call(t, true, [&] {
    if (t->async) {
      Building& bu = building_of(t);
      Call c{Call::state_begin};
      c.i0 = seq;
      c.i1 = slot;
      c.i2 = last_verify_k;
      bu.q.calls.push_back(std::move(c));
      return;
    }
    PendingOp& p = current(t);
    need(seq >= 0, SSMC_ERR_ARGUMENT, "ssmc_state_begin: negative sequence");
    need(last_verify_k >= 0 && last_verify_k <= 65536, SSMC_ERR_ARGUMENT, "ssmc_state_begin: bad last_verify_k");
    need(!p.states.count(seq), SSMC_ERR_ORDER, fmt::format("ssmc_state_begin: sequence {} begun twice", seq));
    PendingSeq& s = p.states[seq];
    s.slot = slot;
    s.last_verify_k = last_verify_k;
  });
}

ssmc_status ssmc_state_tensor(ssmc_trace* t, int seq, int layer, const char* field, int index, ssmc_dtype dtype,
                              const void* data, ssmc_memory mem) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_state_tensor: null trace");
  return call(t, true, [&] {
    if (t->async) {
      Building& bu = building_of(t);
      need(field != nullptr, SSMC_ERR_ARGUMENT, "ssmc_state_tensor: field is null");
      Call c{Call::state_tensor};
      c.i0 = seq;
      c.i1 = layer;
      c.i2 = index;
      c.i3 = int(dtype);
      c.text = field;
      c.data.push_back(stage(bu, data, state_bytes(t, layer, c.text, dtype), mem, c.text));
      bu.q.calls.push_back(std::move(c));
      return;
    }
    PendingOp& p = current(t);
    need(field != nullptr, SSMC_ERR_ARGUMENT, "ssmc_state_tensor: field is null");
    need(p.states.count(seq), SSMC_ERR_ORDER, fmt::format("ssmc_state_tensor: sequence {} not begun", seq));
    need(dtype == SSMC_F32 || dtype == SSMC_F16 || dtype == SSMC_I32, SSMC_ERR_ARGUMENT,
         "ssmc_state_tensor: dtype must be SSMC_F32, SSMC_F16 or SSMC_I32");
    PendingSeq& ps = p.states[seq];
    const std::string f = field;
    if (f.rfind("ple_", 0) == 0) return ple_state_tensor(t, ps.layers[layer], seq, layer, f, index, dtype, data, mem);
    need(dtype != SSMC_I32, SSMC_ERR_ARGUMENT, "ssmc_state_tensor: " + f + " is not a token id field (SSMC_I32)");
    const DType dt = dtype == SSMC_F16 ? DType::f16 : DType::f32;
    if (f == "h_prefill_stage") {
      need(dt == DType::f32, SSMC_ERR_ARGUMENT, "h_prefill_stage is f32");
      const int64_t n = stage_elems(t->header.model.spec);
      Tensor st = Tensor::zeros(DType::f32, {n});
      copy_in(st.raw(), data, st.bytes(), mem, "h_prefill_stage");
      ps.stage = std::move(st);
      return;
    }
    const LayerSpec& s = layer_of(t, layer);
    const bool is_h = f == "h" || f == "h_checkpoint" || f == "h_intermediate";
    const bool is_conv = f == "conv" || f == "conv_checkpoint" || f == "conv_intermediate";
    need(is_h || is_conv, SSMC_ERR_ARGUMENT,
         "ssmc_state_tensor: unknown field '" + f +
             "' (known: h, conv, h_checkpoint, conv_checkpoint, h_intermediate, conv_intermediate, h_prefill_stage, "
             "and on a layer hosting a PLE carry ple_history, ple_conv, their _checkpoint and _snapshot)");
    need(is_h || dt == DType::f32, SSMC_ERR_ARGUMENT, "ssmc_state_tensor: " + f + " is f32");
    // read in the engine's layout (ssmc_set_layer_convention), kept in the contract's
    const StateLayout lay = t->layouts.count(layer) ? t->layouts.at(layer) : StateLayout{};
    Tensor x = Tensor::zeros(dt, is_h ? h_shape_in(s, lay) : conv_shape_in(s, lay));
    copy_in(x.raw(), data, x.bytes(), mem, field);
    x = is_h ? h_to_contract(std::move(x), s, lay) : conv_to_contract(std::move(x), s, lay);
    PendingLayer& pl = ps.layers[layer];
    auto put = [&](std::optional<Tensor>& slot) {
      need(!slot.has_value(), SSMC_ERR_ORDER, fmt::format("{} of seq {} layer {} given twice", f, seq, layer));
      slot = std::move(x);
    };
    if (f == "h") put(pl.h);
    else if (f == "conv") put(pl.conv);
    else if (f == "h_checkpoint") put(pl.h_checkpoint);
    else if (f == "conv_checkpoint") put(pl.conv_checkpoint);
    else {
      need(index >= 0 && index < 65536, SSMC_ERR_ARGUMENT, fmt::format("{}: index {} out of range", f, index));
      auto& m = f == "h_intermediate" ? pl.h_inter : pl.conv_inter;
      need(!m.count(index), SSMC_ERR_ORDER, fmt::format("{}[{}] of seq {} layer {} given twice", f, index, seq, layer));
      m.emplace(index, std::move(x));
    }
  });
}

ssmc_status ssmc_end_op(ssmc_trace* t) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_end_op: null trace");
  return call(t, true, [&] {
    if (t->async) return end_async(t);
    PendingOp& p = current(t);
    const formats::TraceOp op = assemble(t, p);
    t->writer->append(op);
    t->op.reset();
  });
}

ssmc_status ssmc_drop_op(ssmc_trace* t) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_drop_op: null trace");
  return call(t, true, [&] {
    t->op.reset();
    t->building.reset();
  });
}

int ssmc_op_count(const ssmc_trace* t) {
  if (!t) return 0;
  const std::lock_guard<std::mutex> serial(t->mu);
  if (t->async) return t->accepted - t->async->failures();
  return t->writer ? t->writer->ops() : 0;
}

ssmc_status ssmc_set_async(ssmc_trace* t, int64_t staging_bytes, int policy) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_set_async: null trace");
  return call(t, false, [&] {
    need(!t->header_written(), SSMC_ERR_ORDER, "ssmc_set_async after the first ssmc_begin_op");
    need(!t->async, SSMC_ERR_ORDER, "ssmc_set_async: the capture is asynchronous already");
    need(staging_bytes == 0 || (staging_bytes >= 4096 && staging_bytes <= (int64_t(1) << 40)), SSMC_ERR_ARGUMENT,
         fmt::format("ssmc_set_async: staging_bytes {} outside 4096..2^40 (0: the default, 1 GiB)", staging_bytes));
    need(policy == SSMC_BLOCK || policy == SSMC_DROP_STATES, SSMC_ERR_ARGUMENT,
         fmt::format("ssmc_set_async: policy {} is neither SSMC_BLOCK (0) nor SSMC_DROP_STATES (1)", policy));
    const size_t bytes = staging_bytes == 0 ? size_t(1) << 30 : size_t(staging_bytes);
    t->async = std::make_unique<ssmc_async::Async>(
        bytes, ssmc_async::Policy(policy),
        [t](const ssmc_async::QueuedOp& q, const char*) { return write_queued(t->inner.get(), *t->async, q); });
  });
}

ssmc_status ssmc_set_device_staging(ssmc_trace* t, int64_t bytes) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_set_device_staging: null trace");
  return call(t, false, [&] {
    need(t->async != nullptr, SSMC_ERR_ORDER,
         "ssmc_set_device_staging: the capture is not asynchronous (call ssmc_set_async first)");
    need(!t->header_written(), SSMC_ERR_ORDER, "ssmc_set_device_staging after the first ssmc_begin_op");
    need(t->async->device_staging() == 0, SSMC_ERR_ORDER,
         "ssmc_set_device_staging: the capture has device staging already");
    need(bytes >= 4096 && bytes <= (int64_t(1) << 40), SSMC_ERR_ARGUMENT,
         fmt::format("ssmc_set_device_staging: bytes {} outside 4096..2^40", bytes));
    try {
      t->async->set_device_staging(size_t(bytes));
    } catch (const std::exception& e) {
      throw Failure{SSMC_ERR_DEVICE,
                    fmt::format("ssmc_set_device_staging: {} (the capture goes on without it)", e.what())};
    }
  });
}

int64_t ssmc_device_staged(const ssmc_trace* t) {
  if (!t) return 0;
  const std::lock_guard<std::mutex> serial(t->mu);
  return t->async ? t->async->device_staged() : 0;
}

ssmc_status ssmc_op_stream(ssmc_trace* t, void* stream) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_op_stream: null trace");
  return call(t, true, [&] {
    need(t->async != nullptr, SSMC_ERR_ORDER, "ssmc_op_stream: the capture is not asynchronous (ssmc_set_async)");
    building_of(t).stream = stream;
  });
}

ssmc_status ssmc_flush(ssmc_trace* t) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_flush: null trace");
  return call(t, false, [&] {
    if (!t->async) return;  // every op is durable once ssmc_end_op returns
    t->async->drain();
    report_background(t);
  });
}

int64_t ssmc_states_dropped(const ssmc_trace* t) {
  if (!t) return 0;
  const std::lock_guard<std::mutex> serial(t->mu);
  return t->states_dropped;
}

ssmc_status ssmc_close(ssmc_trace* t) {
  if (!t) return fail(SSMC_ERR_ARGUMENT, "ssmc_close: null trace");
  std::unique_ptr<ssmc_trace> owned(t);
  std::unique_lock<std::mutex> serial(owned->mu);  // released before the handle is freed
  const bool pending = owned->op.has_value() || owned->building.has_value();
  owned->op.reset();
  owned->building.reset();
  const ssmc_status s = call(nullptr, false, [&] {
    if (owned->async) {
      start_inner(owned.get());
      owned->async->drain();
      const int failed = owned->async->failures();
      const std::string first = owned->async->first_failure();
      owned->async.reset();  // the writer thread ends
      owned->inner->writer->close();
      need(failed == 0, status_of(first),
           fmt::format("ssmc_close: {} op(s) failed in the background writer and are not in the trace (it holds the "
                       "other {}); the first: {}",
                       failed, owned->inner->writer->ops(), first));
      return;
    }
    if (!owned->writer) {
      need(owned->pool_set && !owned->header.model.spec.layers.empty(), SSMC_ERR_ORDER,
           "ssmc_close: no pool or no layer described");
      check_weights_given(owned.get(), "ssmc_close");
      owned->writer = std::make_unique<formats::TraceWriter>(owned->path, owned->header);
    }
    owned->writer->close();
  });
  serial.unlock();
  if (s == SSMC_OK && pending)
    return fail(SSMC_ERR_ORDER, "ssmc_close: an op was begun but not ended; it was dropped (the trace keeps the ops before it)");
  return s;
}

void ssmc_abandon(ssmc_trace* t) { delete t; }

}  // extern "C"
