// Child processes: `mutants` runs the mutant build once per mutant, `fuzz --jobs` runs its shards,
// a plug-in or Python class runs in its host process (plugin/host_process.h). Started with
// posix_spawn (no fork of a process that may hold a CUDA context), stdout and stderr to a log.
#pragma once
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace ssm {

// This executable (/proc/self/exe).
std::filesystem::path self_executable();

// This process's environment, and the same with NAME=value set (replacing NAME's entry; value ""
// keeps NAME out).
std::vector<std::string> current_environment();
std::vector<std::string> environment_with(const std::string& name, const std::string& value);

// Starts argv[0] (a path) with `env`, stdout and stderr to `log`; throws std::runtime_error
// naming the program when it cannot start.
pid_t start_child(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& log);
// The same with stdout and stderr to the open file log_fd, and each {child_fd, parent_fd} of
// `fds` open in the child as child_fd (every other descriptor the child inherits as usual).
pid_t start_child(const std::vector<std::string>& argv, const std::vector<std::string>& env, int log_fd,
                  const std::vector<std::pair<int, int>>& fds);

// Waits for a child: its wait status, or -1 when it ran past timeout_s (it is then killed).
int wait_child(pid_t pid, double timeout_s);

// Without waiting: true and its wait status in *status when the child has ended.
bool child_ended(pid_t pid, int* status);

// "exited 3", "killed by signal 9 (Killed)": a wait status in words.
std::string describe_wait_status(int status);

}  // namespace ssm
