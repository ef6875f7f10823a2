#include "http/guarded_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "vramd/metrics/thread_guard.h"
#include "vramd/socket_address.h"

namespace vramd::http {

using conn::PollTimeoutMs;
using conn::SteadyClock;
using conn::State;
using conn::TimePoint;

namespace {

thread_local RequestScope* current_request = nullptr;
// Set on the accept thread while a refused connection is handed back (WorkerPool's refuse).
thread_local bool refusing = false;

// The reasons of vramd_http_connections_closed_total.
constexpr const char* kRefused = "refused";
constexpr const char* kEvicted = "evicted";
constexpr const char* kReadTimeout = "read_timeout";
constexpr const char* kRequestTimeout = "request_timeout";
constexpr const char* kHandshakeTimeout = "tls_handshake_timeout";
constexpr const char* kHandshakeFailed = "tls_handshake_failed";
constexpr const char* kReasons[] = {kRefused,        kEvicted,          kReadTimeout,
                                    kRequestTimeout, kHandshakeTimeout, kHandshakeFailed};

// poll() on one fd for `events`, retried on EINTR. >0 ready, 0 timed out, <0 error.
int PollFd(int fd, short events, int timeout_ms) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

// One connection's byte stream (plain or TLS) for httplib's request parser,
// on a non-blocking socket: every wait is a poll() bounded by the per-read
// or per-write timeout and by the request's deadline.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(int fd, SSL* ssl, const GuardOptions& o) : fd_(fd), ssl_(ssl), o_(o) {}

  // Waits until `until` for the first byte of a next request. True when
  // there is something to read (or the peer closed: read() then says so).
  bool WaitForRequest(TimePoint until) {
    if (Buffered()) return true;
    for (;;) {
      int t = PollTimeoutMs(SteadyClock::now(), until, 0);
      if (t <= 0) return false;
      int r = PollFd(fd_, POLLIN, t);
      if (r != 0) return r > 0;
    }
  }

  // A request begins: its reads end at `deadline`, its writes at the
  // deadline the first write sets.
  void BeginRequest(TimePoint deadline, std::function<void()> on_first_write) {
    read_deadline_ = deadline;
    write_deadline_ = conn::kNoDeadline;
    writing_ = false;
    on_first_write_ = std::move(on_first_write);
    timeout_ = nullptr;
    eof_ = false;
  }

  // Why the last request's read or write gave up waiting: kReadTimeout,
  // kRequestTimeout, or null when none did.
  const char* timeout() const { return timeout_; }

  // The connection ends with input unread (a refused body, the rest of a
  // malformed request): says so (close_notify, FIN), then reads and drops up
  // to `max_bytes` until the client closes too or `until`, so that the
  // client reads the answer instead of a reset.
  void Linger(uint64_t max_bytes, TimePoint until) {
    if (ssl_ != nullptr) {
      ERR_clear_error();
      (void)SSL_shutdown(ssl_);
    }
    ::shutdown(fd_, SHUT_WR);
    std::array<char, 16384> sink{};
    while (max_bytes > 0) {
      int t = PollTimeoutMs(SteadyClock::now(), until, 0);
      if (t <= 0 || PollFd(fd_, POLLIN, t) <= 0) return;
      ssize_t n = ::recv(fd_, sink.data(), sink.size(), 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n <= 0) return;
      max_bytes -= std::min<uint64_t>(max_bytes, static_cast<uint64_t>(n));
    }
  }

  // Before waiting for the client, what write() held goes out: it may be
  // waiting for it (the interim "100 Continue" before its body).
  bool is_readable() const override {
    if (!held_.empty() && !const_cast<ConnStream*>(this)->Flush()) return false;
    if (Buffered()) return true;
    return PollFd(fd_, POLLIN, PollTimeoutMs(SteadyClock::now(), read_deadline_, o_.read_timeout_ms)) > 0;
  }

