// The pure pieces of the HTTP server's connection handling (issue 30):
// poll arithmetic under a deadline, which connection makes room at the cap,
// the keep-alive caps, the connection table's admission and shutdown, and
// the JSON item count that bounds /v1/explain's tree.
#include "http/connections.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "http/json_views.h"

namespace vramd::http::conn {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

const TimePoint kT0 = TimePoint(seconds(1000));

TEST(PollTimeout, IsThePerOperationTimeoutWhenTheDeadlineIsFurther) {
  EXPECT_EQ(PollTimeoutMs(kT0, kT0 + seconds(10), 5000), 5000);
  EXPECT_EQ(PollTimeoutMs(kT0, kNoDeadline, 5000), 5000);
}

TEST(PollTimeout, IsCutToWhatIsLeftBeforeTheDeadline) {
  EXPECT_EQ(PollTimeoutMs(kT0, kT0 + milliseconds(1200), 5000), 1200);
  // A request that trickles in a byte every 2 s never waits 5 s per read,
  // but its deadline still comes: the last wait is only what is left.
  EXPECT_EQ(PollTimeoutMs(kT0 + milliseconds(9990), kT0 + seconds(10), 5000), 10);
}

TEST(PollTimeout, RoundsAFractionOfAMillisecondUpInsteadOfSpinning) {
  EXPECT_EQ(PollTimeoutMs(kT0, kT0 + microseconds(300), 5000), 1);
}

TEST(PollTimeout, IsZeroOnceTheDeadlinePassed) {
  EXPECT_EQ(PollTimeoutMs(kT0 + seconds(10), kT0 + seconds(10), 5000), 0);
  EXPECT_EQ(PollTimeoutMs(kT0 + seconds(11), kT0 + seconds(10), 5000), 0);
}

TEST(PollTimeout, WithoutAPerOperationTimeoutWaitsForTheDeadline) {
  EXPECT_EQ(PollTimeoutMs(kT0, kT0 + milliseconds(2500), 0), 2500);
}

TEST(DeadlineAfter, NonPositiveIsNoDeadline) {
  EXPECT_EQ(DeadlineAfter(kT0, 0), kNoDeadline);
  EXPECT_EQ(DeadlineAfter(kT0, -1), kNoDeadline);
  EXPECT_EQ(DeadlineAfter(kT0, 1500), kT0 + milliseconds(1500));
}

const TimePoint kLater = kT0 + seconds(100);

ConnView View(State s, int since_s, bool evicted = false) {
  ConnView v;
  v.state = s;
  v.since = kT0 + seconds(since_s);
  v.evicted = evicted;
  return v;
}

TEST(PickVictim, TheConnectionWaitingLongestOnItsClientWhateverItWaitsFor) {
  // A dribbled request begun at 3, an idle keep-alive connection since 5, a handshake since 4.
  EXPECT_EQ(PickVictim({View(State::kIdle, 5), View(State::kReading, 3), View(State::kHandshake, 4)}, kLater), 1);
  EXPECT_EQ(PickVictim({View(State::kIdle, 1), View(State::kReading, 3), View(State::kHandshake, 4)}, kLater), 0);
  EXPECT_EQ(PickVictim({View(State::kIdle, 5), View(State::kReading, 6), View(State::kHandshake, 2)}, kLater), 2);
}

TEST(PickVictim, NeverOneBeingAnsweredNorOneAlreadyEvicted) {
  EXPECT_EQ(PickVictim({View(State::kBusy, 0), View(State::kIdle, 0, true), View(State::kReading, 9)}, kLater), 2);
  EXPECT_EQ(PickVictim({View(State::kBusy, 0), View(State::kIdle, 0, true)}, kLater), -1);
  EXPECT_EQ(PickVictim({}, kLater), -1);
}

TEST(PickVictim, NotOneThatHasWaitedOnItsClientForLessThanAMoment) {
  ConnView fresh;  // accepted 40 ms ago: its request is on its way
  fresh.state = State::kIdle;
  fresh.since = kLater - milliseconds(40);
  EXPECT_EQ(PickVictim({fresh}, kLater), -1);
  EXPECT_EQ(NextEvictable({fresh}, kLater), fresh.since + kEvictableAfter);
  EXPECT_EQ(PickVictim({fresh, View(State::kReading, 50)}, kLater), 1);
  fresh.since = kLater - kEvictableAfter;  // old enough now
  EXPECT_EQ(PickVictim({fresh}, kLater), 0);
  EXPECT_EQ(NextEvictable({fresh}, kLater), kNoDeadline);
  EXPECT_EQ(NextEvictable({View(State::kBusy, 99), View(State::kIdle, 1, true)}, kLater), kNoDeadline);
}

TEST(PickVictim, NotOneWhoseClientSentBytesNotReadYet) {
  ConnView sent = View(State::kIdle, 1);  // idle long, but its next request has arrived
  sent.unread = true;
  EXPECT_EQ(PickVictim({sent}, kLater), -1);
  EXPECT_EQ(NextEvictable({sent}, kLater), kLater + kUnreadRecheck);
  EXPECT_EQ(PickVictim({sent, View(State::kReading, 50)}, kLater), 1);
}

TEST(PickVictim, TiesGoToTheFirst) { EXPECT_EQ(PickVictim({View(State::kIdle, 2), View(State::kIdle, 2)}, kLater), 0); }

TEST(IsLastRequest, TheRequestThatReachesTheCapIsTheLast) {
  EXPECT_FALSE(IsLastRequest(0, kT0, kT0, 3, 0));
  EXPECT_FALSE(IsLastRequest(1, kT0, kT0, 3, 0));
  EXPECT_TRUE(IsLastRequest(2, kT0, kT0, 3, 0));  // the third
  EXPECT_TRUE(IsLastRequest(0, kT0, kT0, 1, 0));  // one request a connection
}

TEST(IsLastRequest, AConnectionPastItsAgeServesOneMoreRequest) {
  EXPECT_FALSE(IsLastRequest(5, kT0, kT0 + milliseconds(299), 0, 300));
  EXPECT_TRUE(IsLastRequest(5, kT0, kT0 + milliseconds(300), 0, 300));
}

TEST(IsLastRequest, NonPositiveLimitsAreNoLimits) { EXPECT_FALSE(IsLastRequest(1'000'000, kT0, kT0 + seconds(86400), 0, 0)); }

// A connected pair of sockets: [0] is the server's side, [1] the client's.
struct Pair {
  int fd[2] = {-1, -1};
  Pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0); }
  ~Pair() {
    for (int f : fd) ::close(f);
  }
  // The client sees the server's end of stream (without waiting).
  bool ClientSeesEnd() const {
    char c;
    return ::recv(fd[1], &c, 1, MSG_DONTWAIT) == 0;
  }
};

