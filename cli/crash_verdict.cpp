// The crash verdict (see crash_verdict.h).
#include "cli/crash_verdict.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>

#include "cli/commands.h"
#include "formats/output_file.h"
#include "plugin/plugin_backend.h"

namespace ssm::cli {

namespace {

struct Armed {
  files::PreparedOutput out;  // decided when armed: the handler only makes system calls
  bool ready = false;
  std::atomic<const std::string*> text{nullptr};
};
Armed g_files[2];
std::deque<std::string> g_texts;  // every rendered text stays alive while armed (a handler may read it)

void arm(Armed& a, const std::string& path) {
  a.ready = false;
  if (path.empty() || path == "-") return;  // "-": stdout, not a file
  try {
    a.out = files::prepare_output(path);  // the outputs rule (formats/output_file.h)
    a.ready = true;
  } catch (const files::OutputError&) {
    // not writable as a file: the normal write names the flag and the reason
  }
}

void write_all(const Armed& a) {
  const std::string* text = a.text.load();
  if (!a.ready || !text) return;
  (void)files::write_prepared(a.out, text->data(), text->size());
}

void say(const char* s) { (void)!::write(2, s, std::strlen(s)); }

extern "C" void on_fatal_signal(int sig) {
  for (const Armed& a : g_files) write_all(a);
  if (const char* call = plugin::plugin_call_in_progress()) {
    // the plug-in crashed, not ssmcheck: a bad plug-in is bad input (exit 2), with the call named
    say("ssmcheck: error: the plug-in crashed (");
    say(sig == SIGSEGV ? "SIGSEGV" : sig == SIGABRT ? "SIGABRT" : sig == SIGBUS ? "SIGBUS" : sig == SIGFPE ? "SIGFPE" : "SIGILL");
    say(") inside ");
    say(call);
    say("; a JUnit/JSON verdict, when asked for, names the check\n");
    ::_exit(kExitBadInput);
  }
  say("ssmcheck: fatal signal; the JUnit/JSON verdict names the check that crashed\n");
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void install_crash_handlers() {
  static bool installed = [] {
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, on_fatal_signal);
    return true;
  }();
  (void)installed;
}

CrashVerdict::CrashVerdict(const std::string& junit_path, const std::string& json_path) {
  arm(g_files[0], junit_path);
  arm(g_files[1], json_path);
  install_crash_handlers();
}

CrashVerdict::~CrashVerdict() {
  for (Armed& a : g_files) a.text.store(nullptr);
}

void CrashVerdict::update(const std::string& junit_text, const std::string& json_text) {
  g_texts.push_back(junit_text);
  g_files[0].text.store(&g_texts.back());
  g_texts.push_back(json_text);
  g_files[1].text.store(&g_texts.back());
}

}  // namespace ssm::cli