  bool is_writable() const override {
    return PollFd(fd_, POLLOUT, PollTimeoutMs(SteadyClock::now(), write_deadline_, o_.write_timeout_ms)) > 0;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (!held_.empty() && !Flush()) return -1;
    if (pos_ == len_) {
      const bool direct = size >= buf_.size();  // a large read goes straight to the caller's buffer
      ssize_t n = Receive(direct ? ptr : buf_.data(), direct ? size : buf_.size());
      if (n == 0) eof_ = true;
      if (n <= 0 || direct) return n;
      pos_ = 0;
      len_ = static_cast<size_t>(n);
    }
    size_t n = std::min(size, len_ - pos_);
    std::memcpy(ptr, buf_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  // httplib writes an answer's status line and headers, then its body, in
  // two writes: two sends (two TLS records) and two wake-ups of the client
  // per answer. The headers are held here and go out with the body, in one
  // send when the body is small (kCoalesceMax), or alone before a large one
  // or at the end of the request (Flush) when there is none.
  ssize_t write(const char* ptr, size_t size) override {
    if (size == 0) return 0;
    // A client that closed its side before its request was complete gets
    // no answer (as before: the request is incomplete, the client gone).
    if (eof_) return -1;
    if (!writing_) {
      writing_ = true;
      write_deadline_ = conn::DeadlineAfter(SteadyClock::now(), o_.request_timeout_ms);
      if (on_first_write_) on_first_write_();
      if (size <= kCoalesceMax) {
        held_.assign(ptr, size);
        return static_cast<ssize_t>(size);
      }
    }
    if (!held_.empty()) {
      if (size <= kCoalesceMax) {
        held_.append(ptr, size);
        return Flush() ? static_cast<ssize_t>(size) : -1;
      }
      if (!Flush()) return -1;
    }
    return Send(ptr, size);
  }

  // Sends what write() held back; false when the connection failed.
  bool Flush() {
    size_t off = 0;
    while (off < held_.size()) {
      ssize_t n = Send(held_.data() + off, held_.size() - off);
      if (n < 0) {
        held_.clear();
        return false;
      }
      off += static_cast<size_t>(n);
    }
    held_.clear();
    return true;
  }

  // httplib asks for both addresses on every request: looked up once per
  // connection (two system calls and two getnameinfo per request before).
  void get_remote_ip_and_port(std::string& ip, int& port) const override { Cached(true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { Cached(false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  static constexpr size_t kCoalesceMax = 64 * 1024;

  bool Buffered() const { return pos_ < len_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0); }

  struct Endpoint {
    bool known = false;
    std::string ip;
    int port = 0;
  };
  void Cached(bool peer, std::string& ip, int& port) const {
    Endpoint& e = peer ? peer_ : local_;
    if (!e.known) {
      SocketAddress(fd_, peer, e.ip, e.port);
      e.known = true;
    }
    ip = e.ip;
    port = e.port;
  }

  // One send/SSL_write of up to `size` bytes, waiting as needed: the bytes
  // written, or -1 on an error or timeout.
  ssize_t Send(const char* ptr, size_t size) {
    for (;;) {
      short want = POLLOUT;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        int n = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
        if (n > 0) return n;
        int e = SSL_get_error(ssl_, n);
        if (e == SSL_ERROR_WANT_READ) want = POLLIN;
        else if (e != SSL_ERROR_WANT_WRITE) return -1;
      } else {
        ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      }
      if (!Wait(want, write_deadline_, o_.write_timeout_ms)) return -1;
    }
  }

  // One recv/SSL_read, waiting as needed: >0 bytes, 0 end of stream, -1 error or timeout.
  ssize_t Receive(char* ptr, size_t size) {
    for (;;) {
      short want = POLLIN;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        int n = SSL_read(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
        if (n > 0) return n;
        int e = SSL_get_error(ssl_, n);
        if (e == SSL_ERROR_ZERO_RETURN) return 0;
        if (e == SSL_ERROR_WANT_WRITE) want = POLLOUT;
        else if (e != SSL_ERROR_WANT_READ) return e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 ? 0 : -1;
      } else {
        ssize_t n = ::recv(fd_, ptr, size, 0);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      }
      if (!Wait(want, read_deadline_, o_.read_timeout_ms)) return -1;
    }
  }

  // Waits for `events`; false (with timeout_ set) when the per-operation
  // timeout or the deadline passes first, or on a poll error.
  bool Wait(short events, TimePoint deadline, int per_op_ms) {
    TimePoint now = SteadyClock::now();
    int t = PollTimeoutMs(now, deadline, per_op_ms);
    if (t > 0) {
      int r = PollFd(fd_, events, t);
      if (r > 0) return true;
      if (r < 0) return false;
      now = SteadyClock::now();
    }
    timeout_ = deadline != conn::kNoDeadline && now >= deadline ? kRequestTimeout : kReadTimeout;
    return false;
  }

  const int fd_;
  SSL* const ssl_;
  const GuardOptions& o_;
  std::array<char, 4096> buf_{};
  size_t pos_ = 0, len_ = 0;
  TimePoint read_deadline_ = conn::kNoDeadline;
  TimePoint write_deadline_ = conn::kNoDeadline;
  bool writing_ = false;
  std::string held_;  // an answer's head, sent with its body (write)
  mutable Endpoint peer_, local_;  // the connection's addresses, once asked for
  std::function<void()> on_first_write_;
  const char* timeout_ = nullptr;
  bool eof_ = false;  // the client ended its side during this request
};

enum class Handshake { kOk, kTimeout, kFailed };

// SSL_accept on the non-blocking socket, within `deadline`.
Handshake Accept(SSL* ssl, int fd, TimePoint deadline) {
  for (;;) {
    ERR_clear_error();
    int r = SSL_accept(ssl);
    if (r == 1) return Handshake::kOk;
    int e = SSL_get_error(ssl, r);
    short want = 0;
    if (e == SSL_ERROR_WANT_READ) want = POLLIN;
    else if (e == SSL_ERROR_WANT_WRITE) want = POLLOUT;
    else {
      unsigned long err = ERR_peek_error();
      if (err != 0) {
        std::array<char, 256> text{};
        ERR_error_string_n(err, text.data(), text.size());
        spdlog::debug("TLS handshake failed: {}", text.data());
      }
      return Handshake::kFailed;
    }
    int t = PollTimeoutMs(SteadyClock::now(), deadline, 0);
    if (t <= 0) return Handshake::kTimeout;
    int p = PollFd(fd, want, t);
    if (p < 0) return Handshake::kFailed;
    // p == 0: the deadline; the next round says so.
  }
}

// How long a connection closed with input unread waits for the client to read its answer and close.
constexpr int kLingerMs = 2000;

struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};

}  // namespace

RequestScope* CurrentRequest() { return current_request; }

void RequestScope::MarkBusy() {
  if (table_ != nullptr) table_->Set(id_, State::kBusy, SteadyClock::now());
}

void RequestScope::CloseAfter(uint64_t unread_body_bytes) {
  close_after_ = true;
  discard_ = std::max(discard_, unread_body_bytes);
}

void RequestScope::AtEnd(std::function<void()> f) { at_end_.push_back(std::move(f)); }

namespace {

// The index of the allowed client names (a const std::vector<std::string>*)
// in an SSL_CTX's ex_data.
int ClientNamesIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// Whether `cert` names one of `names`: its CN, or a DNS subjectAltName (X509_check_host).
bool NamesOneOf(X509* cert, const std::vector<std::string>& names, std::string* cn) {
  std::array<char, 256> text{};
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, text.data(), text.size());
  if (n > 0) cn->assign(text.data(), static_cast<size_t>(n));
  for (const std::string& name : names) {
    if (*cn == name) return true;
    if (X509_check_host(cert, name.data(), name.size(), X509_CHECK_FLAG_NO_WILDCARDS, nullptr) == 1) return true;
  }
  return false;
}

// The client certificate's chain is verified (preverify_ok); the leaf must
// also name an allowed client.
int VerifyClientName(int preverify_ok, X509_STORE_CTX* store) {
  if (preverify_ok != 1 || X509_STORE_CTX_get_error_depth(store) != 0) return preverify_ok;
  auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  if (ssl == nullptr) return 0;
  const auto* names = static_cast<const std::vector<std::string>*>(
      SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ClientNamesIndex()));
  if (names == nullptr || names->empty()) return 1;
  X509* cert = X509_STORE_CTX_get_current_cert(store);
  std::string cn;
  if (cert != nullptr && NamesOneOf(cert, *names, &cn)) return 1;
  spdlog::warn("TLS: refused a client certificate signed by the client CA: CN \"{}\" is not among tls.client_names",
               cn.substr(0, 128));
  X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
  return 0;
}

}  // namespace

TlsContext::TlsContext(std::string cert_file, std::string key_file, std::string client_ca_file,
                       std::vector<std::string> client_names)
    : cert_(std::move(cert_file)),
      key_(std::move(key_file)),
      ca_(std::move(client_ca_file)),
      client_names_(std::move(client_names)) {
  Result<SSL_CTX*> ctx = Build();
  if (ctx.ok()) {
    MutexLock lock(&mu_);
    ctx_ = *ctx;
  } else {
    load_status_ = ctx.status();
  }
}

TlsContext::~TlsContext() {
  MutexLock lock(&mu_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

bool TlsContext::ok() const {
  MutexLock lock(&mu_);
  return ctx_ != nullptr;
}

Result<SSL_CTX*> TlsContext::Build() const {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Internal("cannot create a TLS context");
  auto fail = [ctx](const std::string& what) {
    std::array<char, 256> text{};
    unsigned long err = ERR_get_error();
    if (err != 0) ERR_error_string_n(err, text.data(), text.size());
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return InvalidArgument(what + (err != 0 ? std::string(" (") + text.data() + ")" : std::string()));
  };
  // The policy, explicit (issue 33): TLS 1.2 at least; in TLS 1.2 only
  // forward-secret AEAD suites (TLS 1.3's are all AEAD and forward secret:
  // OpenSSL's defaults); the server's order wins.
  static constexpr const char* kTls12Ciphers =
      "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
      "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) return fail("cannot set the TLS 1.2 cipher list");
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  static const unsigned char kSessionContext[] = "vramd";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_.c_str()) != 1) {
    return fail("cannot load the TLS certificate " + cert_);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key_.c_str(), SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    return fail("cannot load the TLS key " + key_ + " (or it does not match the certificate)");
  }
  if (!ca_.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, ca_.c_str(), nullptr) != 1) {
      return fail("cannot load the client CA file " + ca_);
    }
    if (client_names_.empty()) {
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    } else {
      // The names outlive every context built from them (a member of this object).
      SSL_CTX_set_ex_data(ctx, ClientNamesIndex(), const_cast<std::vector<std::string>*>(&client_names_));
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, VerifyClientName);
    }
  }
  return ctx;
}

