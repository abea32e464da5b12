// A verdict that survives a crash: a subcommand that writes JUnit or JSON registers what those
// files must say if the process dies on a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGABRT) in the middle of a check, and updates it before each check starts (the checks done
// so far, and the running one marked as crashed). The signal handler only writes those
// pre-rendered bytes with system calls (async-signal-safe), by the outputs rule of
// formats/output_file.h decided when the files were armed (an exclusive temporary renamed over a
// regular file, a device written through), then lets the signal kill the process as before, so CI still sees the crash and also finds a failing verdict naming the
// check that crashed. A crash inside a plug-in's call (plugin/plugin_backend.h) is the plug-in's
// fault, not ssmcheck's: the handler then names the call and exits 2 (bad input).
#pragma once
#include <string>

namespace ssm::cli {

// Installs the fatal-signal handlers (once per process; main does it, so a crashing plug-in is
// reported even without --junit/--json).
void install_crash_handlers();

class CrashVerdict {
 public:
  // Installs the handlers (once per process) and remembers the files; "" = none.
  CrashVerdict(const std::string& junit_path, const std::string& json_path);
  ~CrashVerdict();  // the verdict is written normally by then: disarms
  // Never copied or moved: a moved-from copy's destructor would disarm the live one.
  CrashVerdict(const CrashVerdict&) = delete;
  CrashVerdict& operator=(const CrashVerdict&) = delete;
  // What the files must say if the process dies before the next update or the destructor.
  void update(const std::string& junit_text, const std::string& json_text);
};

}  // namespace ssm::cli
