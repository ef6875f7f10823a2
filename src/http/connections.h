// How vramd's HTTP listeners share their threads between clients (issue 30):
// every connection is served on a thread of its own, at most
// `max_connections` per listener; a new connection beyond that closes the
// open one that has waited longest on its client (idle between requests,
// still sending a request, or still in its TLS handshake), never one whose
// request is being answered, and is refused only when every connection is
// being answered. So a client holding connections open, or sending a byte
// now and then, delays nobody else: a fresh probe or kube-scheduler call
// always gets a thread at once.
//
// The pure pieces (poll arithmetic, the choice of a victim, the keep-alive
// caps) are free functions for the unit tests; ConnectionTable is the shared
// state of one listener and WorkerPool the httplib::TaskQueue that admits
// connections against it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <thread>
#include <vector>

#include <httplib.h>

#include "vramd/mutex.h"

namespace vramd::http::conn {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;
inline constexpr TimePoint kNoDeadline = TimePoint::max();

// How long one poll() may wait: `per_op_ms` (the read or write timeout), cut
// to what is left before `deadline` (rounded up to whole milliseconds, so a
// deadline 0.3 ms away still waits 1 ms instead of spinning). 0 when the
// deadline has passed; -1 never (a poll without timeout is never wanted).
int PollTimeoutMs(TimePoint now, TimePoint deadline, int per_op_ms);

// `now + ms`, or kNoDeadline for ms <= 0 (no limit).
TimePoint DeadlineAfter(TimePoint now, int64_t ms);

// What a connection is doing.
enum class State {
  kHandshake,  // TLS handshake under way: the client owes us bytes
  kIdle,       // between requests (or before the first): the client owes us the next one
  kReading,    // a request has begun and is not read completely yet
  kBusy,       // the request is read: its handler runs or its answer is being written
};

struct ConnView {
  State state = State::kIdle;
  TimePoint since{};      // when it entered `state`
  bool evicted = false;   // already chosen (and shut down); still finishing
  // Bytes from the client wait to be read: it is this server, not the
  // client, that is behind (a request sent into a burst, read late on a
  // loaded machine). Only looked at when a victim is wanted.
  bool unread = false;
};

// A connection may be closed to make room once it has waited on its client
// this long: one accepted a moment ago, whose request is on its way (a burst
// of kube-scheduler's calls), is no slow client.
inline constexpr std::chrono::milliseconds kEvictableAfter{100};

// The connection to close to make room for a new one at `now`: among those
// not busy, not evicted already, with nothing unread and waiting on their
// client since at least kEvictableAfter, the one that has been waiting the
// longest (the earliest `since`; ties: the first). -1 when none may be
// closed.
int PickVictim(const std::vector<ConnView>& conns, TimePoint now);

// When to look again for a connection PickVictim may close: when the first
// of those it passed over for being too young is old enough, or soon
// (kUnreadRecheck) when one had bytes unread; kNoDeadline when none.
inline constexpr std::chrono::milliseconds kUnreadRecheck{10};
TimePoint NextEvictable(const std::vector<ConnView>& conns, TimePoint now);

// Whether the request about to be served must be the connection's last
// (answered with Connection: close): the `served + 1`-th request reaches
// `max_requests`, or the connection is older than `max_age_ms`. A limit <= 0
// is no limit.
bool IsLastRequest(int served, TimePoint opened, TimePoint now, int max_requests, int64_t max_age_ms);

// The open connections of one listener. Thread-safe.
class ConnectionTable {
 public:
  explicit ConnectionTable(int max_connections) : max_(max_connections) {}

  enum class Admission { kAdmitted, kAdmittedAfterEviction, kRefused };
  // A connection was accepted: admitted while fewer than `max_connections`
  // are being served (not counting those evicted and finishing); else after
  // evicting PickVictim's choice; else (every connection is being answered,
  // or has just been accepted) once one ends or may be evicted, waiting at
  // most `wait` (the
  // accept loop waits with it, so later connections stay in the listen
  // backlog); else refused. `waited` (optional) says whether it had to wait.
  // An admitted connection must be given back with Finished() once its
  // thread is done with it.
  Admission Admit(std::chrono::milliseconds wait = std::chrono::milliseconds(0), bool* waited = nullptr);
  void Finished();

