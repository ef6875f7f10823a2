// A connected socket's own or peer address as numeric text (the HTTP
// server's and the API client's streams answer httplib with it).
#pragma once

#include <string>

namespace vramd {

// Sets `ip` and `port` to the peer's (`peer`) or the socket's own address;
// leaves both unchanged when the socket has none.
void SocketAddress(int fd, bool peer, std::string& ip, int& port);

}  // namespace vramd
