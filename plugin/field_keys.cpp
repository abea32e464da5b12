// The state's fields by their ABI names (see field_keys.h).
#include "plugin/field_keys.h"

#include <map>
#include <utility>

namespace ssm::plugin {

std::optional<FieldKey> field_key_of(const std::string& name, int layer, int index) {
  static const std::map<std::string, std::pair<FieldKind, bool>> kinds = {
      // kind, indexed
      {"h", {FieldKind::h, false}},
      {"conv", {FieldKind::conv, false}},
      {"h_checkpoint", {FieldKind::h_checkpoint, false}},
      {"conv_checkpoint", {FieldKind::conv_checkpoint, false}},
      {"h_intermediate", {FieldKind::h_intermediate, true}},
      {"conv_intermediate", {FieldKind::conv_intermediate, true}},
      {"ple_history", {FieldKind::ple_history, false}},
      {"ple_conv", {FieldKind::ple_conv, false}},
      {"ple_history_checkpoint", {FieldKind::ple_checkpoint_history, false}},
      {"ple_conv_checkpoint", {FieldKind::ple_checkpoint_conv, false}},
      {"ple_history_snapshot", {FieldKind::ple_snapshot_history, true}},
      {"ple_conv_snapshot", {FieldKind::ple_snapshot_conv, true}},
  };
  if (name == "h_prefill_stage") return FieldKey{FieldKind::stage, -1, 0};
  const auto it = kinds.find(name);
  if (it == kinds.end() || layer < 0) return std::nullopt;
  return FieldKey{it->second.first, layer, it->second.second ? index : 0};
}

}  // namespace ssm::plugin
