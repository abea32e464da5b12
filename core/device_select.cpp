// Device selection through CUDA_VISIBLE_DEVICES (see device_select.h).
#include "core/device_select.h"

#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace ssm {

std::string visible_devices_for(int device, const char* visible) {
  if (device < 0) throw std::invalid_argument("--device " + std::to_string(device) + ": expected a GPU index >= 0");
  if (!visible || !*visible) return std::to_string(device);
  std::vector<std::string> ids;
  std::stringstream s(visible);
  for (std::string id; std::getline(s, id, ',');) ids.push_back(id);
  if (size_t(device) >= ids.size())
    throw std::invalid_argument("--device " + std::to_string(device) + ": CUDA_VISIBLE_DEVICES='" + visible +
                                "' leaves " + std::to_string(ids.size()) + " GPU" + (ids.size() == 1 ? "" : "s") +
                                " (0.." + std::to_string(ids.size() - 1) + ")");
  return ids[size_t(device)];
}

std::optional<std::string> ctest_allocated_gpu(const char* group_count, const char* gpus) {
  if (!group_count || std::atoi(group_count) < 1 || !gpus) return std::nullopt;
  const std::string v = gpus;  // "id:1,slots:1"
  const auto at = v.find("id:");
  const auto end = v.find(',', at);
  if (at == std::string::npos || end == std::string::npos || end == at + 3)
    throw std::invalid_argument("CTEST_RESOURCE_GROUP_0_GPUS='" + v + "': expected id:N,slots:M");
  return v.substr(at + 3, end - at - 3);
}

void select_device(int device) {
  const std::string v = visible_devices_for(device, std::getenv("CUDA_VISIBLE_DEVICES"));
  setenv("CUDA_VISIBLE_DEVICES", v.c_str(), 1);
}

}  // namespace ssm
