// The HTTP server against slow and idle clients (issue 30), in process on
// loopback port 0 with small limits: a request that trickles in is cut off at
// its deadline however steady the bytes, a TLS handshake that trickles in at
// the handshake deadline, a connection ends after its request cap or its age,
// a new client gets in at the connection cap by closing the connection that
// waited longest (or waits for room when every one is being answered, and is
// refused when none comes in time), a route's
// body limit and turns apply before the body is read, and Stop does not wait
// for idle keep-alive connections. Timing bounds are generous: they tell
// "cut off at the deadline" from "never cut off", nothing finer.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "daemon/tls_bundle.h"
#include "vramd/http/server.h"
#include "vramd/metrics/registry.h"

namespace vramd::http {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

double Since(Steady::time_point t0) { return std::chrono::duration<double>(Steady::now() - t0).count(); }

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void Send(int fd, const std::string& s) { ASSERT_EQ(send(fd, s.data(), s.size(), MSG_NOSIGNAL), ssize_t(s.size())); }

// Reads until the server closes (true) or `timeout_ms` passes (false); what came is appended to `in`.
bool ReadUntilClosed(int fd, int timeout_ms, std::string* in) {
  auto until = Steady::now() + milliseconds(timeout_ms);
  while (Steady::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) != 1) continue;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
    in->append(buf, static_cast<size_t>(n));
  }
  return false;
}

// Reads one answer (headers and Content-Length body); "" when none came in `timeout_ms`.
std::string ReadAnswer(int fd, int timeout_ms) {
  std::string in;
  auto until = Steady::now() + milliseconds(timeout_ms);
  while (Steady::now() < until) {
    size_t end = in.find("\r\n\r\n");
    if (end != std::string::npos) {
      size_t cl = in.find("Content-Length: ");
      size_t len = cl == std::string::npos || cl > end ? 0 : std::stoul(in.substr(cl + 16));
      if (in.size() >= end + 4 + len) return in;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) != 1) continue;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  return in;
}

const std::string kGet = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

double Closed(metrics::Registry& r, const std::string& listener, const std::string& reason) {
  return r.AddCounter("vramd_http_connections_closed_total", "", {"listener", "reason"})
      .With({listener, reason})
      .Value();
}

double Waited(metrics::Registry& r, const std::string& listener) {
  return r.AddCounter("vramd_http_connections_waited_total", "", {"listener"}).With({listener}).Value();
}

class SlowClientsTest : public ::testing::Test {
 protected:
  void Start(ServerOptions o) {
    o.host = "127.0.0.1";
    o.port = 0;
    server_ = std::make_unique<Server>(o, &registry_);
    server_->Route("GET", "/healthz", "healthz", [](const Request&) {
      Reply r;
      r.body = "ok";
      return r;
    });
    server_->Route("POST", "/echo", "echo", [](const Request& r) {
      Reply out;
      out.body = std::to_string(r.body.size());
      return out;
    });
    server_->Route("GET", "/big", "big", [](const Request&) {
      Reply r;
      r.body.assign(200'000, 'b');
      return r;
    });
    server_->Route(
        "POST", "/small", "small", [](const Request&) { return Reply{}; }, RouteLimits{.max_body_bytes = 100});
    server_->Route(
        "POST", "/one", "one",
        [this](const Request&) {
          ++in_one_;
          released_.wait_for(std::chrono::seconds(10));
          return Reply{};
        },
        RouteLimits{.max_concurrent = 1});
    ASSERT_TRUE(server_->Start().ok());
    port_ = server_->port();
  }
  // A server of one connection, and that one being answered (its request
  // held in /one until release_); returns the connection.
  int StartWithItsOnlyConnectionBusy(int admission_wait_ms, const std::string& more_headers = "") {
    ServerOptions o;
    o.max_connections = 1;
    o.admission_wait_ms = admission_wait_ms;
    Start(o);
    int busy = Connect(port_);
    Send(busy, "POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n" + more_headers + "\r\n");
    for (int i = 0; i < 100 && in_one_ == 0; ++i) std::this_thread::sleep_for(milliseconds(20));
    return busy;
  }
  void TearDown() override {
    try {
      release_.set_value();
    } catch (const std::future_error&) {
    }
    if (server_) server_->Stop();
  }

  metrics::Registry registry_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::atomic<int> in_one_{0};
};

TEST_F(SlowClientsTest, ARequestTricklingInFasterThanTheReadTimeoutIsCutOffAtItsDeadline) {
  ServerOptions o;
  o.read_timeout_ms = 3000;     // never reached: a byte comes every 100 ms
  o.request_timeout_ms = 800;
  Start(o);
  int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  const std::string slow = "GET /healthz HTTP/1.1\r\nX-Slow: " + std::string(200, 'a');
  auto t0 = Steady::now();
  bool closed = false;
  std::string in;
  for (char c : slow) {
    if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) == 1) {
      closed = ReadUntilClosed(fd, 3000, &in);
      break;
    }
  }
  double took = Since(t0);
  close(fd);
  EXPECT_TRUE(closed) << "still open after " << took << " s";
  EXPECT_GE(took, 0.6);
  EXPECT_LT(took, 3.0) << "not cut off at the 0.8 s deadline";
  EXPECT_EQ(Closed(registry_, "listen", "request_timeout"), 1);
  // Others were served meanwhile and still are.
  int other = Connect(port_);
  Send(other, kGet);
  EXPECT_NE(ReadAnswer(other, 3000).find("200 OK"), std::string::npos);
  close(other);
}

