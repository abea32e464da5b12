// Filling an ssmp_error (plugin/ssmcheck_plugin.h) from C++: its text members, truncated to fit and
// NUL-terminated, and `guarded`, which runs a call and turns its C++ exceptions into the ABI's
// codes (the contract's StateError a refusal of its kind). Used by the plug-in tables written in C++
// here: plugin/backend_plugin.cpp, plugin/hosted_plugin.cpp, tests/plugins/by_name_plugin.cpp.
#pragma once
#include <cstring>
#include <exception>
#include <string>

#include "core/errors.h"
#include "plugin/ssmcheck_plugin.h"

namespace ssm::plugin {

inline void set_text(char* dst, size_t n, const std::string& s) {
  std::strncpy(dst, s.c_str(), n - 1);
  dst[n - 1] = '\0';
}

template <class F>
int guarded(ssmp_error* err, F&& f) {
  try {
    f();
    return SSMP_OK;
  } catch (const StateError& e) {
    set_text(err->kind, sizeof err->kind, to_string(e.kind()));
    set_text(err->message, sizeof err->message, e.what());
    return SSMP_REFUSED;
  } catch (const std::exception& e) {
    set_text(err->message, sizeof err->message, e.what());
    return SSMP_ERROR;
  }
}

}  // namespace ssm::plugin
