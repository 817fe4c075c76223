// Sockets bound where we choose: the multi-node store listens on the master address only, and
// Gloo binds the address this host reaches the master from, never every interface.
#pragma once

#include <chrono>
#include <string>

namespace slapo::dist {

/// A listening TCP socket on `host` (an address or a name of this machine) and `port` (0: any
/// free one). Throws Error naming the address and the reason.
int listen_on(const std::string& host, int port);
/// The port a bound socket has.
int bound_port(int fd);
/// A TCP connection to host:port, retried until `deadline` (the server may not be up yet).
/// Throws Error naming the address, how long it tried and the last reason.
int connect_to(const std::string& host, int port, std::chrono::steady_clock::time_point deadline);
/// This machine's address on the route toward `host` (what a connection to it would come from):
/// the address Gloo binds in a multi-node run. Throws Error when `host` is unknown or unreachable.
std::string source_address_toward(const std::string& host);
/// 127.0.0.0/8, ::1 or "localhost".
bool is_loopback(const std::string& host);

}  // namespace slapo::dist
