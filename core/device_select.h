// Which GPU a process runs on, chosen before the CUDA runtime starts: `--device D` (fuzz, gate,
// check, replay, mutants, run) and CTest's resource allocation (the gpu tests) both narrow
// CUDA_VISIBLE_DEVICES to the one device, so ssmcheck's CUDA backend, in-process plug-ins and
// every child process (pipe plug-ins, the Python bridge, mutants' gate runs) see that GPU as
// device 0 and nothing else (docs/fuzzing.md, "Several GPUs"). Plain C++, no CUDA types.
#pragma once
#include <optional>
#include <string>

namespace ssm {

// The CUDA_VISIBLE_DEVICES value that leaves only device `device` of those visible now:
// `visible` is the current value (null or "": every device, so "D" itself), e.g. device 1 of
// "2,3" is "3". Throws std::invalid_argument naming the flag for a negative device or one beyond
// a non-empty list.
std::string visible_devices_for(int device, const char* visible);

// The GPU id CTest allocated to this test (--resource-spec-file): from
// CTEST_RESOURCE_GROUP_COUNT >= 1 and CTEST_RESOURCE_GROUP_0_GPUS = "id:N,slots:M"; nullopt when
// the test runs without resource allocation. Throws std::invalid_argument for a malformed value.
std::optional<std::string> ctest_allocated_gpu(const char* group_count, const char* gpus);

// Narrows CUDA_VISIBLE_DEVICES to `device` (visible_devices_for). Must run before the first
// CUDA call of the process (the runtime reads the variable once).
void select_device(int device);

}  // namespace ssm
