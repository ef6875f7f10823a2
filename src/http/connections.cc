#include "http/connections.h"

#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <limits>
#include <system_error>

namespace vramd::http::conn {

int PollTimeoutMs(TimePoint now, TimePoint deadline, int per_op_ms) {
  int64_t wait = per_op_ms > 0 ? per_op_ms : std::numeric_limits<int>::max();
  if (deadline != kNoDeadline) {
    if (deadline <= now) return 0;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    wait = std::min<int64_t>(wait, left);
  }
  return static_cast<int>(std::max<int64_t>(wait, 0));
}

TimePoint DeadlineAfter(TimePoint now, int64_t ms) {
  if (ms <= 0) return kNoDeadline;
  return now + std::chrono::milliseconds(ms);
}

int PickVictim(const std::vector<ConnView>& conns, TimePoint now) {
  int best = -1;
  for (size_t i = 0; i < conns.size(); ++i) {
    const ConnView& c = conns[i];
    if (c.evicted || c.state == State::kBusy || c.unread || now - c.since < kEvictableAfter) continue;
    if (best < 0 || c.since < conns[static_cast<size_t>(best)].since) best = static_cast<int>(i);
  }
  return best;
}

TimePoint NextEvictable(const std::vector<ConnView>& conns, TimePoint now) {
  TimePoint next = kNoDeadline;
  for (const ConnView& c : conns) {
    if (c.evicted || c.state == State::kBusy) continue;
    if (c.unread) {
      next = std::min(next, now + kUnreadRecheck);
    } else if (now - c.since < kEvictableAfter) {
      next = std::min(next, c.since + kEvictableAfter);
    }
  }
  return next;
}

bool IsLastRequest(int served, TimePoint opened, TimePoint now, int max_requests, int64_t max_age_ms) {
  if (max_requests > 0 && served + 1 >= max_requests) return true;
  if (max_age_ms > 0 && now - opened >= std::chrono::milliseconds(max_age_ms)) return true;
  return false;
}

ConnectionTable::Admission ConnectionTable::Admit(std::chrono::milliseconds wait, bool* waited) {
  MutexLock lock(&mu_);
  if (waited != nullptr) *waited = false;
  TimePoint now = SteadyClock::now();
  TimePoint retry_at = kNoDeadline;
  Admission a = TryAdmitLocked(now, &retry_at);
  if (a != Admission::kRefused || wait.count() <= 0 || stopping_) return a;
  if (waited != nullptr) *waited = true;
  const TimePoint deadline = now + wait;
  ++admit_waiting_;
  // Woken when a connection ends or stops being answered, or when one just
  // accepted is old enough to be closed; spurious wakes only try again.
  while (a == Admission::kRefused && !stopping_ && now < deadline) {
    room_cv_.WaitUntil(&lock, std::min(deadline, retry_at));
    now = SteadyClock::now();
    a = TryAdmitLocked(now, &retry_at);
  }
  --admit_waiting_;
  return a;
}

void ConnectionTable::WakeAdmitLocked() {
  if (admit_waiting_ > 0) room_cv_.NotifyAll();
}

ConnectionTable::Admission ConnectionTable::TryAdmitLocked(TimePoint now, TimePoint* retry_at) {
  if (admitted_ - evicting_ < max_) {
    ++admitted_;
    return Admission::kAdmitted;
  }
  std::vector<ConnView> views;
  std::vector<std::map<uint64_t, Entry>::iterator> its;
  views.reserve(entries_.size());
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    views.push_back(it->second.view);
    its.push_back(it);
    ConnView& v = views.back();
    if (!v.evicted && v.state != State::kBusy) {
      int pending = 0;
      v.unread = ::ioctl(it->second.fd, FIONREAD, &pending) == 0 && pending > 0;
    }
  }
  int victim = PickVictim(views, now);
  if (victim < 0) {
    if (retry_at != nullptr) *retry_at = NextEvictable(views, now);
    return Admission::kRefused;
  }
  Entry& e = its[static_cast<size_t>(victim)]->second;
  e.view.evicted = true;
  ++evicting_;
  // Under mu_: the fd is not closed (nor reused) before Unregister.
  ::shutdown(e.fd, SHUT_RDWR);
  ++admitted_;
  return Admission::kAdmittedAfterEviction;
}

void ConnectionTable::Finished() {
  MutexLock lock(&mu_);
  --admitted_;
  WakeAdmitLocked();
}

uint64_t ConnectionTable::Register(int fd, State state, TimePoint now) {
  MutexLock lock(&mu_);
  uint64_t id = next_id_++;
  Entry e;
  e.fd = fd;
  e.view.state = state;
  e.view.since = now;
  entries_.emplace(id, e);
  return id;
}

