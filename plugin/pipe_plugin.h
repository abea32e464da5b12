// A plug-in served by another process over two pipes: the Python bridge (python/ssmcheck). The
// table returned here is an ordinary plug-in table (plugin/ssmcheck_plugin.h) whose members send
// each call, with its arguments and arrays, to the serving process and return its answer, so a
// Python class is driven through exactly the calls a C plug-in gets. The serving process is
// started by the bridge, which passes the two pipe ends in SSMCHECK_PYTHON_FDS=READ,WRITE.
//
// Wire format (both directions, little-endian): u64 length + JSON text, u32 count, then count
// blobs of u64 length + bytes (FP32 arrays, row-major; FP16 as binary16 bits). Requests are
// {"call": NAME, "instance": ID, ...}; replies {"status": 0|1|2, "kind", "message", ...}.
// python/ssmcheck/bridge.py is the other side; docs/plugins.md, "Python", describes both.
#pragma once
#include <string>

#include "plugin/ssmcheck_plugin.h"

namespace ssm::plugin {

constexpr const char* kPythonScheme = "python:";

// Connects to the serving process (SSMCHECK_PYTHON_FDS) once per process, asks what it declares
// (name, own legality, bitwise) and returns the table. Throws std::runtime_error when there is
// no serving process or it answers something else.
const ssmp_plugin* python_plugin_table();

}  // namespace ssm::plugin
