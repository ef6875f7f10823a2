#include "vramd/http/server.h"

#include <httplib.h>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <sys/stat.h>

#include "http/guarded_server.h"
#include "vramd/metrics/thread_guard.h"
#include "vramd/mutex.h"
#include "vramd/parse.h"

namespace vramd::http {

Status ParseListen(const std::string& listen, std::string* host, int* port) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return InvalidArgument("listen address \"" + listen + "\" is not host:port");
  std::string h = listen.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  std::string p = listen.substr(colon + 1);
  if (p.empty() || p.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("listen address \"" + listen + "\" has no valid port");
  }
  std::optional<int> v = ParseSmallInt(p, 65535);
  if (!v) return InvalidArgument("listen port out of range in \"" + listen + "\"");
  *host = h.empty() ? "0.0.0.0" : h;
  *port = *v;
  return Status::Ok();
}

bool BearerMatches(const std::string& authorization, const std::string& token) {
  if (token.empty()) return true;
  static const std::string kPrefix = "Bearer ";
  if (authorization.size() != kPrefix.size() + token.size()) return false;
  if (authorization.compare(0, kPrefix.size(), kPrefix) != 0) return false;
  return CRYPTO_memcmp(authorization.data() + kPrefix.size(), token.data(), token.size()) == 0;
}

namespace {
thread_local std::string current_request_id;
}  // namespace

const std::string& CurrentRequestId() { return current_request_id; }