TEST(ConnectionTable, AdmitsUpToTheCapThenClosesTheOneWaitingLongest) {
  ConnectionTable t(2);
  Pair a, b;
  ASSERT_EQ(t.Admit(), ConnectionTable::Admission::kAdmitted);
  uint64_t ida = t.Register(a.fd[0], State::kIdle, kT0 + seconds(1));
  ASSERT_EQ(t.Admit(), ConnectionTable::Admission::kAdmitted);
  uint64_t idb = t.Register(b.fd[0], State::kReading, kT0 + seconds(2));
  EXPECT_EQ(t.open(), 2);

  EXPECT_EQ(t.Admit(), ConnectionTable::Admission::kAdmittedAfterEviction);
  EXPECT_TRUE(a.ClientSeesEnd()) << "the connection idle since 1 s was closed";
  EXPECT_FALSE(b.ClientSeesEnd());
  EXPECT_EQ(t.open(), 3) << "the evicted one counts until its thread is done";
  EXPECT_FALSE(t.Set(ida, State::kIdle, kT0 + seconds(3))) << "an evicted connection waits for nothing more";
  // While the evicted one finishes, the next newcomer evicts another.
  EXPECT_EQ(t.Admit(), ConnectionTable::Admission::kAdmittedAfterEviction);
  EXPECT_TRUE(b.ClientSeesEnd());
  EXPECT_TRUE(t.Unregister(ida));
  t.Finished();
  EXPECT_TRUE(t.Unregister(idb));
  t.Finished();
  EXPECT_EQ(t.open(), 2);
}

