// vramctl's one HTTP client of vramd: every command reaches the server
// through it (timeouts, the bearer token, TLS: the CA, the client certificate,
// verification; how a transport error or an error answer is described, with
// what to do about a failed TLS handshake), so a transport option is added in
// one place.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "target.h"

namespace httplib {
class Client;
class Result;
}

namespace vramctl {

// What a call got back.
struct Answer {
  bool reached = false;  // false: transport error, see `error`
  int status = 0;
  nlohmann::json body;   // the JSON body; {} when the body is not JSON
  bool json = false;     // the body was JSON
  std::string text;      // the body as received
  std::string error;     // the server's "error" field, or the transport error
};

// "HTTP 409: not the owner", a 401 with the --token-file hint, or the
// transport error.
std::string Describe(const Answer& a);

// Not thread-safe, except Stop(), which may be called from any thread to
// abort the call in progress.
class Client {
 public:
  explicit Client(const Target& t, int64_t read_timeout_ms = 10'000);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void SetReadTimeoutMs(int64_t ms);
  Answer Get(const std::string& path_and_query);
  Answer Post(const std::string& path, const nlohmann::json& body);
  Answer PostText(const std::string& path, const std::string& body, const char* content_type);
  void Stop();

 private:
  Answer Done(const httplib::Result& res);

  Target target_;
  std::unique_ptr<httplib::Client> cli_;
};

// Percent-encodes a query parameter's value.
std::string QueryParam(const std::string& s);

}  // namespace vramctl
