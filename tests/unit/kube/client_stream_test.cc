// The API client's stream (issue 36): what httplib writes for a request is
// held and goes out in one write when the answer is first awaited, so the
// peer receives head and body together; reads wait at most their timeout.
#include "kube/client_stream.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <string>

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

TEST(ClientStream, TimeoutsRoundUpToWholeMilliseconds) {
  EXPECT_EQ(TimeoutMs(5, 0), 5000);
  EXPECT_EQ(TimeoutMs(0, 1), 1);
  EXPECT_EQ(TimeoutMs(1, 500'000), 1500);
  EXPECT_EQ(TimeoutMs(0, 0), 1) << "never a zero (non-blocking) wait";
}

}  // namespace
}  // namespace vramd::kube
