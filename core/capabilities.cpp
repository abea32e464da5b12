// What an implementation runs (see capabilities.h).
#include "core/capabilities.h"

#include <algorithm>
#include <stdexcept>

namespace ssm {

namespace {
template <class T>
bool has(const std::vector<T>& v, T x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

template <class T, class F>
std::string joined(const std::vector<T>& v, F name) {
  std::string s;
  for (const T& x : v) s += (s.empty() ? "" : ", ") + std::string(name(x));
  return s;
}

const char* arm_name(VerifyArm a) { return a == VerifyArm::wy ? "wy" : "exact"; }
}  // namespace

Capabilities Capabilities::everything() {
  Capabilities c;
  c.async_copies = true;
  return c;
}

bool Capabilities::runs(LayerKind k) const { return has(kinds, k); }
bool Capabilities::runs(HMode m) const { return has(h_modes, m); }
bool Capabilities::runs(VerifyArm a) const { return has(verify_arms, a); }

bool Capabilities::runs(OpKind k) const {
  switch (k) {
    case OpKind::checkpoint_async: return checkpoint_async;
    case OpKind::rollback_and_checkpoint_async: return rollback_and_checkpoint_async;
    case OpKind::snapshot_save:
    case OpKind::snapshot_restore: return snapshots;
    case OpKind::to_f16: return runs(HMode::f16);
    default: return true;
  }
}

std::string Capabilities::cannot_run(const ModelSpec& spec, const std::string& name) const {
  for (size_t l = 0; l < spec.layers.size(); ++l)
    if (!runs(spec.layers[l].kind))
      return "layer " + std::to_string(l) + " is " + spec.layers[l].name() + "; " + name + " runs " +
             joined(kinds, [](LayerKind k) { return to_string(k); }) + " layers only";
  if (!ple)
    for (size_t l = 0; l < spec.layers.size(); ++l)
      if (spec.layers[l].ple.hosted())
        return "layer " + std::to_string(l) + " hosts a PLE carry; " + name + " does not run PLE carries";
  if (!norm_groups)
    for (size_t l = 0; l < spec.layers.size(); ++l)
      if (spec.layers[l].kind == LayerKind::mamba2 && spec.layers[l].norm_group_count() != spec.layers[l].ng)
        return "layer " + std::to_string(l) + " is " + spec.layers[l].name() + "; " + name +
               " normalises a Mamba-2 output by its ng groups only";
  if (!other_numerics)
    for (size_t l = 0; l < spec.layers.size(); ++l)
      if (!spec.layers[l].numerics.is_contract())
        return "layer " + std::to_string(l) + " declares" + spec.layers[l].numerics.flags() + "; " + name +
               " implements the contract's numerics only";
  return "";
}

std::string Capabilities::cannot_run(const ModelSpec& spec, HMode mode, const std::string& name) const {
  if (!runs(mode))
    return std::string("h mode ") + to_string(mode) + "; " + name + " runs h modes " +
           joined(h_modes, [](HMode m) { return to_string(m); }) + " only";
  return cannot_run(spec, name);
}

std::string Capabilities::cannot_run(const Op& op, const std::string& name) const {
  if (!runs(op.kind)) return std::string(op_name(op.kind)) + ": " + name + " does not implement it";
  if (op.kind == OpKind::verify && !runs(op.arm))
    return std::string("verify arm ") + arm_name(op.arm) + ": " + name + " runs the " + joined(verify_arms, arm_name) +
           " arm only";
  if (op.is_batch()) {
    if (!pad_rows && has(op.seqs, kPadRow))
      return std::string(op_name(op.kind)) + " with padding rows: " + name + " takes none";
    if (max_batch > 0 && int(op.seqs.size()) > max_batch)
      return std::string(op_name(op.kind)) + " of " + std::to_string(op.seqs.size()) + " rows: " + name +
             " takes at most " + std::to_string(max_batch);
  }
  if (op.kind == OpKind::verify && max_verify_k > 0 && op.verify_rows() > max_verify_k)
    return "verify K = " + std::to_string(op.verify_rows()) + ": " + name + " verifies at most " +
           std::to_string(max_verify_k) + " tokens";
  return "";
}

std::string Capabilities::cannot_run_slots(int slots, const std::string& name) const {
  if (max_slots > 0 && slots > max_slots)
    return "a pool of " + std::to_string(slots) + " slots: " + name + " has at most " + std::to_string(max_slots);
  return "";
}

std::string Capabilities::text() const {
  std::string s = joined(kinds, [](LayerKind k) { return to_string(k); }) + " layers; " +
                  (ple ? "PLE carries" : "no PLE carry") + "; h modes " +
                  joined(h_modes, [](HMode m) { return to_string(m); }) + "; verify arms " +
                  joined(verify_arms, arm_name);
  std::vector<std::string> without;
  if (!checkpoint_async) without.push_back("checkpoint_async");
  if (!rollback_and_checkpoint_async) without.push_back("rollback_and_checkpoint_async");
  if (!snapshots) without.push_back("snapshots");
  if (!pad_rows) without.push_back("padding rows");
  if (!without.empty()) s += "; without " + joined(without, [](const std::string& x) { return x; });
  s += async_copies ? "; async copies held on request" : "; no async path";
  if (max_batch > 0) s += "; batches of <= " + std::to_string(max_batch) + " rows";
  if (max_verify_k > 0) s += "; verify K <= " + std::to_string(max_verify_k);
  if (max_slots > 0) s += "; <= " + std::to_string(max_slots) + " slots";
  return s;
}

void Capabilities::validate(const std::string& who) const {
  if (kinds.empty()) throw std::invalid_argument(who + ": capabilities: no layer kind");
  if (h_modes.empty()) throw std::invalid_argument(who + ": capabilities: no h mode (h_modes)");
  if (verify_arms.empty()) throw std::invalid_argument(who + ": capabilities: no verify arm (verify_arms)");
  if (max_batch < 0 || max_verify_k < 0 || max_slots < 0)
    throw std::invalid_argument(who + ": capabilities: a negative limit (max_batch " + std::to_string(max_batch) +
                                ", max_verify_k " + std::to_string(max_verify_k) + ", max_slots " +
                                std::to_string(max_slots) + "; 0 means none)");
}

}  // namespace ssm
