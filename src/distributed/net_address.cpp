#include "distributed/net_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "core/error.h"

namespace slapo::dist {

namespace {

using AddrInfo = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;

// The addresses `host` names, for a TCP socket (or UDP, for a route lookup).
AddrInfo resolve(const std::string& host, int port, int socktype) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socktype;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) throw Error(fmt::format("'{}' is not an address this machine can resolve: {}", host, ::gai_strerror(rc)));
  return AddrInfo(found, &::freeaddrinfo);
}

std::string numeric(const sockaddr* addr, socklen_t len) {
  char host[NI_MAXHOST];
  if (::getnameinfo(addr, len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  return host;
}

}  // namespace

int listen_on(const std::string& host, int port) {
  auto found = resolve(host, port, SOCK_STREAM);
  std::string reason = "no address";
  int error = 0;
  for (addrinfo* a = found.get(); a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) return fd;
    error = errno;
    reason = fmt::format("{} ({})", std::strerror(error), numeric(a->ai_addr, a->ai_addrlen));
    ::close(fd);
  }
  // what to do depends on why: a port someone holds, or an address that is not this machine's
  const std::string advice =
      error == EADDRINUSE
          ? fmt::format("port {} is in use on this machine (a launcher already serving it, or another program): "
                        "choose another --master-port, or stop what holds it", port)
          : "the address must be one of this machine's";
  throw Error(fmt::format("cannot listen on {}:{}: {}; {}", host, port, reason, advice));
}

int bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
}

int connect_to(const std::string& host, int port, std::chrono::steady_clock::time_point deadline) {
  auto started = std::chrono::steady_clock::now();
  std::string reason;
  for (;;) {
    auto found = resolve(host, port, SOCK_STREAM);
    for (addrinfo* a = found.get(); a; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return fd;
      }
      reason = std::strerror(errno);
      ::close(fd);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto waited = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started);
  throw Error(fmt::format("cannot reach {}:{} after {} s: {}", host, port, waited.count(), reason));
}

std::string source_address_toward(const std::string& host) {
  auto found = resolve(host, 9, SOCK_DGRAM);  // a UDP "connection" only asks the routing table
  for (addrinfo* a = found.get(); a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    bool ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
              ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
    ::close(fd);
    if (ok) return numeric(reinterpret_cast<sockaddr*>(&local), len);
  }
  throw Error(fmt::format("no route from this machine to '{}'", host));
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace slapo::dist
