// Reads in a child first (see crash_probe.h).
#include "formats/crash_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ssm::formats {

std::string crash_probe(const std::function<void()>& read, bool* threw) {
  if (threw) *threw = false;
  const pid_t pid = ::fork();
  if (pid < 0) return "";
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) {
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    // the child must die of the signal itself, not run a crash handler of the parent's
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
    int rc = 0;
    try {
      read();
    } catch (...) {
      rc = 3;
    }
    ::_exit(rc);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return "";
  if (!WIFSIGNALED(status)) {
    if (threw) *threw = WIFEXITED(status) && WEXITSTATUS(status) == 3;
    return "";
  }
  const int sig = WTERMSIG(status);
  const char* name = sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGABRT ? "SIGABRT"
                     : sig == SIGFPE ? "SIGFPE" : sig == SIGILL ? "SIGILL" : strsignal(sig);
  return std::string("reading it crashed libhdf5 (") + name + ")";
}

}  // namespace ssm::formats
