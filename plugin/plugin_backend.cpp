// A plug-in as a Backend (see plugin_backend.h).
#include "plugin/plugin_backend.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

#include "core/conventions.h"
#include "core/errors.h"
#include "core/state_digest.h"
#include "plugin/field_keys.h"

namespace ssm::plugin {

namespace {

// The running call, for the fatal-signal handler: written before each call, cleared after.
char g_call[512];
volatile sig_atomic_t g_in_call = 0;

class CallMarker {
 public:
  explicit CallMarker(const std::string& what) {
    std::snprintf(g_call, sizeof g_call, "%s", what.c_str());
    g_in_call = 1;
  }
  ~CallMarker() { g_in_call = 0; }
  CallMarker(const CallMarker&) = delete;
  CallMarker& operator=(const CallMarker&) = delete;
};

// A NUL-terminated copy of a fixed buffer the plug-in filled (it may have forgotten the NUL).
std::string text_of(const char* buf, size_t n) { return std::string(buf, strnlen(buf, n)); }

std::string slot_text(int slot) { return slot == SSMP_PAD_ROW ? "pad" : std::to_string(slot); }

}  // namespace

const char* plugin_call_in_progress() { return g_in_call ? g_call : nullptr; }

PluginBackend::PluginBackend(const PluginSpec& spec)
    : lib_(spec.in_process ? &load_plugin_in_process(spec.path) : &load_plugin(spec.path)), label_(spec.label()) {
  own_legality_ = lib_->own_legality();
  by_name_ = lib_->by_name();
  digests_use_ = offers_field_digests(*lib_->table) ? field_digests_use() : FieldDigestsUse::never;
  ssmp_error err{};
  {
    CallMarker m(label_ + ": create(\"" + spec.options + "\")");
    self_ = lib_->table->create(spec.options.c_str(), &err);
  }
  if (!self_)
    throw std::runtime_error(label_ + ": create failed: " + text_of(err.message, sizeof err.message) +
                             (spec.options.empty() ? "" : " (options: " + spec.options + ")"));
}

PluginBackend::~PluginBackend() {
  if (!self_) return;
  CallMarker m(label_ + ": destroy");
  lib_->table->destroy(self_);
}

template <class Call>
void PluginBackend::call(const char* op, int slot, const std::string& args, Call&& c) const {
  ssmp_error err{};
  int rc;
  {
    CallMarker m(label_ + ": " + op + "(" + args + ")");
    rc = c(&err);
  }
  if (rc == SSMP_OK) return;
  const std::string message = text_of(err.message, sizeof err.message);
  if (rc == SSMP_REFUSED) {
    const std::string kind = text_of(err.kind, sizeof err.kind);
    const auto k = parse_error_kind(kind);
    if (!k)
      throw std::runtime_error(label_ + ": " + op + "(" + args + ") refused with unknown error kind '" + kind +
                               "' (known: " + known_error_kinds() + "): " + message);
    throw StateError(*k, op, slot, -1, label_ + ": " + message);
  }
  if (rc == SSMP_ERROR) throw std::runtime_error(label_ + ": " + op + "(" + args + ") failed: " + message);
  throw std::runtime_error(label_ + ": " + op + "(" + args + ") returned " + std::to_string(rc) +
                           ", not an ssmp_status (0 ok, 1 refused, 2 error)");
}

void PluginBackend::require_pool(const char* op) const {
  if (!has_pool_) throw std::logic_error(label_ + ": " + op + " before create_pool");
}

void PluginBackend::check_slot_index(const char* op, int slot) const {
  if (slot < 0 || slot >= contract_.pool().max_slots)
    throw std::runtime_error(label_ + ": " + op + " returned slot " + std::to_string(slot) + ", outside 0.." +
                             std::to_string(contract_.pool().max_slots - 1));
}

void PluginBackend::check_sizes(const char* op, int slot, const StepInputs& in, int rows) const {
  const ModelSpec& spec = model_.spec;
  auto refuse = [&](const std::string& what) { throw StateError(ErrorKind::bad_input, op, slot, -1, what); };
  if (in.rows != rows) refuse("inputs of " + std::to_string(in.rows) + " rows, expected " + std::to_string(rows));
  if (in.layers.size() != spec.layers.size())
    refuse("inputs of " + std::to_string(in.layers.size()) + " layers, the model has " +
           std::to_string(spec.layers.size()));
  for (size_t l = 0; l < spec.layers.size(); ++l)
    for (const InputField& f : spec.layers[l].inputs())  // the kind's inputs (core/layer_geometry.cpp)
      if ((in.layers[l].*f.member).size() != size_t(rows) * size_t(f.width))
        refuse("layer " + std::to_string(l) + ": input " + f.name + " holds " +
               std::to_string((in.layers[l].*f.member).size()) + " values, expected [" + std::to_string(rows) +
               "][" + std::to_string(f.width) + "]");
}

void PluginBackend::add_named(const StepInputs& in, StepOutputs& out) {
  for (size_t l = 0; l < model_.spec.layers.size(); ++l) {
    const LayerRows& r = in.layers[l];
    auto input_of = [&r](std::vector<float> LayerRows::*m) { return (r.*m).empty() ? nullptr : (r.*m).data(); };
    float* ple_out = l < out.ple.size() && !out.ple[l].empty() ? out.ple[l].data() : nullptr;
    rows_io_.add(model_.spec.layers[l], input_of, out.layers[l].data(), ple_out);
  }
}

void PluginBackend::create_pool(const Model& model, const PoolConfig& pool) {
  model.validate();
  pool.validate();
  for (size_t l = 0; l < model.spec.layers.size(); ++l) {
    const LayerSpec& s = model.spec.layers[l];
    if (s.ple.hosted() && !lib_->ple())
      throw std::invalid_argument(label_ + ": layer " + std::to_string(l) + " is " + s.name() +
                                  "; it hosts a PLE carry, which the plug-in does not run (it does not declare SSMP_PLE)");
    if (!lib_->runs(s.kind))
      throw std::invalid_argument(label_ + ": layer " + std::to_string(l) + " is " + s.name() +
                                  "; the plug-in does not run " + to_string(s.kind) + " layers (it does not declare " +
                                  PluginLibrary::kind_flag(s.kind) + ")");
  }
  const PluginConfig c(model, pool);
  has_pool_ = false;
  call("create_pool", -1, pool.name(), [&](ssmp_error* e) { return lib_->table->create_pool(self_, c.get(), e); });
  model_ = model;
  contract_ = Contract(model.spec, pool);
  export_room_ =
      ExportRoom(model.spec, pool, {lib_->short_conv_window(), lib_->h_vd_kd(), lib_->no_prefill_stage(), lib_->ple()});
  field_digests_ = asks_field_digests(digests_use_, model.spec);
  field_keys_.clear();  // the field list is the model's: its keys are found again on the first digests
  has_pool_ = true;
}

int PluginBackend::alloc(int min_capacity) {
  require_pool("alloc");
  if (!own_legality_) contract_.check_alloc(min_capacity);
  int slot = -1;
  call("alloc", -1, "min capacity " + std::to_string(min_capacity),
       [&](ssmp_error* e) { return lib_->table->alloc(self_, min_capacity, &slot, e); });
  check_slot_index("alloc", slot);
  if (contract_.slot(slot).claimed)
    throw std::runtime_error(label_ + ": alloc returned slot " + std::to_string(slot) + ", which is claimed");
  contract_.on_alloc(slot);
  return slot;
}

void PluginBackend::release(int slot) {
  require_pool("release");
  if (!own_legality_) contract_.check_claimed("release", slot);
  call("release", slot, "slot " + std::to_string(slot), [&](ssmp_error* e) { return lib_->table->release(self_, slot, e); });
  if (slot >= 0 && slot < contract_.pool().max_slots) contract_.on_release(slot);
}

StepOutputs PluginBackend::prefill(int slot, const StepInputs& in) {
  require_pool("prefill");
  if (!own_legality_) contract_.check_prefill(slot, in);
  check_sizes("prefill", slot, in, in.rows);
  if (in.rows < 1) throw StateError(ErrorKind::bad_argument, "prefill", slot, -1, "T must be >= 1");
  StepOutputs out;
  std::vector<ssmp_layer_io> io;
  std::vector<ssmp_ple_io> ple;
  add_io(model_.spec, in, in.rows, out, io, ple);
  if (by_name_) {
    rows_io_.clear();
    add_named(in, out);
  }
  call("prefill", slot, "slot " + std::to_string(slot) + ", " + std::to_string(in.rows) + " rows", [&](ssmp_error* e) {
    if (by_name_) return lib_->table->rows(self_, SSMP_OP_PREFILL, 1, &slot, in.rows, 0, rows_io_.data(), e);
    return model_.spec.hosts_ple() ? lib_->table->prefill_ple(self_, slot, in.rows, io.data(), ple.data(), e)
                                   : lib_->table->prefill(self_, slot, in.rows, io.data(), e);
  });
  if (!own_legality_) contract_.on_prefill(slot);
  return out;
}

std::vector<StepOutputs> PluginBackend::batch(OpKind op, const std::vector<int>& slots, int k, VerifyArm arm,
                                              const std::vector<StepInputs>& in) {
  const char* name = op_name(op);
  require_pool(name);
  const int rows = op == OpKind::decode ? 1 : k;
  if (!own_legality_) contract_.check_batch(op, slots, rows, in);
  if (in.size() != slots.size())
    throw StateError(ErrorKind::bad_input, name, -1, -1,
                     std::to_string(in.size()) + " inputs for " + std::to_string(slots.size()) + " rows");
  if (op == OpKind::verify && k < 1) throw StateError(ErrorKind::bad_argument, name, -1, -1, "K must be >= 1");
  std::vector<StepOutputs> out(slots.size());
  std::vector<ssmp_layer_io> io;
  std::vector<ssmp_ple_io> ple;
  std::string args;
  rows_io_.clear();
  for (size_t i = 0; i < slots.size(); ++i) {
    check_sizes(name, slots[i], in[i], rows);
    add_io(model_.spec, in[i], rows, out[i], io, ple);
    if (by_name_) add_named(in[i], out[i]);
    args += (i ? "," : "slots ") + slot_text(slots[i]);
  }
  // the f16-mode conversion of FP32 h on its first decode step, decided before the op
  std::vector<int> converts;
  if (!own_legality_)
    for (int s : slots)
      if (s != kPadRow && contract_.needs_to_f16(s)) converts.push_back(s);
  const int n = int(slots.size());
  const bool with_ple = model_.spec.hosts_ple();
  const int c_arm = arm == VerifyArm::wy ? SSMP_ARM_WY : SSMP_ARM_EXACT;
  const ssmp_plugin& t = *lib_->table;
  if (op == OpKind::decode)
    call(name, -1, args, [&](ssmp_error* e) {
      if (by_name_) return t.rows(self_, SSMP_OP_DECODE, n, slots.data(), 1, 0, rows_io_.data(), e);
      return with_ple ? t.decode_ple(self_, n, slots.data(), io.data(), ple.data(), e)
                      : t.decode(self_, n, slots.data(), io.data(), e);
    });
  else
    call(name, -1, args + ", k " + std::to_string(k), [&](ssmp_error* e) {
      if (by_name_) return t.rows(self_, SSMP_OP_VERIFY, n, slots.data(), k, c_arm, rows_io_.data(), e);
      return with_ple ? t.verify_ple(self_, n, slots.data(), k, c_arm, io.data(), ple.data(), e)
                      : t.verify(self_, n, slots.data(), k, c_arm, io.data(), e);
    });
  if (!own_legality_) {
    for (int s : converts) contract_.on_to_f16(s);
    if (op == OpKind::verify)
      for (int s : slots)
        if (s != kPadRow) contract_.on_verify(s, k);
  }
  return out;
}

std::vector<StepOutputs> PluginBackend::decode(const std::vector<int>& slots, const std::vector<StepInputs>& in) {
  return batch(OpKind::decode, slots, 1, VerifyArm::exact, in);
}

std::vector<StepOutputs> PluginBackend::verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                               const std::vector<StepInputs>& in) {
  return batch(OpKind::verify, slots, k, arm, in);
}

