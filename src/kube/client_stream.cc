#include "kube/client_stream.h"

#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

#include "vramd/socket_address.h"

namespace vramd::kube {
namespace {

using Steady = std::chrono::steady_clock;

int LeftMs(Steady::time_point until) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Steady::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
}

}  // namespace

int TimeoutMs(time_t sec, time_t usec) {
  const long long ms = static_cast<long long>(sec) * 1000 + (static_cast<long long>(usec) + 999) / 1000;
  return static_cast<int>(std::clamp<long long>(ms, 1, INT_MAX));
}

bool ClientStream::Wait(short events, int ms) const {
  const Steady::time_point until = Steady::now() + std::chrono::milliseconds(ms);
  for (;;) {
    pollfd p{fd_, events, 0};
    const int r = ::poll(&p, 1, LeftMs(until));
    if (r > 0) return true;
    if (r == 0 || errno != EINTR) return false;
  }
}

bool ClientStream::is_readable() const {
  if (!const_cast<ClientStream*>(this)->Flush()) return false;  // the request goes out before its answer is awaited
  if (Unread() > 0) return true;
  if (ssl_ != nullptr && SSL_has_pending(ssl_) == 1) return true;
  return Wait(POLLIN, read_ms_);
}

bool ClientStream::is_writable() const { return Wait(POLLOUT, write_ms_); }

ssize_t ClientStream::read(char* ptr, size_t size) {
  if (!Flush()) return -1;
  if (size == 0) return 0;
  if (Unread() == 0) {
    // A large read goes straight to the caller's buffer.
    if (size >= in_.size()) return ReadSome(ptr, size);
    const ssize_t r = ReadSome(in_.data(), in_.size());
    if (r <= 0) return r;
    in_pos_ = 0;
    in_len_ = static_cast<size_t>(r);
  }
  const size_t n = std::min(size, Unread());
  std::memcpy(ptr, in_.data() + in_pos_, n);
  in_pos_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t ClientStream::ReadSome(char* ptr, size_t size) {
  const int n = static_cast<int>(std::min<size_t>(size, INT_MAX));
  if (ssl_ == nullptr) {
    if (!Wait(POLLIN, read_ms_)) return -1;
    for (;;) {
      const ssize_t r = ::recv(fd_, ptr, static_cast<size_t>(n), 0);
      if (r >= 0) return r;
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !Wait(POLLIN, read_ms_)) return -1;
    }
  }
  if (SSL_has_pending(ssl_) != 1 && !Wait(POLLIN, read_ms_)) return -1;
  for (;;) {
    ERR_clear_error();
    const int r = SSL_read(ssl_, ptr, n);
    if (r > 0) return r;
    const int e = SSL_get_error(ssl_, r);
    if (e == SSL_ERROR_ZERO_RETURN) return 0;
    if (e == SSL_ERROR_WANT_READ) {
      if (!Wait(POLLIN, read_ms_)) return -1;
    } else if (e == SSL_ERROR_WANT_WRITE) {
      if (!Wait(POLLOUT, write_ms_)) return -1;
    } else {
      return -1;
    }
  }
}

ssize_t ClientStream::write(const char* ptr, size_t size) {
  out_.append(ptr, size);
  return static_cast<ssize_t>(size);
}

bool ClientStream::Flush() {
  size_t off = 0;
  bool ok = true;
  while (ok && off < out_.size()) {
    const char* p = out_.data() + off;
    const size_t left = out_.size() - off;
    if (ssl_ == nullptr) {
      const ssize_t r = ::send(fd_, p, left, MSG_NOSIGNAL);
      if (r >= 0) {
        off += static_cast<size_t>(r);
      } else if (errno != EINTR) {
        ok = (errno == EAGAIN || errno == EWOULDBLOCK) && Wait(POLLOUT, write_ms_);
      }
      continue;
    }
    ERR_clear_error();
    const int r = SSL_write(ssl_, p, static_cast<int>(std::min<size_t>(left, INT_MAX)));
    if (r > 0) {
      off += static_cast<size_t>(r);
      continue;
    }
    const int e = SSL_get_error(ssl_, r);
    if (e == SSL_ERROR_WANT_WRITE) ok = Wait(POLLOUT, write_ms_);
    else if (e == SSL_ERROR_WANT_READ) ok = Wait(POLLIN, read_ms_);
    else ok = false;
  }
  out_.clear();
  return ok;
}

void ClientStream::get_remote_ip_and_port(std::string& ip, int& port) const { SocketAddress(fd_, true, ip, port); }
void ClientStream::get_local_ip_and_port(std::string& ip, int& port) const { SocketAddress(fd_, false, ip, port); }

}  // namespace vramd::kube