TEST_F(SlowClientsTest, ABodyTricklingInIsCutOffAtTheDeadlineToo) {
  ServerOptions o;
  o.read_timeout_ms = 3000;
  o.request_timeout_ms = 800;
  Start(o);
  int fd = Connect(port_);
  Send(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n");
  auto t0 = Steady::now();
  bool closed = false;
  std::string in;
  for (int i = 0; i < 1000 && !closed; ++i) {
    if (send(fd, "x", 1, MSG_NOSIGNAL) != 1) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) == 1) closed = ReadUntilClosed(fd, 3000, &in);
  }
  double took = Since(t0);
  close(fd);
  EXPECT_TRUE(closed);
  EXPECT_LT(took, 3.0);
  EXPECT_EQ(Closed(registry_, "listen", "request_timeout"), 1);
}

TEST_F(SlowClientsTest, AConnectionEndsAfterItsRequestCap) {
  ServerOptions o;
  o.max_requests_per_connection = 3;
  Start(o);
  int fd = Connect(port_);
  for (int i = 1; i <= 3; ++i) {
    Send(fd, kGet);
    std::string a = ReadAnswer(fd, 3000);
    ASSERT_NE(a.find("200 OK"), std::string::npos) << i;
    EXPECT_EQ(a.find("Connection: close") != std::string::npos, i == 3) << i << ": " << a;
  }
  std::string rest;
  EXPECT_TRUE(ReadUntilClosed(fd, 3000, &rest));
  close(fd);
}

TEST_F(SlowClientsTest, AConnectionEndsAfterItsAge) {
  ServerOptions o;
  o.max_connection_age_ms = 300;
  Start(o);
  int fd = Connect(port_);
  Send(fd, kGet);
  std::string a = ReadAnswer(fd, 3000);
  EXPECT_EQ(a.find("Connection: close"), std::string::npos) << a;
  std::this_thread::sleep_for(milliseconds(400));
  Send(fd, kGet);
  a = ReadAnswer(fd, 3000);
  EXPECT_NE(a.find("200 OK"), std::string::npos) << a;
  EXPECT_NE(a.find("Connection: close"), std::string::npos) << a;
  std::string rest;
  EXPECT_TRUE(ReadUntilClosed(fd, 3000, &rest));
  close(fd);
}

