// ssmcheck-plugin-host: the process a C plug-in runs in (plugin/host_process.h starts it). It
// loads the plug-in, answers the wire's calls (plugin/host_wire.h) by calling the plug-in's table,
// and hands the plug-in output buffers fenced by inaccessible pages with canary bytes up to them:
// a write past a buffer is a fatal signal naming the buffer, or an error of the call naming it.
// It asks the kernel to kill it when ssmcheck ends, and on a fatal signal it says which call and
// which buffer before dying of it (ssmcheck reports both).
#pragma once
#include <string>

namespace ssm::plugin {

// Serves the plug-in at `path` on descriptors 3 (channel) and 4 (arena) until the channel closes;
// returns the process's exit code.
int serve_plugin(const std::string& path);

}  // namespace ssm::plugin