void PluginBackend::checkpoint(int slot, bool async) {
  const char* op = async ? "checkpoint_async" : "checkpoint";
  require_pool(op);
  if (!own_legality_) contract_.check_claimed(op, slot);
  call(op, slot, "slot " + std::to_string(slot),
       [&](ssmp_error* e) { return lib_->table->checkpoint(self_, slot, async ? 1 : 0, e); });
  if (!own_legality_) contract_.on_checkpoint(slot);
}

void PluginBackend::commit(int slot, int n, int k) {
  require_pool("commit");
  if (!own_legality_) contract_.check_commit(slot, n, k);
  call("commit", slot, "slot " + std::to_string(slot) + ", n " + std::to_string(n) + ", k " + std::to_string(k),
       [&](ssmp_error* e) { return lib_->table->commit(self_, slot, n, k, e); });
}

void PluginBackend::rollback(int slot, int n, bool and_checkpoint) {
  const OpKind op = and_checkpoint ? OpKind::rollback_and_checkpoint_async : OpKind::rollback;
  require_pool(op_name(op));
  if (!own_legality_) contract_.check_rollback(op, slot, n);
  call(op_name(op), slot, "slot " + std::to_string(slot) + ", n " + std::to_string(n),
       [&](ssmp_error* e) { return lib_->table->rollback(self_, slot, n, and_checkpoint ? 1 : 0, e); });
  if (!own_legality_ && and_checkpoint) contract_.on_checkpoint(slot);
}

