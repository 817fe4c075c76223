// The local multi-rank launcher: fork+exec per rank, output forwarding, failure handling.
#include "host/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/child_process.h"
#include "core/error.h"
#include "distributed/world.h"
#include "host/commands.h"
#include "host/node_rendezvous.h"

namespace slapo {

namespace fs = std::filesystem;

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Rank {
  int rank;
  pid_t pid;
  int out_fd, err_fd;
  std::string out_buf, err_buf;
  bool exited = false;
  int status = 0;
  int exit_fd = -1;          // a pidfd: readable the moment the process ends, so exits are timed closely
  int64_t exit_ns = 0;       // when the launcher saw it end
  bool stopped = false;      // the launcher signalled it: its end is not a root cause
  bool failed() const { return exited && !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }
};

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;  // poll's 100 ms tick then times exits
#endif
}

bool is_timeout_message(const std::string& m) {
  return m.find("imed out") != std::string::npos || m.find("imeout") != std::string::npos;
}

// What a rank records when a peer it talks to has ended: never the cause itself.
bool is_peer_loss_message(const std::string& m) {
  return m.find("losed by peer") != std::string::npos || m.find("eset by peer") != std::string::npos ||
         m.find("roken pipe") != std::string::npos;
}

// Writes complete lines of `buf` to `stream`, prefixed for ranks other than 0.
void flush_lines(std::string& buf, FILE* stream, int rank, bool all) {
  size_t start = 0, nl;
  while ((nl = buf.find('\n', start)) != std::string::npos || (all && start < buf.size())) {
    size_t end = nl == std::string::npos ? buf.size() : nl;
    std::string line = buf.substr(start, end - start);
    if (rank > 0) fmt::print(stream, "[rank {}] {}\n", rank, line);
    else fmt::print(stream, "{}\n", line);
    start = end + 1;
    if (nl == std::string::npos) break;
  }
  buf.erase(0, std::min(start, buf.size()));
  std::fflush(stream);
}

bool drain(int& fd, std::string& buf) {
  if (fd < 0) return false;
  char chunk[4096];
  ssize_t n = ::read(fd, chunk, sizeof(chunk));
  if (n > 0) {
    buf.append(chunk, static_cast<size_t>(n));
    return true;
  }
  if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
    ::close(fd);
    fd = -1;
  }
  return false;
}

// torchrun's variables for the rank `local_rank` of this node.
struct RankEnv {
  int rank, local_rank;
  int attempt;  // 0, then 1, 2, ... after each restart
  const LaunchOptions& launch;
  int port;  // one node: the free port MASTER_PORT names
  std::string error_file, store_file;  // store_file: one node's rendezvous
};

pid_t spawn(const RankEnv& e, const std::vector<std::string>& command, int out_pipe[2], int err_pipe[2]) {
  const LaunchOptions& o = e.launch;
  ChildSpec spec;
  spec.program = "/proc/self/exe";
  spec.argv = {"slapo-lua"};
  spec.argv.insert(spec.argv.end(), command.begin(), command.end());
  spec.stdout_fd = out_pipe[1], spec.stderr_fd = err_pipe[1];  // the pipes close on exec; these copies stay
  // a rank dies with its launcher (killed by a tuner's time limit, or by hand) instead of waiting
  // on peers that will never come: start_child's children all do
  spec.env = {{"RANK", std::to_string(e.rank)},
              {"LOCAL_RANK", std::to_string(e.local_rank)},
              {"WORLD_SIZE", std::to_string(o.nproc * o.nnodes)},
              {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
              {"GROUP_RANK", std::to_string(o.node_rank)},
              {"TORCHELASTIC_RESTART_COUNT", std::to_string(e.attempt)},
              {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts)},
              {"SLAPO_ERROR_FILE", e.error_file}};
  if (o.multi_node()) {
    // the store node 0's launcher serves on the master address
    spec.env["MASTER_ADDR"] = o.master_addr;
    spec.env["MASTER_PORT"] = std::to_string(o.master_port);
    spec.env["SLAPO_LAUNCHER_STORE"] = "1";
  } else {
    // rendezvous through a file in the launcher's private directory: nothing listens on the network
    spec.env["MASTER_ADDR"] = "127.0.0.1";
    spec.env["MASTER_PORT"] = std::to_string(e.port);
    spec.env["SLAPO_STORE_FILE"] = e.store_file;
  }
  if (!::getenv("OMP_NUM_THREADS")) {
    unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    spec.env["OMP_NUM_THREADS"] = std::to_string(std::max(1u, cores / static_cast<unsigned>(o.nproc)));
  }
  return start_child(spec, "run");
}