TEST_F(SlowClientsTest, AtTheCapANewClientClosesTheConnectionThatWaitedLongest) {
  ServerOptions o;
  o.max_connections = 2;
  o.read_timeout_ms = 10000;  // nothing times out during the test
  Start(o);
  int idle = Connect(port_);   // connected, says nothing
  std::this_thread::sleep_for(milliseconds(100));
  int slow = Connect(port_);
  Send(slow, "GET /healthz HTTP/1.1\r\n");  // a request begun later
  std::this_thread::sleep_for(milliseconds(100));
  auto t0 = Steady::now();
  int fresh = Connect(port_);
  Send(fresh, kGet);
  std::string a = ReadAnswer(fresh, 3000);
  EXPECT_NE(a.find("200 OK"), std::string::npos) << a;
  EXPECT_LT(Since(t0), 2.0);
  std::string in;
  EXPECT_TRUE(ReadUntilClosed(idle, 2000, &in)) << "the longest-waiting connection was not closed";
  pollfd p{slow, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 200), 0) << "the other one was closed too";
  EXPECT_EQ(Closed(registry_, "listen", "evicted"), 1);
  for (int fd : {idle, slow, fresh}) close(fd);
}

TEST_F(SlowClientsTest, AtTheCapWithEveryConnectionBeingAnsweredANewOneIsRefusedAfterItsWait) {
  int busy = StartWithItsOnlyConnectionBusy(300);
  ASSERT_EQ(in_one_, 1);
  auto t0 = Steady::now();
  int refused = Connect(port_);
  std::string in;
  EXPECT_TRUE(ReadUntilClosed(refused, 3000, &in));
  EXPECT_GE(Since(t0), 0.25) << "refused before its admission wait";
  EXPECT_NE(in.find("503"), std::string::npos) << in;
  EXPECT_EQ(Closed(registry_, "listen", "refused"), 1);
  EXPECT_EQ(Waited(registry_, "listen"), 1);
  release_.set_value();
  EXPECT_NE(ReadAnswer(busy, 3000).find("200 OK"), std::string::npos);
  for (int fd : {busy, refused}) close(fd);
}

