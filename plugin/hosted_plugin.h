// A system under test served by a host process (plugin/host_process.h): a C plug-in through
// ssmcheck-plugin-host (the default for `plugin:PATH.so`), a Python class through
// python/ssmcheck/host.py (`python:NAME`). The table returned here is an ordinary plug-in table
// (plugin/ssmcheck_plugin.h) whose members send each call with its arrays to the host and return
// its answer, so PluginBackend drives a hosted implementation exactly as an in-process one; a host
// that dies or hangs during a call makes that call fail (SSMP_ERROR, the message naming what
// happened), and the next create starts a fresh host.
//
// Protocol (plugin/host_wire.h carries it): requests {"call": NAME, "instance": ID, ...} with the
// call's input arrays; the reply's arrays are the outputs. hello -> the declaration ("flags" from
// a C host; the string attributes of bridge.py's declared() from a Python host). create_pool
// sends each layer's description and its weights in the order conv_w, [conv_bias], A_log,
// dt_bias, norm_w, [D], [ple_w]; prefill/decode/verify send per entry and layer x, a, b (empty for
// Mamba-2), z, [ple_tokens, ple_x] and get per entry and layer the output, [the PLE output];
// export_state gets the fields it has, in the order read below; a C host sends the exports of the
// instance's slots with each op's reply instead (wire::kExportAfter), and export_state after the op
// reads them from there; a Python host whose class has field digests is asked ("digests_after":
// true) for every claimed slot's digests with the reply ("digests": [[slot, fields, rest], ...]),
// from which field_digests is answered. docs/plugins.md, "The host process".
#pragma once
#include <string>

#include "plugin/host_process.h"
#include "plugin/ssmcheck_plugin.h"

namespace ssm::plugin {

constexpr const char* kPythonScheme = "python:";

// Starts the host, reads what it declares and returns the table (kept for the process's life; up
// to kMaxHosts hosts per process). Throws std::runtime_error naming the launch when the host
// does not start or declares something this ssmcheck does not know.
constexpr int kMaxHosts = 32;
const ssmp_plugin* hosted_plugin_table(HostLaunch launch);
// Whether the implementation behind a table hosted_plugin_table returned speaks SSMP_BY_NAME (its
// host drives it by name; the table, which forwards positional calls, does not carry the flag).
bool hosted_plugin_by_name(const ssmp_plugin* table);

// ssmcheck-plugin-host serving the plug-in at `path`: beside this executable, or
// $SSMCHECK_PLUGIN_HOST, or the one of the build tree this ssmcheck came from.
HostLaunch c_plugin_launch(const std::string& path, const std::string& label);

// A Python class, as ssmcheck.run (python/ssmcheck/bridge.py) describes it to ssmcheck:
// SSMCHECK_PYTHON_HOST (the host's argv, JSON) and SSMCHECK_PYTHON_CLASS. Throws
// std::runtime_error saying how to run a python: backend when they are not set.
HostLaunch python_launch(const std::string& name);

}  // namespace ssm::plugin