// Ends the ranks already started when the others cannot be.
void stop_started(const std::vector<Rank>& ranks) {
  for (const auto& r : ranks) ::kill(r.pid, SIGKILL);
  for (const auto& r : ranks) ::waitpid(r.pid, nullptr, 0);
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) return fmt::format("died from signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("exited with code {}", WEXITSTATUS(status));
}

}  // namespace

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return 29500;
  }
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

void write_error_file(const std::string& path, int rank, const std::string& message) {
  nlohmann::json j = {{"rank", rank}, {"time_ns", now_ns()}, {"message", message}};
  std::string tmp = path + ".tmp";
  std::ofstream(tmp) << j.dump() << "\n";
  fs::rename(tmp, path);
}

namespace {

// One attempt at running this node's ranks: `dir` is the attempt's own directory (error files,
// the one-node store file). The outcome: whether every rank ended cleanly and, if not, why.
struct Outcome {
  bool ok = true;
  std::string message;  // one line (and a traceback) that names the cause
};

Outcome run_attempt(const LaunchOptions& options, const std::vector<std::string>& command, const std::string& dir,
                    int attempt, std::chrono::seconds timeout, NodeRendezvous* nodes) {
  const int nproc = options.nproc, world = options.nproc * options.nnodes;
  // where each rank records its failure
  auto error_file = [&](int rank) { return fmt::format("{}/rank-{}.json", dir, rank); };
  int port = free_port();

  std::vector<Rank> ranks;
  for (int k = 0; k < nproc; ++k) {
    int out_pipe[2], err_pipe[2];
    // close-on-exec: no rank inherits another's pipes (they would outlive that rank)
    if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
      stop_started(ranks);
      return {false, "run: cannot create pipes for the ranks"};
    }
    int rank = options.node_rank * nproc + k;
    RankEnv env{rank, k, attempt, options, port, error_file(rank), dir + "/store"};
    pid_t pid = -1;
    try {
      pid = spawn(env, command, out_pipe, err_pipe);
    } catch (const Error& e) {
      for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
      stop_started(ranks);
      return {false, e.what()};
    }
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    ::fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
    ::fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
    Rank r{rank, pid, out_pipe[0], err_pipe[0], "", "", false, 0};
    r.exit_fd = open_pidfd(pid);
    ranks.push_back(r);
  }

