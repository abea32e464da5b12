// Device selection (core/device_select.h): --device D narrows CUDA_VISIBLE_DEVICES through the
// list already visible, CTest's allocation is read from its variables, and bad values are named.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/device_select.h"

namespace ssm {
namespace {

TEST(DeviceSelect, NarrowsThroughTheVisibleList) {
  EXPECT_EQ(visible_devices_for(0, nullptr), "0");
  EXPECT_EQ(visible_devices_for(3, ""), "3");
  EXPECT_EQ(visible_devices_for(1, "2,3"), "3");
  EXPECT_EQ(visible_devices_for(0, "GPU-8a1c"), "GPU-8a1c");  // UUIDs pass through
  try {
    visible_devices_for(2, "2,3");
    FAIL() << "device 2 of 2 visible GPUs accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "--device 2: CUDA_VISIBLE_DEVICES='2,3' leaves 2 GPUs (0..1)");
  }
  EXPECT_THROW(visible_devices_for(-1, nullptr), std::invalid_argument);
}

TEST(DeviceSelect, ReadsCtestAllocation) {
  EXPECT_EQ(ctest_allocated_gpu(nullptr, nullptr), std::nullopt);
  EXPECT_EQ(ctest_allocated_gpu("0", "id:1,slots:1"), std::nullopt);
  EXPECT_EQ(ctest_allocated_gpu("1", "id:1,slots:1"), "1");
  EXPECT_EQ(ctest_allocated_gpu("1", "id:12,slots:2"), "12");
  EXPECT_THROW(ctest_allocated_gpu("1", "slots:1"), std::invalid_argument);
  EXPECT_THROW(ctest_allocated_gpu("1", "id:,slots:1"), std::invalid_argument);
}

TEST(DeviceSelect, SelectSetsTheVariableForChildren) {
  setenv("CUDA_VISIBLE_DEVICES", "4,5,6", 1);
  select_device(2);
  EXPECT_STREQ(std::getenv("CUDA_VISIBLE_DEVICES"), "6");
  unsetenv("CUDA_VISIBLE_DEVICES");
  select_device(1);
  EXPECT_STREQ(std::getenv("CUDA_VISIBLE_DEVICES"), "1");
  unsetenv("CUDA_VISIBLE_DEVICES");
}

}  // namespace
}  // namespace ssm
