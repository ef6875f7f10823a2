// The API client's stream (issue 36): what httplib writes for a request is
// held and goes out in one write when the answer is first awaited, so the
// peer receives head and body together; reads wait at most their timeout
// and take what has arrived in one read, serving httplib's one-byte reads
// of an answer's head from the stream's buffer.
#include "kube/client_stream.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <string>
#include <thread>

namespace vramd::kube {
namespace {

struct Pair {
  Pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd.data()), 0); }
  ~Pair() {
    for (int f : fd) ::close(f);
  }
  // What the peer can read now, without waiting.
  std::string PeerReads() const {
    std::array<char, 4096> buf{};
    const ssize_t n = ::recv(fd[1], buf.data(), buf.size(), MSG_DONTWAIT);
    return n > 0 ? std::string(buf.data(), static_cast<size_t>(n)) : "";
  }
  std::array<int, 2> fd{-1, -1};
};

TEST(ClientStream, ARequestIsHeldUntilItsAnswerIsAwaitedAndThenSentWhole) {
  Pair p;
  ClientStream s(p.fd[0], nullptr, 1000, 1000);
  ASSERT_EQ(s.write("POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\n", 39), 39);
  ASSERT_EQ(s.write("{}", 2), 2);
  EXPECT_EQ(p.PeerReads(), "") << "a write went out before the answer was awaited";
  ASSERT_EQ(::send(p.fd[1], "HTTP/1.1 201", 12, 0), 12);
  EXPECT_TRUE(s.is_readable());
  EXPECT_EQ(p.PeerReads(), "POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}") << "head and body in one read";
  std::array<char, 64> buf{};
  ASSERT_EQ(s.read(buf.data(), buf.size()), 12);
  EXPECT_EQ(std::string(buf.data(), 12), "HTTP/1.1 201");
}

TEST(ClientStream, AReadSendsWhatIsHeldFirstAndWaitsAtMostItsTimeout) {
  Pair p;
  ClientStream s(p.fd[0], nullptr, 200, 1000);
  ASSERT_EQ(s.write("GET / HTTP/1.1\r\n\r\n", 18), 18);
  std::array<char, 64> buf{};
  EXPECT_EQ(s.read(buf.data(), buf.size()), -1) << "no answer within the read timeout";
  EXPECT_EQ(p.PeerReads(), "GET / HTTP/1.1\r\n\r\n");
  ::shutdown(p.fd[1], SHUT_WR);
  EXPECT_EQ(s.read(buf.data(), buf.size()), 0) << "the peer's end of stream";
}

TEST(ClientStream, FlushFailsOnAClosedPeerAndDropsWhatWasHeld) {
  Pair p;
  ClientStream s(p.fd[0], nullptr, 200, 200);
  ::close(p.fd[1]);
  p.fd[1] = -1;
  ASSERT_EQ(s.write("GET / HTTP/1.1\r\n\r\n", 18), 18);
  EXPECT_FALSE(s.Flush());
  EXPECT_TRUE(s.Flush()) << "nothing is held any more";
}

TEST(ClientStream, ReadsWhatHasArrivedAtOnceAndServesOneByteReadsFromItsBuffer) {
  Pair p;
  ClientStream s(p.fd[0], nullptr, 1000, 1000);
  const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  ASSERT_EQ(::send(p.fd[1], answer.data(), answer.size(), 0), static_cast<ssize_t>(answer.size()));
  char c = 0;
  ASSERT_EQ(s.read(&c, 1), 1);
  EXPECT_EQ(c, 'H');
  // One read took all of it: the connection has nothing left for a second.
  std::array<char, 64> rest{};
  EXPECT_EQ(::recv(p.fd[0], rest.data(), rest.size(), MSG_DONTWAIT | MSG_PEEK), -1);
  EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);
  EXPECT_EQ(s.Unread(), answer.size() - 1);
  EXPECT_TRUE(s.is_readable()) << "buffered bytes are readable without a wait";
  std::string got = "H";
  while (got.size() < answer.size() && s.read(&c, 1) == 1) got += c;
  EXPECT_EQ(got, answer);
  EXPECT_EQ(s.Unread(), 0u);
  ::shutdown(p.fd[1], SHUT_WR);
  EXPECT_EQ(s.read(&c, 1), 0) << "then the peer's end of stream";
}