  // Forward output and watch exits; after the first failure, stop the others (TERM, then KILL).
  // A rank still running `timeout` after every other one finished cleanly is stopped too.
  int first_failed = -1;
  std::chrono::steady_clock::time_point failed_at, last_clean_exit;
  bool killed = false;
  // After a rank fails on a timeout the others get a moment to fail too (they lose their links to
  // it); a rank still running with no error after that never reached the collective.
  std::chrono::steady_clock::time_point stop_at;
  bool stopping = false;
  std::vector<int> waiting_at_failure;  // ranks alive, with no error, when the others were stopped
  // What a rank recorded when it failed (its error file): the message and when, or nothing.
  auto read_recorded = [&](int rank) -> std::optional<std::pair<std::string, int64_t>> {
    std::ifstream in(error_file(rank));
    try {
      if (in) {
        auto j = nlohmann::json::parse(in);
        return std::make_pair(j["message"].get<std::string>(), j["time_ns"].get<int64_t>());
      }
    } catch (const std::exception&) {
    }
    return std::nullopt;
  };
  int outlived = -1;
  auto rank_at = [&](int rank) -> Rank& { return ranks.at(rank - options.node_rank * nproc); };
  std::optional<std::string> failed_elsewhere;  // another node's failure, which stopped this node's ranks
  auto stop_others = [&](int sig) {
    for (auto& other : ranks)
      if (!other.exited) {
        other.stopped = true;
        ::kill(other.pid, sig);
      }
  };
  for (;;) {
    std::vector<pollfd> fds;
    for (auto& r : ranks) {
      if (r.out_fd >= 0) fds.push_back({r.out_fd, POLLIN, 0});
      if (r.err_fd >= 0) fds.push_back({r.err_fd, POLLIN, 0});
      if (r.exit_fd >= 0 && !r.exited) fds.push_back({r.exit_fd, POLLIN, 0});
    }
    if (!fds.empty()) ::poll(fds.data(), fds.size(), 100);
    bool open_pipes = false;
    for (auto& r : ranks) {
      while (drain(r.out_fd, r.out_buf)) {}
      while (drain(r.err_fd, r.err_buf)) {}
      flush_lines(r.out_buf, stdout, r.rank, r.out_fd < 0);
      flush_lines(r.err_buf, stderr, r.rank, r.err_fd < 0);
      open_pipes = open_pipes || r.out_fd >= 0 || r.err_fd >= 0;
      if (!r.exited && ::waitpid(r.pid, &r.status, WNOHANG) == r.pid) {
        r.exited = true;
        r.exit_ns = now_ns();
        if (r.exit_fd >= 0) ::close(r.exit_fd);
        if (!r.failed()) last_clean_exit = std::chrono::steady_clock::now();
        if (r.failed() && first_failed < 0) {
          first_failed = r.rank;
          auto error = read_recorded(r.rank);
          stop_at = std::chrono::steady_clock::now() +
                    (error && is_timeout_message(error->first) ? std::chrono::seconds(3) : std::chrono::seconds(0));
        }
      }
    }
    if (first_failed >= 0 && !stopping) {
      bool all_settled = std::all_of(ranks.begin(), ranks.end(), [&](const Rank& r) {
        return r.exited || fs::exists(error_file(r.rank));
      });
      if (all_settled || std::chrono::steady_clock::now() >= stop_at) {
        for (auto& other : ranks)
          if (!other.exited && !fs::exists(error_file(other.rank))) waiting_at_failure.push_back(other.rank);
        stopping = true;
        failed_at = std::chrono::steady_clock::now();
        stop_others(SIGTERM);
      }
    }
    if (nodes && first_failed < 0 && !failed_elsewhere && (failed_elsewhere = nodes->failure_elsewhere())) {
      stopping = true;
      failed_at = std::chrono::steady_clock::now();
      stop_others(SIGTERM);
    }
    bool all_exited = std::all_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.exited; });
    if (all_exited && !open_pipes) break;
    if (first_failed < 0 && outlived < 0 && !all_exited &&
        std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.exited; }) &&
        std::chrono::steady_clock::now() - last_clean_exit > timeout) {
      for (auto& r : ranks)
        if (!r.exited && outlived < 0) outlived = r.rank;
      first_failed = outlived;
      failed_at = std::chrono::steady_clock::now();
      stopping = true;
      stop_others(SIGTERM);
    }
    if (stopping && !killed && std::chrono::steady_clock::now() - failed_at > std::chrono::seconds(3)) {
      stop_others(SIGKILL);
      killed = true;
    }
    bool failing = first_failed >= 0 || failed_elsewhere;
    if (all_exited && open_pipes && failing && killed) break;  // a grandchild holds a pipe
  }

  if (first_failed < 0 && !failed_elsewhere) return {};
  // What failed, in one line: this node's root cause, or the other node's that stopped it.
  auto summary = [&]() -> std::string {
    if (outlived >= 0) {
      return fmt::format("rank {} of {} was still running {} s after every other rank had finished, so it was "
                         "stopped (SLAPO_DIST_TIMEOUT sets how long a rank may outlive the others)",
                         outlived, world, timeout.count());
    }
    // The root cause: a rank that ended on its own (a signal it did not get from the launcher, or an
    // exit without a recorded error) caused the others' failures, which they notice later as closed
    // links; else the earliest recorded error.
    std::map<int, std::string> recorded;  // rank -> its recorded error
    std::map<int, int64_t> recorded_at;
    for (auto& r : ranks)
      if (auto error = read_recorded(r.rank)) recorded[r.rank] = error->first, recorded_at[r.rank] = error->second;
    int culprit = first_failed;
    int64_t earliest = INT64_MAX;
    std::string message;
    for (auto& r : ranks)
      if (r.failed() && !r.stopped && !recorded.count(r.rank) && r.exit_ns < earliest)
        earliest = r.exit_ns, culprit = r.rank;
    if (earliest != INT64_MAX && !recorded.empty()) {
      std::vector<int> victims;
      for (auto& [rank, _] : recorded) victims.push_back(rank);
      auto first = recorded.begin();
      return fmt::format("rank {} of {} failed: {} (rank{} {} failed after it, having lost a peer; rank {}: {})",
                         culprit, world, describe_exit(rank_at(culprit).status), victims.size() > 1 ? "s" : "",
                         fmt::join(victims, ", "), first->first, first->second);
    }
    // The earliest recorded error that is not a lost peer (a rank that lost a peer only noticed
    // another's end: the timeout that peer recorded, even a moment later, is the cause); else the
    // earliest of all.
    if (earliest == INT64_MAX) {
      auto earliest_of = [&](bool peer_loss) {
        int who = -1;
        int64_t when = INT64_MAX;
        for (auto& [rank, at] : recorded_at)
          if (is_peer_loss_message(recorded[rank]) == peer_loss && at < when) when = at, who = rank;
        return who;
      };
      int who = earliest_of(false);
      if (who < 0) who = earliest_of(true);
      if (who >= 0) culprit = who, message = recorded[who];
    }
    if (message.empty()) message = describe_exit(rank_at(culprit).status);
    // A collective that timed out waited for a rank that never came: that rank is the cause.
    if (is_timeout_message(message) && !waiting_at_failure.empty() &&
        std::find(waiting_at_failure.begin(), waiting_at_failure.end(), culprit) == waiting_at_failure.end()) {
      bool one = waiting_at_failure.size() == 1;
      return fmt::format("rank{} {} of {} never reached the collective that rank {} timed out in ({} still "
                         "running, with no error); rank {}: {}",
                         one ? "" : "s", fmt::join(waiting_at_failure, ", "), world, culprit,
                         one ? "it was" : "they were", culprit, message);
    }
    return fmt::format("rank {} of {} failed: {}", culprit, world, message);
  };
  if (failed_elsewhere) return {false, fmt::format("node {} stopped its ranks: {}", options.node_rank, *failed_elsewhere)};
  std::string message = summary();
  if (nodes) {
    // A node whose ranks only lost their peers names the node that failed first, when it said so.
    auto earlier = nodes->failure_elsewhere(/*at_once=*/true);
    if (earlier) message = fmt::format("node {} stopped its ranks: {}; then {}", options.node_rank, *earlier, message);
    else nodes->report_failure(message);
  }
  return {false, message};
}

}  // namespace