  // The admitted connection's thread registers its socket (so that it can be
  // evicted or woken at shutdown) and unregisters it BEFORE closing the fd.
  uint64_t Register(int fd, State state, TimePoint now);
  // Moves it to `state`. False when the listener is stopping and the
  // connection should end now instead of waiting for another request
  // (asked only with kIdle).
  bool Set(uint64_t id, State state, TimePoint now);
  // True when the connection had been evicted.
  bool Unregister(uint64_t id);

  // The listener stops: connections waiting for a next request (or in their
  // TLS handshake) are shut down now, those under way finish their request
  // (within its deadline) and end.
  void Stop();
  bool stopping() const;

  int open() const;  // admitted and not finished

 private:
  struct Entry {
    int fd = -1;
    ConnView view;
  };
  // Admit without waiting at `now`; kRefused when no connection may be
  // closed for it, and then `*retry_at` (optional) is when one may be.
  Admission TryAdmitLocked(TimePoint now, TimePoint* retry_at) EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes Admit's wait, if one waits (a connection ended or stopped being
  // answered, or the listener stops).
  void WakeAdmitLocked() EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int max_;
  mutable Mutex mu_;
  CondVar room_cv_;
  int admit_waiting_ GUARDED_BY(mu_) = 0;
  int admitted_ GUARDED_BY(mu_) = 0;
  int evicting_ GUARDED_BY(mu_) = 0;  // evicted, not unregistered yet
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Entry> entries_ GUARDED_BY(mu_);
};

// The TaskQueue httplib's accept loop hands each accepted socket to
// (`fn` serves the socket and closes it). Admitted connections run on a
// thread each: an idle one is reused, else a new one starts; `keep_idle`
// idle threads wait for the next connection, and any more wait `linger`
// before they end (kube-scheduler opens a new connection for about every
// second bind under load: a thread started and ended per connection was 2 %
// of vramd's CPU and a third of its system calls).
// A refused connection is handed to `refuse` on the accept thread (which
// closes it at once). shutdown() (the accept loop ended) waits for every
// connection to end and joins every thread; the owner stops the table first
// (ConnectionTable::Stop) so that idle connections end at once.
class WorkerPool : public httplib::TaskQueue {
 public:
  // `refuse` runs `fn` in its refusing mode (see GuardedServer);
  // `on_admission` hears of each connection's admission and whether it
  // waited for room (for the metrics): a connection no thread could be
  // started for is refused. `admission_wait`: ConnectionTable::Admit's wait.
  using Refuse = std::function<void(std::function<void()> fn)>;
  using OnAdmission = std::function<void(ConnectionTable::Admission, bool waited)>;
  WorkerPool(ConnectionTable* table, int keep_idle, Refuse refuse, OnAdmission on_admission,
             std::chrono::milliseconds linger = std::chrono::seconds(30),
             std::chrono::milliseconds admission_wait = std::chrono::milliseconds(0));
  ~WorkerPool() override;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

 private:
  void Work(std::list<std::thread>::iterator self, std::function<void()> fn);
  void ReapLocked(std::vector<std::thread>* out) EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ConnectionTable* table_;
  const int keep_idle_;
  const std::chrono::milliseconds linger_;
  const std::chrono::milliseconds admission_wait_;
  Refuse refuse_;
  OnAdmission on_admission_;
  Mutex mu_;
  CondVar work_cv_;  // a job or shutdown
  CondVar done_cv_;  // a worker ended
  std::list<std::function<void()>> jobs_ GUARDED_BY(mu_);
  std::list<std::thread> threads_ GUARDED_BY(mu_);
  std::vector<std::list<std::thread>::iterator> ended_ GUARDED_BY(mu_);
  int idle_ GUARDED_BY(mu_) = 0;
  int running_ GUARDED_BY(mu_) = 0;  // threads not ended
  bool shutdown_ GUARDED_BY(mu_) = false;
};

}  // namespace vramd::http::conn