namespace {

// {"error": message}; bytes of the message that are not UTF-8 (an echoed
// path segment or field name) become U+FFFD instead of an exception.
std::string ErrorJson(const std::string& message) {
  return nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

Reply ErrorReply(int status, const std::string& message) {
  Reply r;
  r.status = status;
  r.body = ErrorJson(message);
  return r;
}

namespace {

// A route with its own limits (RouteLimits), matched before its body is read.
struct LimitedRoute {
  std::string method;
  std::string prefix;  // the pattern's literal start: most paths are told apart without the regex
  std::regex regex;
  size_t max_body_bytes = 0;
  int max_concurrent = 0;
  // The route's turns (max_concurrent > 0).
  Mutex mu;
  CondVar cv;
  int busy GUARDED_BY(mu) = 0;
};

// The regex of a route pattern: "{name}" segments become capture groups.
std::string PatternRegex(const std::string& pattern, std::vector<std::string>* names) {
  std::string regex;
  for (size_t i = 0; i < pattern.size();) {
    if (pattern[i] == '{') {
      size_t end = pattern.find('}', i);
      if (names != nullptr) names->push_back(pattern.substr(i + 1, end - i - 1));
      regex += "([^/]+)";
      i = end + 1;
    } else {
      if (std::string(".+*?^$()[]|\\").find(pattern[i]) != std::string::npos) regex += '\\';
      regex += pattern[i++];
    }
  }
  return regex;
}

// The request's Content-Length (0 when absent or not a number: httplib refuses the latter itself).
uint64_t ContentLength(const httplib::Request& req) {
  std::string v = req.get_header_value("Content-Length");
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  return ec == std::errc() && end == v.data() + v.size() ? n : 0;
}

// How long a request waits for a turn of a route with max_concurrent.
constexpr auto kTurnWait = std::chrono::seconds(2);

}  // namespace

struct Server::Impl {
  ServerOptions opts;
  metrics::Registry* registry;
  metrics::Gauge* cert_expiry = nullptr;  // vramd_tls_certificate_expiry_timestamp_seconds{listener}
  metrics::Family<metrics::Counter>* requests;
  metrics::Family<metrics::Histogram>* latency;
  std::shared_ptr<TlsContext> tls;  // null: plain HTTP
  std::unique_ptr<GuardedServer> server;
  std::thread thread;
  std::atomic<bool> stopping{false};  // set by Stop(): the listener is not restarted
  std::atomic<uint64_t> next_id{1};
  std::vector<std::unique_ptr<LimitedRoute>> limited;  // set before Start, read-only after
  std::jthread tls_watch;  // reloads the certificate when its files change
  CondVar tls_cv;

  // The limited route `req` is for, or null.
  LimitedRoute* LimitedFor(const httplib::Request& req) const {
    for (const auto& l : limited) {
      if (l->method == req.method && req.path.compare(0, l->prefix.size(), l->prefix) == 0 &&
          std::regex_match(req.path, l->regex)) {
        return l.get();
      }
    }
    return nullptr;
  }
  // The body limit for `req`.
  size_t BodyLimit(const httplib::Request& req) const {
    const LimitedRoute* l = LimitedFor(req);
    return l != nullptr && l->max_body_bytes > 0 ? std::min(l->max_body_bytes, opts.max_body_bytes)
                                                 : opts.max_body_bytes;
  }
};

namespace {

int64_t MtimeNs(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

Server::Server(ServerOptions opts, metrics::Registry* registry) : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(opts);
  impl_->registry = registry;
  impl_->requests = &registry->AddCounter("vramd_http_requests_total", "HTTP requests by verb and status code.",
                                          {"verb", "code"});
  impl_->latency = &registry->AddHistogram("vramd_http_request_duration_seconds",
                                           "Time to answer an HTTP request, by verb.", metrics::LatencyBuckets(),
                                           {"verb"});
  const ServerOptions& o = impl_->opts;
  if (!o.tls_cert_file.empty()) {
    impl_->tls =
        std::make_shared<TlsContext>(o.tls_cert_file, o.tls_key_file, o.tls_client_ca_file, o.tls_client_names);
  }
  // Issue 33: a certificate nobody renews is seen (and alerted on) weeks
  // before it expires. The family is there without TLS too (no series).
  auto& expiry = registry->AddGauge("vramd_tls_certificate_expiry_timestamp_seconds",
                                    "When the TLS certificate a listener serves expires (its notAfter), by "
                                    "listener; re-read with the certificate.",
                                    {"listener"});
  if (impl_->tls) {
    impl_->cert_expiry = &expiry.With({o.name});
    impl_->cert_expiry->Set(static_cast<double>(impl_->tls->NotAfterSeconds()));
  }
  // A connection waits for its next request as long as one read may wait
  // (rounded up to seconds, the unit of the Keep-Alive header), not longer,
  // so that a client that connects and sends nothing is cut off like one
  // that stalls mid-request. (Go clients such as kube-scheduler retry a
  // request on an idle connection the server closed.)
  const int idle_s = std::max(1, (o.read_timeout_ms + 999) / 1000);
  GuardOptions g;
  g.listener = o.name;
  g.max_connections = std::max(1, o.max_connections);
  g.admission_wait_ms = std::max(0, o.admission_wait_ms);
  g.keep_idle_threads = std::max(0, o.threads);
  g.read_timeout_ms = o.read_timeout_ms;
  g.write_timeout_ms = o.read_timeout_ms;
  g.idle_timeout_ms = idle_s * 1000;
  g.request_timeout_ms = o.request_timeout_ms;
  g.handshake_timeout_ms = o.tls_handshake_timeout_ms;
  g.max_requests = o.max_requests_per_connection;
  g.max_age_ms = o.max_connection_age_ms;
  impl_->server = std::make_unique<GuardedServer>(g, impl_->tls, registry);
  GuardedServer& s = *impl_->server;
  s.set_tcp_nodelay(true);  // no 40 ms delayed-ACK stalls on keep-alive connections
  // What the Keep-Alive answer header announces (GuardedServer applies them).
  s.set_keep_alive_max_count(o.max_requests_per_connection > 0 ? static_cast<size_t>(o.max_requests_per_connection)
                                                                 : 100000);
  s.set_keep_alive_timeout(idle_s);
  s.set_payload_max_length(o.max_body_bytes);
  s.set_read_timeout(std::chrono::milliseconds(o.read_timeout_ms));
  s.set_write_timeout(std::chrono::milliseconds(o.read_timeout_ms));
  Impl* im = impl_.get();
  s.set_exception_handler([im](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("unhandled exception serving {} {}: {}", req.method, req.path, what);
    res.status = 500;
    res.set_content(ErrorJson("internal error: " + what), kJsonContentType);
  });
  // Before the body is read: what the request may not send is refused here,
  // and its body dropped unread (RequestScope::CloseAfter).
  s.set_pre_routing_handler([im](const httplib::Request& req, httplib::Response& res) {
    RequestScope* scope = CurrentRequest();
    auto refuse = [&](int status, const std::string& message, uint64_t unread) {
      res.status = status;
      res.set_content(ErrorJson(message), kJsonContentType);
      // The answer says Connection: close (httplib reads it from the request).
      const_cast<httplib::Request&>(req).set_header("Connection", "close");
      if (scope != nullptr) scope->CloseAfter(unread);
      im->requests->With({"other", std::to_string(status)}).Inc();
      return httplib::Server::HandlerResponse::Handled;
    };
    // httplib 0.11 applies the body limit only to bodies sent with a
    // Content-Length: a chunked body would be read into memory whatever its
    // size. No client needs one (kube-scheduler, vramctl and curl send a length),
    // so any Transfer-Encoding is refused before the body is read.
    if (req.has_header("Transfer-Encoding")) {
      return refuse(411, "send the request body with a Content-Length (Transfer-Encoding is not accepted)",
                    im->opts.max_body_bytes);
    }
    LimitedRoute* l = im->LimitedFor(req);
    if (l == nullptr) return httplib::Server::HandlerResponse::Unhandled;
    const uint64_t length = ContentLength(req);
    const size_t limit = im->BodyLimit(req);
    if (length > limit) {
      return refuse(413, "request body larger than the limit of " + std::to_string(limit) + " bytes for " +
                             req.method + " " + req.path,
                    length);
    }
    if (l->max_concurrent > 0) {
      MutexLock lock(&l->mu);
      if (!l->cv.WaitFor(&lock, kTurnWait, [l]() NO_THREAD_SAFETY_ANALYSIS { return l->busy < l->max_concurrent; })) {
        return refuse(503, std::to_string(l->max_concurrent) + " " + req.method + " " + req.path +
                               " requests are being answered already; retry",
                      length);
      }
      ++l->busy;
      auto release = [l] {
        MutexLock lock(&l->mu);
        --l->busy;
        l->cv.NotifyOne();
      };
      if (scope != nullptr) {
        scope->AtEnd(release);
      } else {
        release();  // not served by a GuardedServer (cannot happen): no turn held
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // A client that asks before sending its body (Expect: 100-continue) is
  // told now when the body is too large.
  s.set_expect_100_continue_handler([im](const httplib::Request& req, httplib::Response& res) {
    if (ContentLength(req) > im->BodyLimit(req)) {
      res.status = 413;
      res.set_content(ErrorJson("request body larger than the limit of " + std::to_string(im->BodyLimit(req)) +
                                " bytes"),
                      kJsonContentType);
      im->requests->With({"other", "413"}).Inc();
      return 413;
    }
    return 100;
  });
  // Errors httplib produces itself (404 route, 413 payload, 400 parse) get a JSON body.
  s.set_error_handler([im](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    // A request httplib could not parse leaves the connection out of step
    // (the rest of it would be read as another request): closed after the answer.
    if (res.status == 400 || res.status == 414) {
      const_cast<httplib::Request&>(req).set_header("Connection", "close");  // said in the answer
      if (RequestScope* scope = CurrentRequest()) scope->CloseAfter(0);
    }
    std::string msg;
    switch (res.status) {
      case 404: msg = "no such endpoint: " + req.method + " " + req.path; break;
      case 413: msg = "request body larger than the limit of " + std::to_string(im->opts.max_body_bytes) + " bytes"; break;
      case 414: msg = "request URI longer than the limit of 8192 bytes"; break;
      case 400: msg = "malformed HTTP request"; break;
      case 405: msg = "method not allowed"; break;
      default: msg = "HTTP error " + std::to_string(res.status); break;
    }
    res.set_content(ErrorJson(msg), kJsonContentType);
    im->requests->With({"other", std::to_string(res.status)}).Inc();
  });
}

Server::~Server() { Stop(); }

void Server::Route(const std::string& method, const std::string& pattern, const std::string& verb, Handler h,
                   RouteLimits limits) {
  std::vector<std::string> names;
  std::string regex = PatternRegex(pattern, &names);
  if (limits.max_body_bytes > 0 || limits.max_concurrent > 0) {
    auto l = std::make_unique<LimitedRoute>();
    l->method = method;
    l->prefix = pattern.substr(0, pattern.find('{'));
    l->regex = std::regex(regex);
    l->max_body_bytes = limits.max_body_bytes;
    l->max_concurrent = limits.max_concurrent;
    impl_->limited.push_back(std::move(l));
  }
  Impl* im = impl_.get();
  auto* requests = im->requests;
  auto* hist = &im->latency->With({verb});
  // The usual codes' counters, looked up once (a lookup builds a label
  // vector and takes the family's lock: per request, that showed in profiles).
  std::array<std::pair<int, metrics::Counter*>, 4> usual{};
  for (size_t i = 0; int code : {200, 400, 500, 503}) usual[i++] = {code, &requests->With({verb, std::to_string(code)})};
  auto wrapped = [im, names, verb, h, requests, hist, usual](const httplib::Request& req, httplib::Response& res) {
    if (RequestScope* scope = CurrentRequest()) scope->MarkBusy();  // read: never closed to make room now
    auto start = std::chrono::steady_clock::now();
    Request r;
    r.method = req.method;
    r.path = req.path;
    r.body = req.body;
    for (size_t i = 0; i < names.size() && i + 1 < req.matches.size(); ++i) r.params[names[i]] = req.matches[i + 1];
    for (const auto& [k, v] : req.params) r.query.emplace(k, v);
    r.authorization = req.get_header_value("Authorization");
    r.request_id = req.get_header_value("X-Request-Id");
    if (r.request_id.size() > 128) r.request_id.resize(128);
    if (r.request_id.empty()) r.request_id = std::to_string(im->next_id.fetch_add(1));
    Reply out;
    current_request_id = r.request_id;
    struct ClearId {
      ~ClearId() { current_request_id.clear(); }
    } clear_id;
    try {
      out = h(r);
    } catch (const std::exception& e) {
      spdlog::error("request {} {} {} failed: {}", r.request_id, r.method, r.path, e.what());
      out = ErrorReply(500, std::string("internal error: ") + e.what());
    }
    res.status = out.status;
    res.set_header("X-Request-Id", r.request_id);
    // httplib 0.11's set_content copies; the answer (160 KB for a filter
    // over 5,000 names) is moved in instead, with the header it would set.
    res.body = std::move(out.body);
    res.set_header("Content-Type", out.content_type);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    hist->Observe(secs);
    metrics::Counter* counter = nullptr;
    for (const auto& [code, c] : usual) {
      if (code == out.status) counter = c;
    }
    (counter != nullptr ? *counter : requests->With({verb, std::to_string(out.status)})).Inc();
    spdlog::debug("request {} {} {} -> {} in {:.3f} ms", r.request_id, r.method, r.path, out.status, secs * 1e3);
  };
  GuardedServer& s = *impl_->server;
  if (method == "GET") s.Get(regex, wrapped);
  else if (method == "POST") s.Post(regex, wrapped);
  else if (method == "PUT") s.Put(regex, wrapped);
  else if (method == "DELETE") s.Delete(regex, wrapped);
}

Status Server::Start() {
  GuardedServer& s = *impl_->server;
  if (!s.is_valid()) {
    std::string why = impl_->tls != nullptr ? impl_->tls->load_status().message() : "";
    return InvalidArgument("cannot set up the HTTPS server: " +
                           (why.empty() ? std::string("check tls cert, key and client CA files") : why));
  }
  // cpp-httplib's default sets SO_REUSEPORT, so a second process (another
  // vramd, a stale replica) could bind the same port and take half the
  // connections without a word. SO_REUSEADDR alone still allows a restart
  // while old connections sit in TIME_WAIT; a port in use is an error.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  if (impl_->opts.port == 0) {
    port_ = s.bind_to_any_port(impl_->opts.host);
    if (port_ < 0) return Unavailable("cannot bind " + impl_->opts.host + ":0");
  } else {
    if (!s.bind_to_port(impl_->opts.host, impl_->opts.port)) {
      return Unavailable("cannot listen on " + impl_->opts.host + ":" + std::to_string(impl_->opts.port) +
                         " (in use or not permitted)");
    }
    port_ = impl_->opts.port;
  }
  s.WidenBacklog();
  impl_->thread = std::thread([this] {
    // listen_after_bind returns when Stop() closes the listener; should it
    // throw instead, the guard counts it and it listens again on the bound socket.
    while (!metrics::GuardedStep(metrics::kThreadHttpListen, [this] { impl_->server->listen_after_bind(); }) &&
           !impl_->stopping.load()) {
      metrics::PauseAfterError(impl_->stopping, std::chrono::milliseconds(100));
    }
  });
  if (!impl_->opts.tls_cert_file.empty() && impl_->opts.tls_reload_check_ms > 0) {
    impl_->tls_watch = std::jthread([this](std::stop_token st) {
      int64_t cert = MtimeNs(impl_->opts.tls_cert_file), key = MtimeNs(impl_->opts.tls_key_file);
      Mutex m;
      while (!st.stop_requested()) {
        {
          MutexLock lock(&m);
          impl_->tls_cv.WaitFor(&lock, st, std::chrono::milliseconds(impl_->opts.tls_reload_check_ms));
        }
        metrics::GuardedStep(metrics::kThreadTlsWatch, [&] {
          metrics::WorkingOn working_on("TLS files " + impl_->opts.tls_cert_file + ", " + impl_->opts.tls_key_file);
          int64_t c = MtimeNs(impl_->opts.tls_cert_file), k = MtimeNs(impl_->opts.tls_key_file);
          if (c == cert && k == key) return;
          Status s = ReloadTls();
          if (s.ok()) {
            cert = c;
            key = k;
            spdlog::info("TLS certificate files changed: reloaded");
          } else {
            spdlog::warn("{} (keeping the previous certificate; will retry)", s.message());
          }
        });
      }
    });
  }
  return Status::Ok();
}

void Server::Stop() {
  if (impl_ && impl_->tls_watch.joinable()) {
    impl_->tls_watch.request_stop();
    impl_->tls_cv.NotifyAll();
    impl_->tls_watch.join();
  }
  if (impl_) impl_->stopping.store(true);
  if (impl_ && impl_->thread.joinable()) {
    // httplib ignores stop() until its listener loop runs: wait for it (it
    // starts right after Start(); bounded in case the thread already ended).
    for (int i = 0; i < 200 && !impl_->server->is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // Closes the listener and the connections waiting for a request; those
    // under way finish their request.
    impl_->server->Shutdown();
    impl_->thread.join();
  }
}

Status Server::ReloadTls() {
  if (impl_->tls == nullptr) return Status::Ok();
  Status s = impl_->tls->Reload();
  if (s.ok()) impl_->cert_expiry->Set(static_cast<double>(impl_->tls->NotAfterSeconds()));
  return s;
}

}  // namespace vramd::http