TEST(ConnectionTable, RefusesWhenEveryConnectionIsBeingAnswered) {
  ConnectionTable t(1);
  Pair a;
  ASSERT_EQ(t.Admit(), ConnectionTable::Admission::kAdmitted);
  uint64_t id = t.Register(a.fd[0], State::kReading, kT0);
  t.Set(id, State::kBusy, kT0 + seconds(1));
  EXPECT_EQ(t.Admit(), ConnectionTable::Admission::kRefused);
  EXPECT_FALSE(a.ClientSeesEnd());
  EXPECT_EQ(t.open(), 1);
  // Answered and idle again: it may make room.
  EXPECT_TRUE(t.Set(id, State::kIdle, kT0 + seconds(61)));
  EXPECT_EQ(t.Admit(), ConnectionTable::Admission::kAdmittedAfterEviction);
  EXPECT_TRUE(t.Unregister(id));
}

// A table of one connection, admitted and registered in `state` (since
// kT0, long ago) on a's server end; returns its id.
uint64_t TableOfOne(ConnectionTable* t, Pair* a, State state) {
  EXPECT_EQ(t->Admit(), ConnectionTable::Admission::kAdmitted);
  return t->Register(a->fd[0], state, kT0);
}

// A newcomer's Admit (waiting up to 5 s) while another thread does `then`
// 100 ms later; *waited and *took say how it went.
ConnectionTable::Admission AdmitWhile100MsLater(ConnectionTable* t, const std::function<void()>& then, bool* waited,
                                                std::chrono::steady_clock::duration* took) {
  std::thread other([&] {
    std::this_thread::sleep_for(milliseconds(100));
    then();
  });
  const auto t0 = std::chrono::steady_clock::now();
  ConnectionTable::Admission a = t->Admit(milliseconds(5000), waited);
  *took = std::chrono::steady_clock::now() - t0;
  other.join();
  return a;
}

// At the cap with every connection being answered, Admit waits (up to its
// bound) for room: a connection that ends, or one that goes idle and may be
// evicted; without either it is refused at the bound; Stop ends the wait.
TEST(ConnectionTable, AtTheCapANewcomerWaitsForAnAnsweredConnectionToEnd) {
  ConnectionTable t(1);
  Pair a;
  uint64_t id = TableOfOne(&t, &a, State::kBusy);
  bool waited = false;
  std::chrono::steady_clock::duration took{};
  const auto end = [&] {
    t.Unregister(id);
    t.Finished();
  };
  EXPECT_EQ(AdmitWhile100MsLater(&t, end, &waited, &took), ConnectionTable::Admission::kAdmitted);
  EXPECT_TRUE(waited);
  EXPECT_GE(took, milliseconds(90)) << "admitted before the answered connection ended";
  EXPECT_LT(took, milliseconds(4000)) << "the end of the connection did not wake the wait";
  EXPECT_FALSE(a.ClientSeesEnd());
  EXPECT_EQ(t.open(), 1);
}

TEST(ConnectionTable, AtTheCapANewcomerWaitsForAnAnsweredConnectionToGoIdle) {
  ConnectionTable t(1);
  Pair a;
  uint64_t id = TableOfOne(&t, &a, State::kBusy);
  bool waited = false;
  std::chrono::steady_clock::duration took{};
  // Answered: it waits for a next request.
  const auto answered = [&] { t.Set(id, State::kIdle, kT0 + seconds(1)); };
  EXPECT_EQ(AdmitWhile100MsLater(&t, answered, &waited, &took), ConnectionTable::Admission::kAdmittedAfterEviction);
  EXPECT_LT(took, milliseconds(4000)) << "going idle did not wake the wait";
  EXPECT_TRUE(waited);
  EXPECT_TRUE(a.ClientSeesEnd()) << "the connection that went idle was closed to make room";
  EXPECT_TRUE(t.Unregister(id));
}