void PluginBackend::to_f16(int slot) {
  require_pool("to_f16");
  if (!own_legality_) contract_.check_to_f16(slot);
  call("to_f16", slot, "slot " + std::to_string(slot), [&](ssmp_error* e) { return lib_->table->to_f16(self_, slot, e); });
  if (!own_legality_) contract_.on_to_f16(slot);
}

void PluginBackend::snapshot_save(int slot, int snap) {
  require_pool("snapshot_save");
  if (!own_legality_) contract_.check_snapshot(OpKind::snapshot_save, slot, snap);
  call("snapshot_save", slot, "slot " + std::to_string(slot) + ", snapshot " + std::to_string(snap),
       [&](ssmp_error* e) { return lib_->table->snapshot_save(self_, slot, snap, e); });
  if (!own_legality_) contract_.on_snapshot_save(slot, snap);
}

void PluginBackend::snapshot_restore(int slot, int snap) {
  require_pool("snapshot_restore");
  if (!own_legality_) contract_.check_snapshot(OpKind::snapshot_restore, slot, snap);
  call("snapshot_restore", slot, "slot " + std::to_string(slot) + ", snapshot " + std::to_string(snap),
       [&](ssmp_error* e) { return lib_->table->snapshot_restore(self_, slot, snap, e); });
}

