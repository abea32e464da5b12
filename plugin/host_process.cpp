// ssmcheck's side of a host process (see host_process.h).
#include "plugin/host_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/child_process.h"

namespace ssm::plugin {

namespace {

using Clock = std::chrono::steady_clock;

// A descriptor moved above the numbers the host expects (3, 4), close-on-exec in ssmcheck.
int high_fd(int fd) {
  const int h = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  if (h < 0) throw std::runtime_error(std::string("cannot move a descriptor: ") + std::strerror(errno));
  return h;
}

std::string printable(const std::string& s) {
  std::string o;
  for (unsigned char c : s) o += (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) ? char(c) : '?';
  return o;
}

constexpr off_t kLogKeep = 1 << 20;  // the host's output is cut back to nothing between calls above this

}  // namespace

double call_timeout_s() {
  const char* v = std::getenv(kCallTimeoutVariable);
  if (!v || !*v) return kDefaultCallTimeout;
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  if (end == v || *end || !(t > 0) || !std::isfinite(t))
    throw std::invalid_argument(std::string(kCallTimeoutVariable) + "=" + v + ": not a positive number of seconds");
  return t;
}

HostProcess::HostProcess(HostLaunch launch) : launch_(std::move(launch)) {}

HostProcess::~HostProcess() { stop(); }

void HostProcess::stop() {
  if (channel_ >= 0) ::close(channel_);
  channel_ = -1;
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  pid_ = -1;
  if (log_ >= 0) ::close(log_);
  log_ = -1;
  arena_ = wire::Arena();
  bell_ = wire::Bell();
  use_bell_ = false;
  compact_ = false;
}

std::string HostProcess::output_tail() const {
  if (log_ < 0) return "";
  struct stat st {};
  if (::fstat(log_, &st) != 0 || st.st_size == 0) return "";
  constexpr off_t kTail = 600;
  const off_t from = st.st_size > kTail ? st.st_size - kTail : 0;
  std::string buf(size_t(st.st_size - from), '\0');
  const ssize_t n = ::pread(log_, buf.data(), buf.size(), from);
  if (n <= 0) return "";
  buf.resize(size_t(n));
  while (!buf.empty() && (buf.back() == '\n' || buf.back() == ' ')) buf.pop_back();
  return (from > 0 ? "..." : "") + printable(buf);
}

void HostProcess::died(const std::string& what, const std::string& how, const std::string& if_alive) {
  std::string status = how;
  if (pid_ > 0) {
    // the channel closed or broke: give the host a moment to finish ending, so that its exit
    // status or signal can be named; one still running then is killed
    int ws = 0;
    pid_t r = 0;
    for (int i = 0; i < 200 && (r = ::waitpid(pid_, &ws, WNOHANG)) == 0; ++i) ::usleep(10000);
    if (r == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &ws, 0);
      if (status.empty()) status = if_alive.empty() ? "closed its channel and was killed" : if_alive;
    } else if (status.empty()) {
      status = describe_wait_status(ws);
      if (WIFEXITED(ws)) status += " (the code under test ended its process: exit() or os._exit()?)";
    }
    pid_ = -1;
  }
  // a host exporting for a kExportAfter call names the slot (host_wire.h): the export is what failed
  const int exporting = bell_.on() ? bell_.exporting() : -1;
  const std::string call =
      exporting < 0 ? what : "export_state(slot " + std::to_string(exporting) + "), sent with the reply of " + what;
  std::string msg = "the host process of " + launch_.label + " " + status + " during " + call;
  const std::string tail = output_tail();
  if (!tail.empty()) msg += "; its output ended with: " + tail;
  last_death_ = msg;
  stop();
  throw HostDied(msg);
}

const nlohmann::json& HostProcess::start() {
  if (running()) return hello_;
  stop();
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::runtime_error("cannot create the host channel: " + std::string(std::strerror(errno)));
  channel_ = high_fd(sv[0]);
  const int host_end = high_fd(sv[1]);
  arena_ = wire::Arena::create();
  const int arena_fd = high_fd(::dup(arena_.fd()));
  int bell_fd = -1;
  if (launch_.bell) {
    bell_ = wire::Bell::create();
    bell_fd = high_fd(::dup(bell_.fd()));
  }
  const std::string tmp = (std::filesystem::temp_directory_path() / "ssmcheck-host-XXXXXX").string();
  std::string name = tmp;
  const int log = ::mkostemp(name.data(), O_CLOEXEC | O_APPEND);
  if (log < 0) {
    ::close(host_end);
    ::close(arena_fd);
    throw std::runtime_error("cannot create the host's output file in " + tmp + ": " + std::strerror(errno));
  }
  ::unlink(name.c_str());  // nothing is left behind, whatever happens to either process
  log_ = high_fd(log);
  std::vector<std::string> env = current_environment();
  std::vector<std::pair<std::string, std::string>> vars = launch_.env;
  vars.emplace_back("SSMCHECK_HOST_FDS", "3,4");
  vars.emplace_back("SSMCHECK_HOST_PARENT", std::to_string(::getpid()));
  if (bell_fd >= 0) vars.emplace_back("SSMCHECK_HOST_BELL", "5");
  // The host is called in lockstep with ssmcheck: OpenMP threads spinning between its calls take
  // the cores ssmcheck's own work needs then (docs/plugins.md "The host process"). The user's own
  // OMP_WAIT_POLICY is kept.
  if (!std::getenv("OMP_WAIT_POLICY")) vars.emplace_back("OMP_WAIT_POLICY", "passive");
  for (const auto& [k, v] : vars) {
    const std::string prefix = k + "=";
    std::vector<std::string> kept;
    for (const std::string& e : env)
      if (e.compare(0, prefix.size(), prefix) != 0) kept.push_back(e);
    kept.push_back(prefix + v);
    env.swap(kept);
  }
  std::vector<std::pair<int, int>> fds = {{3, host_end}, {4, arena_fd}};
  if (bell_fd >= 0) fds.emplace_back(5, bell_fd);
  auto close_ends = [&] {
    ::close(host_end);
    ::close(arena_fd);
    if (bell_fd >= 0) ::close(bell_fd);
  };
  try {
    pid_ = start_child(launch_.argv, env, log_, fds);
  } catch (...) {
    close_ends();
    stop();
    throw;
  }
  close_ends();
  ++generation_;
  timeout_s_ = call_timeout_s();  // read once per start, not on every call
  const Reply& r =
      call({{"call", "hello"}, {"abi", 1}}, {}, [&] { return "start-up (loading " + launch_.label + ")"; });
  if (r.status() != 0) {
    const std::string why = r.msg.value("message", std::string("no message"));
    stop();
    throw std::runtime_error(launch_.label + ": its host refused to start: " + why);
  }
  hello_ = r.msg;
  use_bell_ = launch_.bell && hello_.value("bell", false);
  compact_ = use_bell_ && hello_.value("compact", false);
  hello_.erase("bell");  // how frames travel is not part of what the host declares
  hello_.erase("compact");
  return hello_;
}