void end_launcher(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

int launch_ranks(const LaunchOptions& options, const std::vector<std::string>& command) {
  std::chrono::seconds timeout;  // read before any rank starts: a malformed value stops nothing half-way
  try {
    timeout = dist::timeout_from_env();
  } catch (const std::exception& e) {
    report_error(fmt::format("run: {}", e.what()));
    return 1;
  }
  char dir_template[] = "/tmp/slapo-run-XXXXXX";
  if (!::mkdtemp(dir_template)) {
    report_error(fmt::format("run: cannot create a temporary directory: {}", std::strerror(errno)));
    return 1;
  }
  std::string dir = dir_template;
  // Several nodes meet at node 0's launcher before any rank starts.
  std::unique_ptr<NodeRendezvous> nodes;
  if (options.multi_node()) {
    try {
      // a silent node is declared lost well before its peers' collectives time out, so it is named
      nodes = std::make_unique<NodeRendezvous>(options, std::max(timeout / 2, std::chrono::seconds(5)));
    } catch (const std::exception& e) {
      report_error(e.what());
      fs::remove_all(dir);
      return 1;
    }
  }
  // --max-restarts: after a failure every rank of every node starts again (torchrun's meaning);
  // a lost node ends the run, since the world is fixed.
  int code = 1;
  for (int attempt = 0;; ++attempt) {
    std::string attempt_dir = fmt::format("{}/attempt-{}", dir, attempt);
    fs::create_directories(attempt_dir);
    if (nodes) nodes->begin_attempt(attempt);
    Outcome outcome = run_attempt(options, command, attempt_dir, attempt, timeout, nodes.get());
    if (outcome.ok) {
      code = 0;
      break;
    }
    bool restart = attempt < options.max_restarts;
    std::string why;
    if (restart && nodes) restart = nodes->agree_to_restart(why);
    if (!restart) {
      report_error(why.empty() ? outcome.message : fmt::format("{} ({})", outcome.message, why));
      break;
    }
    report_error(fmt::format("{}\nrestarting every rank (restart {} of {}, --max-restarts)", outcome.message,
                             attempt + 1, options.max_restarts));
  }
  if (nodes) nodes->finish(code == 0 ? static_cast<int>(timeout.count()) : 5);
  fs::remove_all(dir);
  return code;
}

}  // namespace slapo
