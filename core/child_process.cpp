#include "core/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace ssm {

std::filesystem::path self_executable() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find this executable (/proc/self/exe): " + ec.message());
  return p;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

std::vector<std::string> environment_with(const std::string& name, const std::string& value) {
  const std::string prefix = name + "=";
  std::vector<std::string> env;
  for (const std::string& e : current_environment())
    if (e.compare(0, prefix.size(), prefix) != 0) env.push_back(e);
  if (!value.empty()) env.push_back(prefix + value);
  return env;
}

namespace {

// posix_spawn with the file actions `add` sets up.
template <class Actions>
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, Actions&& add) {
  std::vector<std::string> argv_s = argv, env_s = env;
  std::vector<char*> args, envp;
  for (auto& s : argv_s) args.push_back(s.data());
  args.push_back(nullptr);
  for (auto& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  add(&fa);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(err));
  return pid;
}

}  // namespace

pid_t start_child(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& log) {
  return spawn(argv, env, [&](posix_spawn_file_actions_t* fa) {
    posix_spawn_file_actions_addopen(fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(fa, 1, 2);
  });
}

pid_t start_child(const std::vector<std::string>& argv, const std::vector<std::string>& env, int log_fd,
                  const std::vector<std::pair<int, int>>& fds) {
  return spawn(argv, env, [&](posix_spawn_file_actions_t* fa) {
    posix_spawn_file_actions_adddup2(fa, log_fd, 1);
    posix_spawn_file_actions_adddup2(fa, log_fd, 2);
    // dup2 clears FD_CLOEXEC on the copy; a descriptor already at its number keeps its flag, so
    // callers pass descriptors numbered above every child_fd
    for (const auto& [child, parent] : fds) posix_spawn_file_actions_adddup2(fa, parent, child);
  });
}

bool child_ended(pid_t pid, int* status) { return waitpid(pid, status, WNOHANG) == pid; }

int wait_child(pid_t pid, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  for (;;) {
    if (child_ended(pid, &status)) return status;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string describe_wait_status(int status) {
  if (status == -1) return "ran past its time limit and was killed";
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "ended with wait status " + std::to_string(status);
}

}  // namespace ssm