const HostProcess::Reply& HostProcess::call(const nlohmann::json& request,
                                            const std::vector<wire::Arena::Piece>& arrays,
                                            const std::function<std::string()>& what) {
  return exchange(
      [&] {
        if (use_bell_) {
          bell_.send(wire::Bell::kToHost, arena_, request, arrays);
        } else {
          const auto at = arena_.put(arrays);
          wire::write_frame(channel_, request, at, arena_.size());
        }
      },
      what);
}

const HostProcess::Reply& HostProcess::call(const wire::Compact& c, const int32_t* slots,
                                            const std::vector<wire::Arena::Piece>& arrays,
                                            const std::function<std::string()>& what) {
  if (!compact_) return call(wire::json_of(c, slots), arrays, what);
  return exchange([&] { bell_.send(wire::Bell::kToHost, arena_, c, slots, arrays); }, what);
}

template <class Send>
const HostProcess::Reply& HostProcess::exchange(const Send& send, const std::function<std::string()>& what_fn) {
  // what the call is, for messages only: built when one is needed, not on every call
  auto what = [&] { return what_fn(); };
  if (!running()) throw HostDied(launch_.label + ": " + what() + ": the host process is not running (" +
                                 (last_death_.empty() ? std::string("never started") : last_death_) + ")");
  // the output file is cut back when it passed kLogKeep, looked at every 16th call (a system call)
  if (calls_++ % 16 == 0) {
    struct stat st {};
    if (::fstat(log_, &st) == 0 && st.st_size > kLogKeep) (void)!::ftruncate(log_, 0);
  }
  const double timeout = timeout_s_;
  try {
    send();
  } catch (const wire::WireError&) {
    died(what(), "");
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout));
  bool timed_out = false;
  // throws when the call's time is up or the host ended (then pid_ is -1 and last_death_ says how)
  auto check_alive = [&] {
    if (Clock::now() >= deadline) {
      timed_out = true;
      throw wire::WireError("timeout");
    }
    int ws = 0;
    if (::waitpid(pid_, &ws, WNOHANG) == pid_) {
      pid_ = -1;
      last_death_ = describe_wait_status(ws);
      throw wire::WireError("ended");
    }
  };
  auto wait = [&](int fd) {
    for (;;) {
      const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
      if (left <= 0) check_alive();
      pollfd p{fd, POLLIN, 0};
      // wake at least every 100 ms to see whether the host ended (a host whose children keep the
      // channel open never closes it)
      const int r = ::poll(&p, 1, int(std::min(left * 1000.0, 100.0)) + 1);
      if (r > 0) return;
      if (r < 0 && errno != EINTR) throw wire::WireError(std::string("poll: ") + std::strerror(errno));
      check_alive();
    }
  };
  wire::Frame& f = frame_;
  try {
    if (use_bell_) {
      bell_.receive(wire::Bell::kToClient, arena_, &f, check_alive);
    } else {
      if (!wire::read_frame(channel_, &f, wait)) died(what(), "");
      arena_.follow(f.arena_bytes);
    }
    Reply& r = reply_;
    r.compact = f.compact;
    r.arrays.clear();
    for (size_t i = 0; i < f.arrays.size(); ++i) {
      const auto [off, bytes] = f.arrays[i];
      if (off > arena_.size() || bytes > arena_.size() - off)
        arena_.at(off, bytes, "reply array " + std::to_string(i));  // throws naming it
      r.arrays.emplace_back(arena_.base() + off, bytes);
    }
    if (f.compact) {
      r.c = f.c;
      r.slots = &f.slots;
      r.msg = nullptr;
    } else {
      r.slots = nullptr;
      r.msg = std::move(f.msg);
      if (!r.msg.is_object()) throw wire::WireError("the reply is not a JSON object");
    }
    return r;
  } catch (const wire::WireError& e) {
    if (timed_out)
      died(what(), "did not answer within " + std::to_string(int(std::ceil(timeout))) +
                     " s (--call-timeout) and was killed");
    if (pid_ < 0) {  // it ended while we waited: say how
      const std::string how = last_death_;
      died(what(), how + (how.rfind("exited", 0) == 0 ? " (the code under test ended its process: exit() or os._exit()?)" : ""));
    }
    // the channel closed or broke (a host that dies with a request unread resets it): name how
    // it ended, or, when it is still running, that it broke the wire
    died(what(), "", std::string("broke the wire (") + e.what() + ") and was killed");
  }
}

}  // namespace ssm::plugin