bool ConnectionTable::Set(uint64_t id, State state, TimePoint now) {
  MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  if (it->second.view.state != state) {
    // An answered connection that now waits on its client may be evicted.
    if (it->second.view.state == State::kBusy) WakeAdmitLocked();
    it->second.view.state = state;
    it->second.view.since = now;
  }
  if (state == State::kIdle && (stopping_ || it->second.view.evicted)) return false;
  return true;
}

bool ConnectionTable::Unregister(uint64_t id) {
  MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  bool evicted = it->second.view.evicted;
  if (evicted) --evicting_;
  entries_.erase(it);
  return evicted;
}

void ConnectionTable::Stop() {
  MutexLock lock(&mu_);
  stopping_ = true;
  WakeAdmitLocked();
  for (auto& [id, e] : entries_) {
    // Waiting for a next request (or a first one), or in its TLS handshake:
    // no request under way, so it ends now.
    if (e.view.state == State::kIdle || e.view.state == State::kHandshake) ::shutdown(e.fd, SHUT_RDWR);
  }
}

bool ConnectionTable::stopping() const {
  MutexLock lock(&mu_);
  return stopping_;
}

int ConnectionTable::open() const {
  MutexLock lock(&mu_);
  return admitted_;
}

WorkerPool::WorkerPool(ConnectionTable* table, int keep_idle, Refuse refuse, OnAdmission on_admission,
                       std::chrono::milliseconds linger, std::chrono::milliseconds admission_wait)
    : table_(table), keep_idle_(std::max(0, keep_idle)), linger_(std::max(std::chrono::milliseconds(0), linger)),
      admission_wait_(std::max(std::chrono::milliseconds(0), admission_wait)),
      refuse_(std::move(refuse)),
      on_admission_(std::move(on_admission)) {}

WorkerPool::~WorkerPool() { shutdown(); }

void WorkerPool::enqueue(std::function<void()> fn) {
  bool waited = false;
  ConnectionTable::Admission a = table_->Admit(admission_wait_, &waited);
  std::vector<std::thread> ended;
  if (a != ConnectionTable::Admission::kRefused) {
    MutexLock lock(&mu_);
    ReapLocked(&ended);
    if (idle_ > 0) {  // an idle thread takes it (claimed here, so that each job has its own)
      --idle_;
      jobs_.push_back(std::move(fn));
      work_cv_.NotifyOne();
    } else {
      auto it = threads_.emplace(threads_.end());
      try {
        *it = std::thread(&WorkerPool::Work, this, it, fn);
        ++running_;
      } catch (const std::system_error&) {  // no thread to be had (limits): refused like at the cap
        threads_.erase(it);
        table_->Finished();
        a = ConnectionTable::Admission::kRefused;
      }
    }
  }
  for (std::thread& t : ended) t.join();
  if (on_admission_) on_admission_(a, waited);
  if (a == ConnectionTable::Admission::kRefused) refuse_(std::move(fn));
}

void WorkerPool::Work(std::list<std::thread>::iterator self, std::function<void()> fn) {
  for (;;) {
    fn();  // serves and closes the socket; catches what its work throws
    fn = nullptr;
    table_->Finished();
    MutexLock lock(&mu_);
    if (shutdown_) break;
    ++idle_;  // enqueue claims it back when it hands this thread a job
    while (jobs_.empty() && !shutdown_) {
      if (idle_ <= keep_idle_) {
        work_cv_.Wait(&lock);
        continue;
      }
      // More idle threads than kept: this one waits linger_ at most, and
      // ends unless a connection came or others were handed one meanwhile.
      if (linger_.count() > 0 &&
          work_cv_.WaitFor(&lock, linger_, [this]() EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !jobs_.empty() || shutdown_; })) {
        continue;
      }
      if (idle_ > keep_idle_) break;
    }
    if (jobs_.empty()) {  // shutdown, or no connection within linger_
      --idle_;
      break;
    }
    fn = std::move(jobs_.front());
    jobs_.pop_front();
  }
  MutexLock lock(&mu_);
  ended_.push_back(self);
  --running_;
  done_cv_.NotifyAll();
}

void WorkerPool::ReapLocked(std::vector<std::thread>* out) {
  for (auto it : ended_) {
    out->push_back(std::move(*it));
    threads_.erase(it);
  }
  ended_.clear();
}

void WorkerPool::shutdown() {
  std::vector<std::thread> ended;
  {
    MutexLock lock(&mu_);
    shutdown_ = true;
    work_cv_.NotifyAll();
    while (running_ > 0 || !jobs_.empty()) done_cv_.Wait(&lock);
    ReapLocked(&ended);
  }
  for (std::thread& t : ended) t.join();
}

}  // namespace vramd::http::conn