TEST(ClientStream, ALargeReadTakesTheBufferedBytesFirst) {
  Pair p;
  ClientStream s(p.fd[0], nullptr, 1000, 1000);
  ASSERT_EQ(::send(p.fd[1], "abcdef", 6, 0), 6);
  char c = 0;
  ASSERT_EQ(s.read(&c, 1), 1);
  std::array<char, 20000> big{};
  ASSERT_EQ(s.read(big.data(), big.size()), 5);
  EXPECT_EQ(std::string(big.data(), 5), "bcdef");
  ASSERT_EQ(::send(p.fd[1], "gh", 2, 0), 2);
  ASSERT_EQ(s.read(big.data(), big.size()), 2) << "with nothing buffered, straight from the connection";
  EXPECT_EQ(std::string(big.data(), 2), "gh");
}

// A server that answers one request per connection with `answer`, which
// may carry bytes beyond the answer itself; counts the connections.
class OneAnswerServer {
 public:
  explicit OneAnswerServer(std::string answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    socklen_t len = sizeof a;
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~OneAnswerServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  int connections() const { return connections_.load(); }

 private:
  void Run() {
    for (;;) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++connections_;
      // Answers each request of the connection (a head ends the request:
      // GETs only) until the client ends it.
      std::string in;
      std::array<char, 4096> buf{};
      for (;;) {
        const ssize_t n = ::recv(c, buf.data(), buf.size(), 0);
        if (n <= 0) break;
        in.append(buf.data(), static_cast<size_t>(n));
        for (size_t end; (end = in.find("\r\n\r\n")) != std::string::npos;) {
          in.erase(0, end + 4);
          ::send(c, answer_.data(), answer_.size(), MSG_NOSIGNAL);
        }
      }
      ::close(c);
    }
  }
  std::string answer_;
  int fd_ = -1, port_ = 0;
  std::atomic<int> connections_{0};
  std::thread thread_;
};

// `requests` GETs of "/" through one kept-alive CoalescingClient: each must
// be answered 200 "ok".
void GetsAnswerOk(int port, int requests) {
  CoalescingClient<httplib::ClientImpl> client("127.0.0.1", port);
  client.set_keep_alive(true);
  client.set_read_timeout(2, 0);
  for (int i = 0; i < requests; ++i) {
    const auto res = client.Get("/");
    ASSERT_TRUE(res) << "request " << i << ": " << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200) << "request " << i << " read stray bytes as its answer";
    EXPECT_EQ(res->body, "ok");
  }
}

TEST(CoalescingClient, BytesBeyondAnAnswerEndTheConnectionInsteadOfStartingTheNextAnswer) {
  OneAnswerServer server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 500 Stray\r\n\r\n");
  GetsAnswerOk(server.port(), 2);
  EXPECT_EQ(server.connections(), 2);
}

TEST(CoalescingClient, AKeptAliveConnectionServesTheNextRequest) {
  OneAnswerServer server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  GetsAnswerOk(server.port(), 3);
  EXPECT_EQ(server.connections(), 1) << "the buffer must not cost the kept-alive connection";
}

TEST(ClientStream, TimeoutsRoundUpToWholeMilliseconds) {
  EXPECT_EQ(TimeoutMs(5, 0), 5000);
  EXPECT_EQ(TimeoutMs(0, 1), 1);
  EXPECT_EQ(TimeoutMs(1, 500'000), 1500);
  EXPECT_EQ(TimeoutMs(0, 0), 1) << "never a zero (non-blocking) wait";
}

}  // namespace
}  // namespace vramd::kube
