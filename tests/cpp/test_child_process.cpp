// start_child and stop_child_group: real processes through /bin/sh, their environment, output,
// exit statuses and process groups.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "core/child_process.h"
#include "core/error.h"

using namespace slapo;

namespace {

// Runs `spec` with stdout into a pipe; returns what it wrote and its wait status.
std::pair<std::string, int> run_capturing(ChildSpec spec) {
  int out[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  spec.stdout_fd = out[1];
  pid_t pid = start_child(spec, "test");
  ::close(out[1]);
  std::string text;
  char buf[256];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof(buf))) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {text, status};
}

// Whether `pid` is a live process (not gone, not a zombie waiting for its parent to reap it).
bool is_alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

}  // namespace

TEST_CASE("start_child: the child sees this environment with the spec's names set and removed") {
  ::setenv("SLAPO_TEST_KEPT", "kept", 1);
  ::setenv("SLAPO_TEST_GONE", "here", 1);
  ::setenv("SLAPO_TEST_SET", "old", 1);
  ChildSpec spec;
  spec.argv = {"sh", "-c", "echo \"$SLAPO_TEST_KEPT|${SLAPO_TEST_GONE-unset}|$SLAPO_TEST_SET\"; exit 3"};
  spec.env = {{"SLAPO_TEST_SET", "new"}};
  spec.unset = {"SLAPO_TEST_GONE"};
  auto [text, status] = run_capturing(spec);
  CHECK(text == "kept|unset|new\n");
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
  CHECK(std::string(std::getenv("SLAPO_TEST_GONE")) == "here");  // this process's own is untouched
}

TEST_CASE("start_child: a program that cannot run exits with 127; discarded output writes nothing") {
  ChildSpec missing;
  missing.argv = {"slapo-no-such-program-here"};
  auto [text, status] = run_capturing(missing);
  CHECK(text.empty());
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 127);

  ChildSpec quiet;
  quiet.argv = {"sh", "-c", "echo loud"};
  quiet.discard_output = true;
  auto [quiet_text, quiet_status] = run_capturing(quiet);
  CHECK(quiet_text.empty());
  CHECK(WIFEXITED(quiet_status));

  CHECK_THROWS_AS(start_child(ChildSpec{}, "test"), Error);
}

TEST_CASE("stop_child_group: ends a child and the processes it started, and reaps it") {
  ChildSpec spec;
  spec.argv = {"sh", "-c", "sleep 60 & echo $!; wait"};
  spec.own_group = true;
  int out[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  spec.stdout_fd = out[1];
  pid_t pid = start_child(spec, "test");
  ::close(out[1]);
  std::string line;
  char c;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  pid_t grandchild = std::stoi(line);
  CHECK(::getpgid(grandchild) == pid);  // in the child's own group, not this process's

  auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  stop_child_group(pid, &status, 3);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  CHECK(WIFSIGNALED(status));
  // the grandchild was signalled too: gone (or a zombie) within a moment
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = !is_alive(grandchild);
    if (!gone) ::usleep(20000);
  }
  CHECK(gone);
}