SequenceState PluginBackend::export_state(int slot) {
  require_pool("export");
  if (!own_legality_) contract_.check_claimed("export", slot);
  ssmp_state* st = export_room_.prepare();
  if (by_name_) {  // the fields of the same room, read back into it (plugin/named_abi.h)
    fields_.build(model_.spec.layers, *st, layout());
    int last_k = 0;
    call("export_fields", slot, "slot " + std::to_string(slot), [&](ssmp_error* e) {
      return lib_->table->export_fields(self_, slot, fields_.size(), fields_.data(), &last_k, e);
    });
    const std::string who = label_ + ": export_fields(slot " + std::to_string(slot) + ")";
    fields_.apply(*st, last_k, who);
    return export_room_.read(slot, who);
  }
  call("export_state", slot, "slot " + std::to_string(slot),
       [&](ssmp_error* e) { return lib_->table->export_state(self_, slot, st, e); });
  return export_room_.read(slot, label_ + ": export_state(slot " + std::to_string(slot) + ")");
}

StateLayout PluginBackend::layout() const {
  return {lib_->short_conv_window() ? ConvWindow::d_conv_minus_1 : ConvWindow::d_conv,
          lib_->h_vd_kd() ? HLayout::vd_kd : HLayout::kd_vd};
}

std::optional<FieldDigests> PluginBackend::field_digests(int slot) {
  if (!self_ || !field_digests_) return std::nullopt;
  require_pool("export");
  if (!own_legality_) contract_.check_claimed("export", slot);
  ssmp_state* st = export_room_.prepare();
  fields_.build(model_.spec.layers, *st, layout());
  digests_.assign(size_t(fields_.size()) + 1, 0);
  const std::string args = "slot " + std::to_string(slot);
  call("field_digests", slot, args, [&](ssmp_error* e) {
    return lib_->table->field_digests(self_, slot, fields_.size(), fields_.data(), digests_.data(), e);
  });
  // the same rules as an export's answers: h and conv present, indexed fields in order (the
  // plug-in's rest digest, digests_ last, stands for last_verify_k)
  fields_.apply(*st, 0, label_ + ": field_digests(" + args + ")");
  const std::vector<std::optional<FieldKey>>& keys = field_keys();
  FieldDigests d;
  for (size_t i = 0; i < size_t(fields_.size()); ++i) {
    const ssmp_field& f = fields_[i];
    if (!f.present) continue;
    if (!keys[i]) throw std::logic_error(label_ + ": field_digests: no key for field " + std::string(f.name));
    StateHasher h;  // the field's dtype is part of what an export reads
    h.add(int64_t(digests_[i]));
    h.add(int64_t(f.is_f16 != 0));
    d.push_back({*keys[i], h.digest()});
  }
  d.push_back({FieldKey{FieldKind::rest, -1, 0}, digests_.back()});
  return d;
}

