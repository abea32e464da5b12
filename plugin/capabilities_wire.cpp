// The capabilities of a hosted implementation on the wire (see capabilities_wire.h).
#include "plugin/capabilities_wire.h"

#include <stdexcept>
#include <utility>
#include <vector>

namespace ssm::plugin {

namespace {
// The members of ssmp_capabilities by name, each with what it sets in Capabilities: the one table
// the wire and the conversion to Capabilities read.
template <class Value>
struct NamedBit {
  const char* name;
  uint32_t bit;
  Value value;
};
const std::vector<NamedBit<HMode>>& h_mode_bits() {
  static const std::vector<NamedBit<HMode>> v = {{"f32", SSMP_RUNS_F32, HMode::f32},
                                                 {"f16", SSMP_RUNS_F16, HMode::f16},
                                                 {"f16-pool", SSMP_RUNS_F16_POOL, HMode::f16_pool}};
  return v;
}
const std::vector<NamedBit<VerifyArm>>& arm_bits() {
  static const std::vector<NamedBit<VerifyArm>> v = {{"exact", SSMP_T_VERIFY_EXACT, VerifyArm::exact},
                                                     {"wy", SSMP_T_VERIFY_WY, VerifyArm::wy}};
  return v;
}
const std::vector<NamedBit<bool Capabilities::*>>& transition_bits() {
  static const std::vector<NamedBit<bool Capabilities::*>> v = {
      {"checkpoint_async", SSMP_T_CHECKPOINT_ASYNC, &Capabilities::checkpoint_async},
      {"rollback_and_checkpoint_async", SSMP_T_ROLLBACK_AND_CHECKPOINT_ASYNC,
       &Capabilities::rollback_and_checkpoint_async},
      {"snapshots", SSMP_T_SNAPSHOTS, &Capabilities::snapshots},
      {"pad_rows", SSMP_T_PAD_ROWS, &Capabilities::pad_rows}};
  return v;
}
struct Limit {
  const char* name;
  int ssmp_capabilities::*declared;
  int Capabilities::*value;
};
const Limit kLimits[] = {{"max_batch", &ssmp_capabilities::max_batch, &Capabilities::max_batch},
                         {"max_verify_k", &ssmp_capabilities::max_verify_k, &Capabilities::max_verify_k},
                         {"max_slots", &ssmp_capabilities::max_slots, &Capabilities::max_slots}};

template <class Value>
nlohmann::json names_of(uint32_t bits, const std::vector<NamedBit<Value>>& table) {
  nlohmann::json v = nlohmann::json::array();
  for (const auto& [name, bit, value] : table)
    if (bits & bit) v.push_back(name);
  return v;
}

// The bits of a list of names; throws naming the member and the unknown name.
template <class Value>
uint32_t bits_of(const nlohmann::json& v, const std::vector<NamedBit<Value>>& table, const std::string& where) {
  std::string known;
  for (const auto& [name, bit, value] : table) known += (known.empty() ? "" : ", ") + std::string(name);
  if (!v.is_array()) throw std::runtime_error(where + ": expected a list of " + known + ", got " + v.dump());
  uint32_t bits = 0;
  for (const nlohmann::json& x : v) {
    bool found = false;
    for (const auto& [name, bit, value] : table)
      if (x.is_string() && x.get<std::string>() == name) {
        bits |= bit;
        found = true;
      }
    if (!found) throw std::runtime_error(where + ": unknown value " + x.dump() + " (expected " + known + ")");
  }
  return bits;
}
}  // namespace

nlohmann::json capabilities_json(const ssmp_capabilities& c) {
  nlohmann::json j = {{"h_modes", names_of(c.h_modes, h_mode_bits())},
                      {"verify_arms", names_of(c.transitions, arm_bits())}};
  for (const auto& [name, bit, member] : transition_bits()) j[name] = (c.transitions & bit) != 0;
  for (const Limit& l : kLimits) j[l.name] = c.*l.declared;
  return j;
}

ssmp_capabilities capabilities_from_json(const nlohmann::json& j, const std::string& who) {
  const std::string where = who + ": capabilities";
  if (!j.is_object()) throw std::runtime_error(where + ": expected an object, got " + j.dump());
  ssmp_capabilities c{sizeof(ssmp_capabilities), SSMP_RUNS_ALL_H_MODES, SSMP_T_ALL, 0, 0, 0};
  for (const auto& [key, v] : j.items()) {
    const std::string at = where + "." + key;
    if (key == "h_modes") {
      c.h_modes = bits_of(v, h_mode_bits(), at);
      continue;
    }
    if (key == "verify_arms") {
      c.transitions = (c.transitions & ~uint32_t(SSMP_T_VERIFY_EXACT | SSMP_T_VERIFY_WY)) | bits_of(v, arm_bits(), at);
      continue;
    }
    bool known = false;
    for (const auto& [name, bit, member] : transition_bits())
      if (key == name) {
        if (!v.is_boolean()) throw std::runtime_error(at + ": expected true or false, got " + v.dump());
        c.transitions = v.get<bool>() ? c.transitions | bit : c.transitions & ~bit;
        known = true;
      }
    for (const Limit& l : kLimits)
      if (key == l.name) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (1 << 30))
          throw std::runtime_error(at + ": expected a whole number >= 0 (0: no limit), got " + v.dump());
        c.*l.declared = int(v.get<int64_t>());
        known = true;
      }
    if (!known) {
      std::string names = "h_modes, verify_arms";
      for (const auto& [name, bit, member] : transition_bits()) names += std::string(", ") + name;
      for (const Limit& l : kLimits) names += std::string(", ") + l.name;
      throw std::runtime_error(where + ": unknown member '" + key + "' (expected " + names + ")");
    }
  }
  return c;
}

Capabilities with_declared(Capabilities c, const ssmp_capabilities& d) {
  c.h_modes.clear();
  for (const auto& [name, bit, mode] : h_mode_bits())
    if (d.h_modes & bit) c.h_modes.push_back(mode);
  c.verify_arms.clear();
  for (const auto& [name, bit, arm] : arm_bits())
    if (d.transitions & bit) c.verify_arms.push_back(arm);
  for (const auto& [name, bit, member] : transition_bits()) c.*member = (d.transitions & bit) != 0;
  for (const Limit& l : kLimits) c.*l.value = d.*l.declared;
  return c;
}

}  // namespace ssm::plugin
