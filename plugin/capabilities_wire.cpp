// The capabilities of a hosted implementation on the wire (see capabilities_wire.h).
#include "plugin/capabilities_wire.h"

#include <stdexcept>
#include <utility>
#include <vector>

namespace ssm::plugin {

namespace {
// The named bits of each list member, in ssmcheck_plugin.h's terms.
const std::vector<std::pair<const char*, uint32_t>>& h_mode_bits() {
  static const std::vector<std::pair<const char*, uint32_t>> v = {
      {"f32", SSMP_RUNS_F32}, {"f16", SSMP_RUNS_F16}, {"f16-pool", SSMP_RUNS_F16_POOL}};
  return v;
}
const std::vector<std::pair<const char*, uint32_t>>& arm_bits() {
  static const std::vector<std::pair<const char*, uint32_t>> v = {{"exact", SSMP_T_VERIFY_EXACT},
                                                                  {"wy", SSMP_T_VERIFY_WY}};
  return v;
}
const std::vector<std::pair<const char*, uint32_t>>& transition_bits() {
  static const std::vector<std::pair<const char*, uint32_t>> v = {
      {"checkpoint_async", SSMP_T_CHECKPOINT_ASYNC},
      {"rollback_and_checkpoint_async", SSMP_T_ROLLBACK_AND_CHECKPOINT_ASYNC},
      {"snapshots", SSMP_T_SNAPSHOTS},
      {"pad_rows", SSMP_T_PAD_ROWS}};
  return v;
}
const char* const kLimits[] = {"max_batch", "max_verify_k", "max_slots"};

int* limit(ssmp_capabilities& c, const std::string& name) {
  return name == "max_batch" ? &c.max_batch : name == "max_verify_k" ? &c.max_verify_k : &c.max_slots;
}

nlohmann::json names_of(uint32_t bits, const std::vector<std::pair<const char*, uint32_t>>& table) {
  nlohmann::json v = nlohmann::json::array();
  for (const auto& [name, bit] : table)
    if (bits & bit) v.push_back(name);
  return v;
}

// The bits of a list of names; throws naming the member and the unknown name.
uint32_t bits_of(const nlohmann::json& v, const std::vector<std::pair<const char*, uint32_t>>& table,
                 const std::string& where) {
  std::string known;
  for (const auto& [name, bit] : table) known += (known.empty() ? "" : ", ") + std::string(name);
  if (!v.is_array()) throw std::runtime_error(where + ": expected a list of " + known + ", got " + v.dump());
  uint32_t bits = 0;
  for (const nlohmann::json& x : v) {
    bool found = false;
    for (const auto& [name, bit] : table)
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
  for (const auto& [name, bit] : transition_bits()) j[name] = (c.transitions & bit) != 0;
  ssmp_capabilities copy = c;
  for (const char* name : kLimits) j[name] = *limit(copy, name);
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
    for (const auto& [name, bit] : transition_bits())
      if (key == name) {
        if (!v.is_boolean()) throw std::runtime_error(at + ": expected true or false, got " + v.dump());
        c.transitions = v.get<bool>() ? c.transitions | bit : c.transitions & ~bit;
        known = true;
      }
    for (const char* name : kLimits)
      if (key == name) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (1 << 30))
          throw std::runtime_error(at + ": expected a whole number >= 0 (0: no limit), got " + v.dump());
        *limit(c, name) = int(v.get<int64_t>());
        known = true;
      }
    if (!known) {
      std::string names = "h_modes, verify_arms";
      for (const auto& [name, bit] : transition_bits()) names += std::string(", ") + name;
      for (const char* name : kLimits) names += std::string(", ") + name;
      throw std::runtime_error(where + ": unknown member '" + key + "' (expected " + names + ")");
    }
  }
  return c;
}

}  // namespace ssm::plugin
