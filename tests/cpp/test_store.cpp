// The multi-node launcher's store: c10d's Store semantics over a real socket, a Gloo group that
// rendezvous through it, and the refusals a user meets.
#include <torch/torch.h>
#include <doctest/doctest.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <fstream>
#include <thread>

#include "distributed/store_client.h"
#include "distributed/store_server.h"
#include "error_of.h"

using namespace slapo;
using namespace std::chrono_literals;

namespace {

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

// The local addresses (hex, as /proc/net/tcp writes them) of the sockets listening on `port`.
std::vector<std::string> listeners(int port) {
  std::vector<std::string> found;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      auto colon = local.rfind(':');
      if (state == "0A" && std::stoi(local.substr(colon + 1), nullptr, 16) == port) found.push_back(local.substr(0, colon));
    }
  }
  return found;
}

}  // namespace

TEST_CASE("store: set, get, add, compareSet, check, delete and key counts behave as c10d's") {
  dist::StoreServer server("127.0.0.1", 0);
  dist::StoreClient a("127.0.0.1", server.port(), 5s), b("127.0.0.1", server.port(), 5s);
  a.set("k", bytes("v1"));
  CHECK(text(b.get("k")) == "v1");
  CHECK(a.add("n", 3) == 3);
  CHECK(b.add("n", -1) == 2);
  CHECK(text(a.get("n")) == "2");  // added values read as decimal text, as TCPStore keeps them
  CHECK(text(a.compareSet("c", {}, bytes("first"))) == "first");
  CHECK(text(b.compareSet("c", {}, bytes("second"))) == "first");  // taken: the holder's value
  CHECK(text(b.compareSet("c", bytes("first"), bytes("third"))) == "third");
  CHECK(text(a.compareSet("missing", bytes("x"), bytes("y"))) == "x");
  CHECK_FALSE(a.check({"missing"}));
  CHECK(a.check({"k", "n", "c"}));
  CHECK(a.getNumKeys() == 3);
  CHECK(b.deleteKey("k"));
  CHECK_FALSE(b.deleteKey("k"));
  CHECK(a.getNumKeys() == 2);
}

TEST_CASE("store: get and wait hold until another client sets the key, and time out by name") {
  dist::StoreServer server("127.0.0.1", 0);
  dist::StoreClient waiter("127.0.0.1", server.port(), 5s), writer("127.0.0.1", server.port(), 5s);
  std::thread later([&] {
    std::this_thread::sleep_for(200ms);
    writer.set("late", bytes("here"));
  });
  auto start = std::chrono::steady_clock::now();
  CHECK(text(waiter.get("late")) == "here");
  CHECK(std::chrono::steady_clock::now() - start >= 150ms);
  later.join();
  waiter.wait({"late"});
  std::string error = error_of([&] { waiter.wait({"never", "late"}, 300ms); });
  CHECK(error.find("timed out after 0.3 s during wait('never', 'late')") != std::string::npos);
  CHECK(text(waiter.get("late")) == "here");  // the connection is still in step after a timeout
}

TEST_CASE("store: a Gloo group of two ranks rendezvous through it and all-reduces") {
  dist::StoreServer server("127.0.0.1", 0);
  std::vector<at::Tensor> results(2);
  auto rank = [&](int r) {
    auto store = c10::make_intrusive<dist::StoreClient>("127.0.0.1", server.port(), 10s);
    auto opts = c10d::ProcessGroupGloo::Options::create(std::chrono::milliseconds(10000));
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    c10d::ProcessGroupGloo group(store, r, 2, opts);
    std::vector<at::Tensor> t{torch::full({3}, float(r + 1))};
    group.allreduce(t)->wait();
    results[r] = t[0];
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  CHECK(results[0].equal(torch::full({3}, 3.0f)));
  CHECK(results[1].equal(torch::full({3}, 3.0f)));
}

TEST_CASE("store: the server listens on the address it is given, not every interface") {
  dist::StoreServer server("127.0.0.1", 0);
  CHECK(listeners(server.port()) == std::vector<std::string>{"0100007F"});
}

TEST_CASE("store: an address that is not this machine's, no server, and a server gone are named") {
  CHECK(error_of([] { dist::StoreServer("192.0.2.1", 0); })
            .find("cannot listen on 192.0.2.1:0: Cannot assign requested address") != std::string::npos);
  CHECK(error_of([] { dist::StoreServer("no-such-host.invalid", 0); }).find("'no-such-host.invalid' is not an address") !=
        std::string::npos);
  int port = 0;
  {
    dist::StoreServer probe("127.0.0.1", 0);
    port = probe.port();
  }
  std::string error = error_of([&] { dist::StoreClient("127.0.0.1", port, 300ms); });
  CHECK(error.find(fmt::format("cannot reach 127.0.0.1:{}", port)) != std::string::npos);
  CHECK(error.find("is node 0's launcher running there?") != std::string::npos);
  auto server = std::make_unique<dist::StoreServer>("127.0.0.1", 0);
  dist::StoreClient client("127.0.0.1", server->port(), 5s);
  client.set("a", bytes("1"));
  server.reset();
  error = error_of([&] { client.get("a"); });
  CHECK(error.find("lost the launcher's store at 127.0.0.1") != std::string::npos);
  CHECK(error.find("during get('a')") != std::string::npos);
}