TEST(ConnectionTable, AConnectionJustAcceptedIsClosedForANewcomerOnlyOnceItHasWaitedAMoment) {
  ConnectionTable t(1);
  Pair a;
  ASSERT_EQ(t.Admit(), ConnectionTable::Admission::kAdmitted);
  const TimePoint accepted = SteadyClock::now();
  uint64_t id = t.Register(a.fd[0], State::kIdle, accepted);
  EXPECT_EQ(t.Admit(), ConnectionTable::Admission::kRefused) << "closed a connection accepted a moment ago";
  EXPECT_FALSE(a.ClientSeesEnd());
  bool waited = false;
  EXPECT_EQ(t.Admit(milliseconds(5000), &waited), ConnectionTable::Admission::kAdmittedAfterEviction);
  const auto at = SteadyClock::now();
  EXPECT_TRUE(waited);
  EXPECT_GE(at - accepted, kEvictableAfter);
  EXPECT_LT(at - accepted, milliseconds(3000)) << "the wait did not end when the connection became evictable";
  EXPECT_TRUE(a.ClientSeesEnd());
  EXPECT_TRUE(t.Unregister(id));
}

// A connection whose request has arrived but is not read yet (its thread
// late on a loaded machine) is not closed for a newcomer: the newcomer waits.
TEST(ConnectionTable, AConnectionWithBytesUnreadIsNotClosedForANewcomer) {
  ConnectionTable t(1);
  Pair a;
  uint64_t id = TableOfOne(&t, &a, State::kIdle);  // idle since long ago
  ASSERT_EQ(send(a.fd[1], "GET / HTTP/1.1\r\n\r\n", 18, MSG_NOSIGNAL), 18);  // the client's next request
  bool waited = false;
  EXPECT_EQ(t.Admit(milliseconds(150), &waited), ConnectionTable::Admission::kRefused);
  EXPECT_TRUE(waited);
  EXPECT_FALSE(a.ClientSeesEnd()) << "closed with its request unread";
  // Read (its thread caught up): it waits on its client again and may go.
  char buf[64];
  ASSERT_EQ(recv(a.fd[0], buf, sizeof buf, 0), 18);
  EXPECT_EQ(t.Admit(), ConnectionTable::Admission::kAdmittedAfterEviction);
  EXPECT_TRUE(a.ClientSeesEnd());
  EXPECT_TRUE(t.Unregister(id));
}

TEST(ConnectionTable, AtTheCapANewcomerIsRefusedWhenNoRoomComesInTime) {
  ConnectionTable t(1);
  Pair a;
  uint64_t id = TableOfOne(&t, &a, State::kBusy);
  bool waited = false;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(t.Admit(milliseconds(150), &waited), ConnectionTable::Admission::kRefused);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(150));
  EXPECT_TRUE(waited);
  // No wait asked for: refused at once, and says so.
  EXPECT_EQ(t.Admit(milliseconds(0), &waited), ConnectionTable::Admission::kRefused);
  EXPECT_FALSE(waited);
  EXPECT_FALSE(a.ClientSeesEnd());
  // The listener stops: a waiting newcomer is refused at once.
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(100));
    t.Stop();
  });
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(t.Admit(milliseconds(10000), &waited), ConnectionTable::Admission::kRefused);
  EXPECT_LT(std::chrono::steady_clock::now() - t1, milliseconds(5000)) << "Stop did not end the wait";
  stopper.join();
  t.Unregister(id);
}

TEST(ConnectionTable, AConnectionAdmittedButNotRegisteredYetCannotBeEvicted) {
  ConnectionTable t(1);
  ASSERT_EQ(t.Admit(), ConnectionTable::Admission::kAdmitted);
  EXPECT_EQ(t.Admit(), ConnectionTable::Admission::kRefused);
  t.Finished();
  EXPECT_EQ(t.Admit(), ConnectionTable::Admission::kAdmitted);
}

