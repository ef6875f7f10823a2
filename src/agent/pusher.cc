#include "vramd/agent/pusher.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>

#include "agent/read_file.h"

namespace vramd::agent {

int64_t NextDelayMs(int64_t interval_ms, PushKind last, int failures) {
  const int64_t ceiling = std::max<int64_t>(interval_ms, 60'000);
  switch (last) {
    case PushKind::kOk:
      return interval_ms;
    case PushKind::kRejected:
      return ceiling;
    case PushKind::kFailed: {
      int64_t d = interval_ms;
      for (int i = 1; i < failures && d < ceiling; ++i) d *= 2;
      return std::min(d, ceiling);
    }
  }
  return interval_ms;
}

namespace {

class HttpPusher final : public Pusher {
 public:
  HttpPusher(const std::string& scheme_host_port, std::string path, std::string token_file,
             const std::string& cacert, int64_t timeout_ms)
      : cli_(scheme_host_port), path_(std::move(path)), token_file_(std::move(token_file)) {
    cli_.set_connection_timeout(std::chrono::milliseconds(std::min<int64_t>(timeout_ms, 3000)));
    cli_.set_read_timeout(std::chrono::milliseconds(timeout_ms));
    cli_.set_write_timeout(std::chrono::milliseconds(timeout_ms));
    cli_.set_keep_alive(true);
    if (!cacert.empty()) cli_.set_ca_cert_path(cacert.c_str());
  }

  PushOutcome Push(const std::string& body) override {
    httplib::Headers headers;
    if (!token_file_.empty()) {
      std::string token;
      if (!ReadSmallFile(token_file_, &token, 16 * 1024)) {
        return {PushKind::kFailed, 0, "cannot read the token file " + token_file_, {}};
      }
      while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
        token.pop_back();
      }
      headers.emplace("Authorization", "Bearer " + token);
    }
    httplib::Result res = cli_.Put(path_, headers, body, "application/json");
    if (!res) return {PushKind::kFailed, 0, "no answer: " + httplib::to_string(res.error()), {}};
    PushOutcome out;
    out.status = res->status;
    if (res->status >= 200 && res->status < 300) {
      out.body = std::move(res->body);
      return out;
    }
    out.kind = res->status >= 400 && res->status < 500 ? PushKind::kRejected : PushKind::kFailed;
    out.message = res->body.substr(0, 512);
    while (!out.message.empty() && out.message.back() == '\n') out.message.pop_back();
    return out;
  }

 private:
  httplib::Client cli_;
  std::string path_;
  std::string token_file_;
};

}  // namespace

Result<std::unique_ptr<Pusher>> MakeHttpPusher(const std::string& server, const std::string& node,
                                               const std::string& token_file, const std::string& cacert,
                                               int64_t timeout_ms) {
  size_t scheme_end = server.find("://");
  if (scheme_end == std::string::npos) return InvalidArgument("--server must be a URL, not '" + server + "'");
  size_t path_start = server.find('/', scheme_end + 3);
  std::string base = server.substr(0, path_start);
  std::string prefix = path_start == std::string::npos ? "" : server.substr(path_start);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (node.empty()) return InvalidArgument("the node name is empty");
  std::string path = prefix + "/v1/nodes/" + httplib::detail::encode_query_param(node) + "/usage";
  return std::unique_ptr<Pusher>(std::make_unique<HttpPusher>(base, std::move(path), token_file, cacert, timeout_ms));
}

}  // namespace vramd::agent
