// The crash verdict (see crash_verdict.h).
#include "cli/crash_verdict.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>

#include "cli/commands.h"
#include "plugin/plugin_backend.h"

namespace ssm::cli {

namespace {

struct Armed {
  std::string path;
  std::atomic<const std::string*> text{nullptr};
};
Armed g_files[2];
std::deque<std::string> g_texts;  // every rendered text stays alive while armed (a handler may read it)

void write_all(const char* path, const std::string* text) {
  if (!path || !*path || !text || (path[0] == '-' && path[1] == '\0')) return;  // "-": stdout, not a file
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  const char* p = text->data();
  size_t left = text->size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n <= 0) break;
    p += n;
    left -= size_t(n);
  }
  ::close(fd);
}

void say(const char* s) { (void)!::write(2, s, std::strlen(s)); }

extern "C" void on_fatal_signal(int sig) {
  for (Armed& a : g_files) write_all(a.path.c_str(), a.text.load());
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
  g_files[0].path = junit_path;
  g_files[1].path = json_path;
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
