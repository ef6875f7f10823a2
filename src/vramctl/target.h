// Where vramctl talks to: vramd's base URL and the bearer token (from
// --token-file), shared by the command files.
#pragma once

#include <string>

namespace vramctl {

struct Target {
  std::string scheme_host_port;  // "http://127.0.0.1:8080"
  std::string token;             // empty: no Authorization header
};

}  // namespace vramctl