Status TlsContext::Reload() {
  Result<SSL_CTX*> ctx = Build();
  if (!ctx.ok()) return InvalidArgument("reloading the TLS certificate failed: " + ctx.status().message());
  SSL_CTX* old = nullptr;
  {
    MutexLock lock(&mu_);
    old = ctx_;
    ctx_ = *ctx;
  }
  if (old != nullptr) SSL_CTX_free(old);  // connections under way hold their own reference
  return Status::Ok();
}

int64_t TlsContext::NotAfterSeconds() const {
  MutexLock lock(&mu_);
  if (ctx_ == nullptr) return 0;
  X509* cert = SSL_CTX_get0_certificate(ctx_);
  if (cert == nullptr) return 0;
  struct tm t {};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &t) != 1) return 0;
  return static_cast<int64_t>(timegm(&t));
}

SSL* TlsContext::NewSsl(int fd) {
  SSL* ssl = nullptr;
  {
    MutexLock lock(&mu_);
    if (ctx_ == nullptr) return nullptr;
    ssl = SSL_new(ctx_);  // takes a reference to the context
  }
  if (ssl != nullptr && SSL_set_fd(ssl, fd) != 1) {
    SSL_free(ssl);
    return nullptr;
  }
  return ssl;
}

GuardedServer::GuardedServer(GuardOptions opts, std::shared_ptr<TlsContext> tls, metrics::Registry* registry)
    : opts_(std::move(opts)), tls_(std::move(tls)), table_(std::max(1, opts_.max_connections)) {
  open_gauge_ = &registry->AddGauge("vramd_http_connections", "Open HTTP connections, by listener.", {"listener"})
                     .With({opts_.listener});
  closed_ = &registry->AddCounter("vramd_http_connections_closed_total",
                                  "HTTP connections vramd closed on a client: refused or evicted at "
                                  "max_connections, timed out, or a failed TLS handshake, by listener and reason.",
                                  {"listener", "reason"});
  for (const char* r : kReasons) closed_->With({opts_.listener, r});
  waited_ = &registry
                 ->AddCounter("vramd_http_connections_waited_total",
                              "New HTTP connections that found every one of max_connections being answered and "
                              "waited (up to http_admission_wait_ms) for one to end, by listener; those still "
                              "without room are counted as refused too.",
                              {"listener"})
                 .With({opts_.listener});
  new_task_queue = [this] {
    return new conn::WorkerPool(
        &table_, opts_.keep_idle_threads,
        [](std::function<void()> fn) {
          refusing = true;
          fn();
          refusing = false;
        },
        [this](conn::ConnectionTable::Admission a, bool waited) {
          if (waited) waited_->Inc();
          if (a == conn::ConnectionTable::Admission::kRefused) {
            Closed(kRefused);
            return;
          }
          if (a == conn::ConnectionTable::Admission::kAdmittedAfterEviction) Closed(kEvicted);
        },
        std::chrono::seconds(30), std::chrono::milliseconds(opts_.admission_wait_ms));
  };
}