void PluginBackend::export_update(int slot, const FieldDigests& before, const FieldDigests& now, SequenceState& state) {
  const ssmp_plugin& t = *lib_->table;
  if (!field_digests_ || !t.export_fields || state.layers.size() != model_.spec.layers.size()) {
    state = export_state(slot);
    return;
  }
  require_pool("export");
  if (!own_legality_) contract_.check_claimed("export", slot);
  std::vector<bool> h_is_f16;
  for (const LayerState& l : state.layers) h_is_f16.push_back(l.h_is_f16);
  SequenceState out = export_room_.rest(slot, state.last_verify_k, h_is_f16);
  const std::set<FieldKey> carried = carry_unchanged_fields(state, before, now, out);
  std::map<FieldKey, Tensor> spare = take_fields(state);  // the changed fields' storage, reused
  std::set<FieldKey> present;
  for (const FieldDigest& f : now) present.insert(f.key);
  ssmp_state* st = export_room_.prepare();
  fields_.build(model_.spec.layers, *st, layout());
  changed_.clear();
  std::vector<FieldKey> keys;
  const std::vector<std::optional<FieldKey>>& all_keys = field_keys();
  for (size_t i = 0; i < size_t(fields_.size()); ++i) {
    const std::optional<FieldKey>& key = all_keys[i];
    if (key && present.count(*key) && !carried.count(*key)) {
      changed_.push_back(fields_[i]);
      keys.push_back(*key);
    }
  }
  int last_k = 0;
  const std::string args = "slot " + std::to_string(slot) + ", " + std::to_string(changed_.size()) + " changed fields";
  const std::vector<ssmp_field> given = changed_;
  call("export_fields", slot, args,
       [&](ssmp_error* e) { return t.export_fields(self_, slot, int(changed_.size()), changed_.data(), &last_k, e); });
  const std::string who = label_ + ": export_fields(" + args + ")";
  for (size_t i = 0; i < changed_.size(); ++i) {
    const ssmp_field &a = changed_[i], &b = given[i];
    if (a.name != b.name || a.layer != b.layer || a.index != b.index || a.rank != b.rank || a.data != b.data ||
        !std::equal(a.dims, a.dims + 4, b.dims))
      throw std::runtime_error(who + ": layer " + std::to_string(b.layer) + " field " + b.name +
                               ": the plug-in changed the field's description (name, layer, index, rank, dims or "
                               "buffer); it sets present and is_f16 only");
  }
  if (last_k < 0 || last_k > kMaxIntermediates)
    throw std::runtime_error(who + " says last_verify_k = " + std::to_string(last_k));
  out.last_verify_k = last_k;
  for (size_t i = 0; i < changed_.size(); ++i) {
    const ssmp_field& f = changed_[i];
    if (!f.present)
      throw std::runtime_error(who + ": layer " + std::to_string(f.layer) + " field " + f.name +
                               " not present, but field_digests gave it a digest");
    Tensor& to = field_tensor(out, keys[i]);
    const auto old = spare.find(keys[i]);
    if (old != spare.end()) to = std::move(old->second);
    export_room_.read_field_into(f, to);
    if (keys[i].kind == FieldKind::h) out.layers[size_t(f.layer)].h_is_f16 = f.is_f16 != 0;
  }
  state = std::move(out);
}

