// Where vramctl talks to: vramd's base URL, the bearer token (from
// --token-file) and how TLS is checked, shared by the command files.
#pragma once

#include <string>

namespace vramctl {

struct Tls {
  std::string ca_file;    // --cacert: trust this CA; empty: the system's CAs
  std::string cert_file;  // --cert/--key: the client certificate (mTLS); both or neither
  std::string key_file;
  bool skip_verify = false;  // --insecure-skip-tls-verify
  std::string server_name;   // --tls-server-name: the name vramd's certificate must hold
                             // (and the SNI) instead of the host in the URL
};

struct Target {
  std::string scheme_host_port;  // "http://127.0.0.1:8080" or "https://vramd.example:8443"
  std::string token;             // empty: no Authorization header
  Tls tls;                       // used with https:// only
};

}  // namespace vramctl