GuardedServer::~GuardedServer() = default;

bool GuardedServer::is_valid() const { return tls_ == nullptr || tls_->ok(); }

void GuardedServer::WidenBacklog() {
  socket_t s = svr_sock_;
  if (s != INVALID_SOCKET) ::listen(s, opts_.backlog);
}

void GuardedServer::Shutdown() {
  table_.Stop();
  stop();
}

void GuardedServer::Closed(const char* reason) { closed_->With({opts_.listener, reason}).Inc(); }

bool GuardedServer::process_and_close_socket(socket_t sock) {
  if (refusing) {
    Refuse(sock);
  } else {
    open_gauge_->Add(1);
    metrics::GuardedStep(metrics::kThreadHttpListen, [&] { Serve(sock); });
    open_gauge_->Add(-1);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return true;
}

void GuardedServer::Refuse(int fd) {
  // On the accept thread: never wait. Plain HTTP gets a 503 if the socket
  // takes it at once; a TLS client sees the connection closed.
  if (tls_ != nullptr) return;
  static const std::string kBody = R"({"error":"too many connections; retry"})";
  static const std::string kAnswer = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; "
                                     "charset=utf-8\r\nContent-Length: " +
                                     std::to_string(kBody.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" +
                                     kBody;
  (void)::send(fd, kAnswer.data(), kAnswer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void GuardedServer::Serve(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return;
  const TimePoint opened = SteadyClock::now();
  const uint64_t id = table_.Register(fd, tls_ ? State::kHandshake : State::kIdle, opened);
  struct Unregister {
    conn::ConnectionTable* t;
    uint64_t id;
    ~Unregister() { t->Unregister(id); }
  } unregister{&table_, id};

  std::unique_ptr<SSL, SslFree> ssl;
  if (tls_ != nullptr) {
    ssl.reset(tls_->NewSsl(fd));
    if (!ssl) return;
    Handshake h = Accept(ssl.get(), fd, conn::DeadlineAfter(opened, opts_.handshake_timeout_ms));
    if (h != Handshake::kOk) {
      Closed(h == Handshake::kTimeout ? kHandshakeTimeout : kHandshakeFailed);
      return;
    }
  }

  ConnStream strm(fd, ssl.get(), opts_);
  SSL* raw_ssl = ssl.get();
  const std::function<void(httplib::Request&)> setup = [raw_ssl](httplib::Request& req) { req.ssl = raw_ssl; };
  bool clean = true;
  for (int served = 0;; ++served) {
    TimePoint now = SteadyClock::now();
    if (!table_.Set(id, State::kIdle, now) || svr_sock_ == INVALID_SOCKET) break;
    if (!strm.WaitForRequest(conn::DeadlineAfter(now, opts_.idle_timeout_ms))) break;
    now = SteadyClock::now();
    table_.Set(id, State::kReading, now);
    RequestScope scope;
    scope.table_ = &table_;
    scope.id_ = id;
    scope.deadline_ = conn::DeadlineAfter(now, opts_.request_timeout_ms);
    strm.BeginRequest(scope.deadline_, [&scope] { scope.MarkBusy(); });
    const bool last = conn::IsLastRequest(served, opened, now, opts_.max_requests, opts_.max_age_ms) ||
                      table_.stopping();
    bool connection_closed = false;
    current_request = &scope;
    bool ok = false;
    try {
      ok = process_request(strm, last, connection_closed, setup);
    } catch (...) {
      current_request = nullptr;
      for (auto& f : scope.at_end_) f();
      throw;
    }
    current_request = nullptr;
    if (!strm.Flush()) ok = false;  // an answer without a body: its head
    for (auto& f : scope.at_end_) f();
    if (const char* t = strm.timeout()) {  // a slow client: answered 400 if it could be, and closed
      Closed(t);
      clean = false;
      break;
    }
    if (scope.close_after_) {
      table_.Set(id, State::kReading, SteadyClock::now());  // waits on its client again
      constexpr uint64_t kLingerMaxBytes = 16 << 20;
      strm.Linger(std::clamp<uint64_t>(scope.discard_, 64 << 10, kLingerMaxBytes),
                  std::min(scope.deadline_, conn::DeadlineAfter(SteadyClock::now(), kLingerMs)));
      clean = false;  // Linger said goodbye
      break;
    }
    if (!ok) {
      clean = false;
      break;
    }
    if (connection_closed || last) break;
  }
  if (ssl && clean) {
    ERR_clear_error();
    (void)SSL_shutdown(ssl.get());  // close_notify, without waiting for the client's
  }
}

}  // namespace vramd::http