const std::vector<std::optional<FieldKey>>& PluginBackend::field_keys() {
  if (field_keys_.size() != size_t(fields_.size())) {
    field_keys_.clear();
    for (size_t i = 0; i < size_t(fields_.size()); ++i)
      field_keys_.push_back(field_key_of(fields_[i].name, fields_[i].layer, fields_[i].index));
  }
  return field_keys_;
}

FieldDigestsUse field_digests_use() {
  const char* v = std::getenv("SSMCHECK_FIELD_DIGESTS");
  const std::string text = v ? v : "";
  if (text.empty() || text == "auto") return FieldDigestsUse::by_size;
  if (text == "on") return FieldDigestsUse::always;
  if (text == "off") return FieldDigestsUse::never;
  throw std::invalid_argument("SSMCHECK_FIELD_DIGESTS is '" + text + "'; it takes auto (the default), on or off");
}

size_t live_state_bytes(const ModelSpec& spec) {
  size_t floats = 0;
  for (const LayerSpec& s : spec.layers) {
    floats += size_t(s.h_elems()) + size_t(s.conv_elems());
    if (s.ple.hosted()) floats += size_t(s.ple.history_len()) + size_t(s.ple.conv_rows()) * size_t(s.ple.channels);
  }
  return floats * sizeof(float);
}

bool asks_field_digests(FieldDigestsUse use, const ModelSpec& spec) {
  return use == FieldDigestsUse::always ||
         (use == FieldDigestsUse::by_size && live_state_bytes(spec) >= kFieldDigestsMinBytes);
}

bool PluginBackend::async_pending(int slot) const {
  if (!self_ || !lib_->table->async_pending) return false;
  CallMarker m(label_ + ": async_pending(slot " + std::to_string(slot) + ")");
  return lib_->table->async_pending(self_, slot) != 0;
}

bool PluginBackend::perturb_schedule(uint64_t seed) {
  if (!self_ || !lib_->perturbable()) return false;
  CallMarker m(label_ + ": perturb_schedule(" + std::to_string(seed) + ")");
  return lib_->table->perturb_schedule(self_, seed) != 0;
}

bool PluginBackend::pause_async_copies(bool on) {
  if (!self_ || !lib_->table->pause_async_copies) return false;
  CallMarker m(label_ + ": pause_async_copies(" + std::to_string(on) + ")");
  return lib_->table->pause_async_copies(self_, on ? 1 : 0) != 0;
}

}  // namespace ssm::plugin