// A burst beyond the cap while every connection is being answered (binds
// waiting on the API server, say) is a wait, not an error: the newcomer is
// served as soon as an answered connection ends.
TEST_F(SlowClientsTest, AtTheCapANewConnectionWaitsForOneBeingAnsweredAndIsServed) {
  int busy = StartWithItsOnlyConnectionBusy(5000, "Connection: close\r\n");
  ASSERT_EQ(in_one_, 1);
  int fresh = Connect(port_);
  ASSERT_GE(fresh, 0);
  Send(fresh, kGet);
  std::this_thread::sleep_for(milliseconds(300));
  pollfd p{fresh, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0) << "answered (or refused) while the only connection was being answered";
  release_.set_value();
  EXPECT_NE(ReadAnswer(busy, 3000).find("200 OK"), std::string::npos);
  std::string a = ReadAnswer(fresh, 3000);
  EXPECT_NE(a.find("200 OK"), std::string::npos) << a;
  EXPECT_EQ(Closed(registry_, "listen", "refused"), 0);
  // Counted on the accept thread once the connection has a thread: possibly
  // after its answer went out (seen under ASan).
  for (int i = 0; i < 200 && Waited(registry_, "listen") == 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(Waited(registry_, "listen"), 1);
  for (int fd : {busy, fresh}) close(fd);
}

TEST_F(SlowClientsTest, ARouteBodyLimitAnswers413BeforeTheBodyIsSent) {
  Start(ServerOptions{});
  int fd = Connect(port_);
  Send(fd, "POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n");
  std::string a = ReadAnswer(fd, 3000);  // no byte of the body sent
  EXPECT_NE(a.find("413"), std::string::npos) << a;
  EXPECT_NE(a.find("limit of 100 bytes"), std::string::npos) << a;
  EXPECT_NE(a.find("Connection: close"), std::string::npos) << a;
  close(fd);
  // Within the limit: served.
  fd = Connect(port_);
  Send(fd, "POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}");
  EXPECT_NE(ReadAnswer(fd, 3000).find("200 OK"), std::string::npos);
  close(fd);
}

// The server holds an answer's head to send it with its body (one send);
// what it holds must still go out when the client waits for it.
TEST_F(SlowClientsTest, AClientThatAsksFor100ContinueGetsItBeforeItSendsItsBody) {
  Start(ServerOptions{});
  int fd = Connect(port_);
  Send(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  std::string interim = ReadAnswer(fd, 2000);  // no byte of the body sent yet
  EXPECT_NE(interim.find("HTTP/1.1 100 Continue"), std::string::npos) << "no interim answer: '" << interim << "'";
  Send(fd, "hello");
  std::string a = ReadAnswer(fd, 3000);
  EXPECT_NE(a.find("200 OK"), std::string::npos) << a;
  EXPECT_EQ(a.substr(a.size() - 1), "5") << a;
  close(fd);
}

TEST_F(SlowClientsTest, AnswersWithoutABodyAndLargerThanTheHeldHeadArriveWholeOnOneConnection) {
  Start(ServerOptions{});
  int fd = Connect(port_);
  Send(fd, "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string head;
  for (auto until = Steady::now() + milliseconds(3000);
       head.find("\r\n\r\n") == std::string::npos && Steady::now() < until;) {
    pollfd p{fd, POLLIN, 0};
    char buf[4096];
    if (poll(&p, 1, 50) != 1) continue;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    head.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << "the head of an answer without a body: '" << head << "'";
  EXPECT_EQ(head.find("\r\n\r\n"), head.size() - 4) << head;
  Send(fd, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string big = ReadAnswer(fd, 5000);
  ASSERT_NE(big.find("\r\n\r\n"), std::string::npos) << big.substr(0, 200);
  EXPECT_EQ(big.size() - big.find("\r\n\r\n") - 4, 200'000u);
  EXPECT_EQ(big.find_first_not_of('b', big.find("\r\n\r\n") + 4), std::string::npos);
  Send(fd, kGet);
  std::string a = ReadAnswer(fd, 3000);
  EXPECT_NE(a.find("200 OK"), std::string::npos) << a;
  EXPECT_EQ(a.substr(a.size() - 2), "ok") << a;
  close(fd);
}

TEST_F(SlowClientsTest, ARouteWithOneTurnServesTheNextRequestWhenTheFirstIsDone) {
  Start(ServerOptions{});
  int first = Connect(port_);
  Send(first, "POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  for (int i = 0; i < 100 && in_one_ == 0; ++i) std::this_thread::sleep_for(milliseconds(20));
  ASSERT_EQ(in_one_, 1);
  int second = Connect(port_);
  Send(second, "POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(in_one_, 1) << "the second request did not wait for its turn";
  release_.set_value();
  EXPECT_NE(ReadAnswer(first, 3000).find("200 OK"), std::string::npos);
  EXPECT_NE(ReadAnswer(second, 3000).find("200 OK"), std::string::npos);
  EXPECT_EQ(in_one_, 2);
  for (int fd : {first, second}) close(fd);
}

TEST_F(SlowClientsTest, StopDoesNotWaitForIdleKeepAliveConnections) {
  ServerOptions o;
  o.read_timeout_ms = 20000;
  Start(o);
  int fd = Connect(port_);
  Send(fd, kGet);
  ASSERT_NE(ReadAnswer(fd, 3000).find("200 OK"), std::string::npos);
  auto t0 = Steady::now();
  server_->Stop();
  EXPECT_LT(Since(t0), 5.0) << "Stop waited for the idle connection";
  std::string in;
  EXPECT_TRUE(ReadUntilClosed(fd, 1000, &in));
  close(fd);
}

class TlsSlowClientsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon::TlsBundleOptions t;
    t.dns_names = {"127.0.0.1"};
    Result<daemon::TlsBundle> b = daemon::GenerateTlsBundle(t);
    ASSERT_TRUE(b.ok()) << b.status().message();
    dir_ = fs::temp_directory_path() / ("vramd-tls-slow-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "tls.crt") << b->tls_crt;
    std::ofstream(dir_ / "tls.key") << b->tls_key;
    std::ofstream(dir_ / "ca.crt") << b->ca_crt;
    std::ofstream(dir_ / "client.crt") << b->client_crt;
    std::ofstream(dir_ / "client.key") << b->client_key;
  }
  void TearDown() override {
    if (server_) server_->Stop();
    fs::remove_all(dir_);
  }
  void Start(ServerOptions o) {
    o.host = "127.0.0.1";
    o.port = 0;
    o.tls_cert_file = (dir_ / "tls.crt").string();
    o.tls_key_file = (dir_ / "tls.key").string();
    o.tls_client_ca_file = (dir_ / "ca.crt").string();
    o.tls_reload_check_ms = 0;
    server_ = std::make_unique<Server>(o, &registry_);
    server_->Route("GET", "/healthz", "healthz", [](const Request&) { return Reply{}; });
    ASSERT_TRUE(server_->Start().ok());
  }
  // GET /healthz over TLS with the client certificate (or without): the status line, "" on failure.
  std::string Get(bool with_cert) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx, (dir_ / "ca.crt").c_str(), nullptr);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (with_cert) {
      SSL_CTX_use_certificate_file(ctx, (dir_ / "client.crt").c_str(), SSL_FILETYPE_PEM);
      SSL_CTX_use_PrivateKey_file(ctx, (dir_ / "client.key").c_str(), SSL_FILETYPE_PEM);
    }
    int fd = Connect(server_->port());
    timeval tv{3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    std::string out;
    if (SSL_connect(ssl) == 1 && SSL_write(ssl, kGet.data(), static_cast<int>(kGet.size())) > 0) {
      char buf[512];
      int n = SSL_read(ssl, buf, sizeof buf);
      if (n > 0) out.assign(buf, static_cast<size_t>(n));
    }
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    return out.substr(0, out.find("\r\n"));
  }

  fs::path dir_;
  metrics::Registry registry_;
  std::unique_ptr<Server> server_;
};

TEST_F(TlsSlowClientsTest, AHandshakeTricklingInIsCutOffAtTheHandshakeDeadline) {
  ServerOptions o;
  o.read_timeout_ms = 3000;
  o.tls_handshake_timeout_ms = 600;
  Start(o);
  int fd = Connect(server_->port());
  // The first bytes of a TLS record header (a ClientHello's), one every 100 ms.
  const std::string hello = std::string("\x16\x03\x01\x02\x00", 5) + std::string(512, '\x01');
  auto t0 = Steady::now();
  bool closed = false;
  std::string in;
  for (char c : hello) {
    if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) {
      closed = true;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) == 1) {
      closed = ReadUntilClosed(fd, 3000, &in);
      break;
    }
  }
  double took = Since(t0);
  close(fd);
  EXPECT_TRUE(closed);
  EXPECT_GE(took, 0.4);
  EXPECT_LT(took, 3.0) << "not cut off at the 0.6 s handshake deadline";
  EXPECT_EQ(Closed(registry_, "listen", "tls_handshake_timeout"), 1);
  EXPECT_EQ(Get(true), "HTTP/1.1 200 OK") << "served meanwhile";
}

TEST_F(TlsSlowClientsTest, ClientCertificatesAreRequiredAndReloadKeepsServing) {
  Start(ServerOptions{});
  EXPECT_EQ(Get(true), "HTTP/1.1 200 OK");
  EXPECT_EQ(Get(false), "") << "served without a client certificate";
  for (int i = 0; i < 100 && Closed(registry_, "listen", "tls_handshake_failed") < 1; ++i) {
    std::this_thread::sleep_for(milliseconds(20));  // counted once the server is done with it
  }
  EXPECT_EQ(Closed(registry_, "listen", "tls_handshake_failed"), 1);
  EXPECT_TRUE(server_->ReloadTls().ok());
  EXPECT_EQ(Get(true), "HTTP/1.1 200 OK");
  // A reload that fails keeps the previous certificate.
  std::ofstream(dir_ / "tls.key") << "not a key";
  EXPECT_FALSE(server_->ReloadTls().ok());
  EXPECT_EQ(Get(true), "HTTP/1.1 200 OK");
}

}  // namespace
}  // namespace vramd::http