// Two bursts of `n` connections held open together, one after the other;
// returns how many threads the second burst started (a thread_local tells
// a reused thread from a new one, whatever ids the system hands out).
int ThreadsStartedBySecondBurst(int keep_idle, milliseconds linger, int n) {
  ConnectionTable table(64);
  WorkerPool pool(&table, keep_idle, [](std::function<void()>) {}, nullptr, linger);
  std::atomic<int> started{0};
  auto burst = [&] {
    std::atomic<int> in{0};
    std::atomic<bool> release{false};
    for (int i = 0; i < n; ++i) {
      pool.enqueue([&] {
        thread_local bool seen = false;
        if (!std::exchange(seen, true)) started.fetch_add(1);
        in.fetch_add(1);
        while (!release.load()) std::this_thread::sleep_for(milliseconds(1));
      });
    }
    const auto until = std::chrono::steady_clock::now() + seconds(10);
    while (in.load() < n && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(milliseconds(1));
    EXPECT_EQ(in.load(), n) << "the connections were not served side by side";
    release = true;
    while (table.open() > 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(milliseconds(1));
    std::this_thread::sleep_for(milliseconds(50));  // the threads go back to waiting
  };
  burst();
  const int first = started.load();
  EXPECT_EQ(first, n);
  burst();
  pool.shutdown();
  return started.load() - first;
}

TEST(WorkerPool, ThreadsBeyondTheKeptIdleOnesWaitTheirLingerForTheNextBurst) {
  EXPECT_EQ(ThreadsStartedBySecondBurst(/*keep_idle=*/1, seconds(10), 4), 0)
      << "the second burst started threads: the first burst's ended instead of lingering";
  // Without a linger, only the kept one is reused (what kube-scheduler's
  // connection churn cost before).
  EXPECT_EQ(ThreadsStartedBySecondBurst(/*keep_idle=*/1, milliseconds(0), 4), 3);
}

TEST(ConnectionTable, StopWakesIdleConnectionsAndLetsRequestsUnderWayFinish) {
  ConnectionTable t(4);
  Pair idle, handshake, reading, busy;
  uint64_t i = t.Register(idle.fd[0], State::kIdle, kT0);
  uint64_t h = t.Register(handshake.fd[0], State::kHandshake, kT0);
  uint64_t r = t.Register(reading.fd[0], State::kReading, kT0);
  uint64_t b = t.Register(busy.fd[0], State::kBusy, kT0);
  t.Stop();
  EXPECT_TRUE(t.stopping());
  EXPECT_TRUE(idle.ClientSeesEnd());
  EXPECT_TRUE(handshake.ClientSeesEnd());
  EXPECT_FALSE(reading.ClientSeesEnd()) << "a request under way ends within its deadline";
  EXPECT_FALSE(busy.ClientSeesEnd());
  EXPECT_FALSE(t.Set(b, State::kIdle, kT0)) << "answered: it ends instead of waiting for another request";
  EXPECT_TRUE(t.Set(b, State::kReading, kT0));
  for (uint64_t id : {i, h, r, b}) EXPECT_FALSE(t.Unregister(id)) << "none was evicted";
}

TEST(CountJsonItems, CountsValuesAndKeysOutsideStrings) {
  EXPECT_EQ(CountJsonItems("", 100), 1u);
  EXPECT_EQ(CountJsonItems("5", 100), 1u);
  EXPECT_EQ(CountJsonItems("[]", 100), 2u);
  EXPECT_EQ(CountJsonItems("[1,2,3]", 100), 4u);                    // an upper bound: the array and three numbers
  EXPECT_EQ(CountJsonItems(R"({"a":1,"b":[2]})", 100), 6u);
  EXPECT_EQ(CountJsonItems(R"(["a,b:c[d{e", "\"[,"])", 100), 3u);  // brackets in strings, an escaped quote
  EXPECT_EQ(CountJsonItems(R"(["\\", [])", 100), 4u);                // an escaped backslash ends no string
}

TEST(CountJsonItems, StopsPastTheLimit) {
  std::string nested(1 << 20, '[');
  EXPECT_EQ(CountJsonItems(nested, 32768), 32769u);
  EXPECT_EQ(CountJsonItems(std::string(32767, '['), 32768), 32768u);
}

}  // namespace
}  // namespace vramd::http::conn
