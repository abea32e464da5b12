// ssmcheck's side of a host process: the system under test (a C plug-in, a Python class) runs in
// a process of its own, started here, so that nothing it does (exit with any code, a fatal signal,
// a stack overflow, a hang, writes to stdout, writes past its buffers) can end or corrupt
// ssmcheck's process or its verdict: each becomes an error of the call it happened in, naming it.
// The host dies with ssmcheck (it asks the kernel for SIGKILL when its parent ends) and is started
// again, fresh, for the next instance after it died. Counterparts: host_wire.h (the wire),
// host_server.h and python/ssmcheck/host.py (the two hosts), hosted_plugin.h (the plug-in table
// that forwards calls through this).
#pragma once
#include <sys/types.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "plugin/host_wire.h"

namespace ssm::plugin {

// The host process ended, hung or broke the wire during a call: it is dead now (killed and
// reaped); the message names the call, what happened, and the end of what it printed.
struct HostDied : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The time a host has for one call, in seconds: --call-timeout, else SSMCHECK_CALL_TIMEOUT, else
// kDefaultCallTimeout. main() sets the variable from the flag, so --jobs workers inherit it.
constexpr double kDefaultCallTimeout = 120.0;
constexpr const char* kCallTimeoutVariable = "SSMCHECK_CALL_TIMEOUT";
double call_timeout_s();

// How to start a host: argv, and environment variables set on top of ssmcheck's own. The host
// finds its channel and arena as descriptors 3 and 4 (SSMCHECK_HOST_FDS=3,4) and ssmcheck's pid
// in SSMCHECK_HOST_PARENT.
struct HostLaunch {
  std::string label;  // "plugin:x", "python:y": who the host runs, for messages
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  // the host gets a doorbell (host_wire.h) as descriptor 5 (SSMCHECK_HOST_BELL=5): frames go
  // through the arena when its hello says "bell" (ssmcheck-plugin-host), else through the socket
  // (the Python host); either names the slot it exports after an op there (Bell::exporting)
  bool bell = false;
};

class HostProcess {
 public:
  explicit HostProcess(HostLaunch launch);
  ~HostProcess();  // kills and reaps the host
  HostProcess(const HostProcess&) = delete;
  HostProcess& operator=(const HostProcess&) = delete;

  // Starts the host when it is not running and says hello; returns the hello reply. A host that
  // dies or refuses while starting throws HostDied / std::runtime_error naming the launch.
  const nlohmann::json& start();
  bool running() const { return pid_ > 0; }
  int generation() const { return generation_; }  // counts the starts: instances of a dead host are stale
  const std::string& label() const { return launch_.label; }

  // One call: the request with its arrays placed in the arena, then the reply (status included)
  // and its arrays; both stay valid until the next call. `what` names the call for messages
  // ("decode(slots 0, 1)"), called only when one is needed. Throws HostDied when the host does not answer.
  struct Reply {
    bool compact = false;  // a Compact record (c; msg is not set), else JSON (msg)
    wire::Compact c;
    const std::vector<int32_t>* slots = nullptr;  // a Compact reply's c.n_slots words (kExportAfter's heads)
    nlohmann::json msg;
    std::vector<std::pair<const char*, uint64_t>> arrays;
    int status() const { return compact ? c.status : msg.value("status", -1); }
  };
  const Reply& call(const nlohmann::json& request, const std::vector<wire::Arena::Piece>& arrays,
                    const std::function<std::string()>& what);
  // An op's call (wire::Op): a Compact record with c.n_slots slots when the host takes them (a C
  // host through the doorbell), else the same call in JSON (wire::json_of). A host that dies or
  // hangs while it exports for a kExportAfter call is reported as dying in that export.
  const Reply& call(const wire::Compact& c, const int32_t* slots, const std::vector<wire::Arena::Piece>& arrays,
                    const std::function<std::string()>& what);

  // Whether op calls go as Compact records (a C host through the doorbell): only then can they
  // carry wire::kExportAfter.
  bool compact() const { return compact_; }

  // Why the host last died ("" while it never did).
  const std::string& last_death() const { return last_death_; }

 private:
  // Ends the host (it is given a moment to end by itself, so that its exit status or signal can be
  // named: `how` overrides that, `if_alive` says what it did when it had to be killed) and throws
  // HostDied naming `what`, the status and the end of its output.
  // sends with `send`, then waits for the reply
  template <class Send>
  const Reply& exchange(const Send& send, const std::function<std::string()>& what);
  [[noreturn]] void died(const std::string& what, const std::string& how, const std::string& if_alive = "");
  std::string output_tail() const;
  void stop();

  HostLaunch launch_;
  pid_t pid_ = -1;
  int channel_ = -1;
  int log_ = -1;  // the host's stdout and stderr (an unlinked temporary file)
  wire::Arena arena_;
  wire::Bell bell_;
  bool use_bell_ = false;  // the host answered the hello with "bell": true
  bool compact_ = false;   // ... and "compact": true: ops go as Compact records
  uint64_t calls_ = 0;     // calls since the start, for checking the output file's size now and then
  wire::Frame frame_;      // the last reply's frame, and the reply (reused: a call allocates nothing)
  Reply reply_;
  nlohmann::json hello_;
  int generation_ = 0;
  double timeout_s_ = kDefaultCallTimeout;  // call_timeout_s() at the last start
  std::string last_death_;
};

}  // namespace ssm::plugin
