// The API client's byte stream (issue 36). httplib 0.11's client streams
// poll before every write and check that the connection is alive after
// each: a Binding POST (head, then body) cost 2 writes, 2 TLS records and
// 5 polls. CoalescingClient<Base> (Base: httplib::ClientImpl for http,
// httplib::SSLClient for https) serves each request over a ClientStream
// instead: what httplib writes is held and sent in one write when the
// answer is first waited for (or the request ends), and the stream polls
// only to wait. Reads are buffered: httplib reads an answer's status line
// and headers one byte per call, which was one SSL_read (and one
// ERR_clear_error) per byte, ~1.6 % of vramd's CPU while binding; the stream
// reads what has arrived into its buffer and serves those calls from it.
// Private to src/kube.
#pragma once

#include <openssl/ssl.h>

#include <sys/socket.h>

#include <array>
#include <ctime>
#include <functional>
#include <string>

#include <httplib.h>

namespace vramd::kube {

class ClientStream final : public httplib::Stream {
 public:
  // `ssl` null: plain TCP. The timeouts bound each wait.
  ClientStream(int fd, SSL* ssl, int read_timeout_ms, int write_timeout_ms)
      : fd_(fd), ssl_(ssl), read_ms_(read_timeout_ms), write_ms_(write_timeout_ms) {}

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  // Holds the bytes (never fails); Flush sends them.
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

  // Sends what write() held, in as few writes as the socket takes; false
  // when the connection failed or a wait timed out (what was held is dropped).
  bool Flush();

  // Bytes read from the connection that no read() has taken yet.
  size_t Unread() const { return in_len_ - in_pos_; }

 private:
  // One recv/SSL_read into `ptr`, waiting as needed: >0 bytes, 0 end of
  // stream, -1 an error or a timeout.
  ssize_t ReadSome(char* ptr, size_t size);
  // Waits for `events` at most `ms`; false on a timeout or an error.
  bool Wait(short events, int ms) const;

  const int fd_;
  SSL* const ssl_;
  const int read_ms_, write_ms_;
  std::string out_;
  // What arrived beyond what the caller asked for: in_[in_pos_, in_len_).
  std::array<char, 16384> in_;
  size_t in_pos_ = 0, in_len_ = 0;
};

int TimeoutMs(time_t sec, time_t usec);

template <typename Base>
class CoalescingClient final : public Base {
 public:
  using Base::Base;

 private:
  bool process_socket(const typename Base::Socket& socket,
                      std::function<bool(httplib::Stream& strm)> callback) override {
    // With read-ahead, OpenSSL reads what has arrived in one read instead of
    // a record's header and its body in two (the stream asks SSL_has_pending).
    if (socket.ssl != nullptr) SSL_set_read_ahead(socket.ssl, 1);
    ClientStream strm(socket.sock, socket.ssl, TimeoutMs(this->read_timeout_sec_, this->read_timeout_usec_),
                      TimeoutMs(this->write_timeout_sec_, this->write_timeout_usec_));
    const bool ok = callback(strm);
    // Bytes beyond the answer (a server speaking out of turn) would be read
    // as the next answer's start if httplib kept the connection: end it, so
    // the next request opens a new one.
    if (strm.Unread() > 0) ::shutdown(socket.sock, SHUT_RDWR);
    return strm.Flush() && ok;
  }
};

}  // namespace vramd::kube
