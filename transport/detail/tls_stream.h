// Internal: TLS over one TCP socket with OpenSSL reading and writing the socket itself, for the
// sessions of TlsTransport (transport/tls_transport.cc).
//
// Why not asio::ssl::stream: its engine runs OpenSSL over a memory BIO pair, so every byte is
// copied socket -> Asio buffer -> BIO -> OpenSSL record buffer on the way in and back out on the
// way out, one 16 KiB record per socket operation (bench/transport/RESULTS.md measured the
// cost). Here OpenSSL owns the non-blocking socket: with read-ahead it fills a 64 KiB buffer
// per recv() (cache-resident; larger measured slower) and decrypts records in place, and SSL_write encrypts straight
// from the caller's buffer into records that a 256 KiB buffer BIO gathers into few large send()s. Asio is only asked
// when the socket is ready (async_wait), so deadlines, strands and cancellation work as for any Asio socket.
//
// The interface mirrors the parts of asio::ssl::stream the sessions use. Completion handlers
// are never called from inside the initiating function (they are posted), as with Asio.
// Errors: asio::error::eof after the peer's close_notify, asio::ssl::error::stream_truncated
// when the connection ends without one, the OpenSSL error (asio's ssl category) otherwise.
//
// Thread-safety: like an Asio socket, one strand at a time. One read and one write may be in
// flight together (OpenSSL allows interleaving on non-blocking sockets; the strand serialises
// the calls).
#pragma once

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <array>
#include <asio.hpp>
#include <asio/ssl/error.hpp>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace ballot::transport::detail {

class TlsStream {
 public:
  using socket_type = asio::ip::tcp::socket;
  using executor_type = socket_type::executor_type;

  TlsStream(socket_type socket, SSL_CTX* context) : socket_(std::move(socket)), ssl_(SSL_new(context)) {}
  TlsStream(TlsStream&& other) noexcept : socket_(std::move(other.socket_)), ssl_(std::exchange(other.ssl_, nullptr)) {}
  TlsStream& operator=(TlsStream&&) = delete;
  TlsStream(const TlsStream&) = delete;
  ~TlsStream() {
    if (ssl_ != nullptr) SSL_free(ssl_);
  }

  executor_type get_executor() { return socket_.get_executor(); }
  socket_type& next_layer() { return socket_; }
  SSL* native_handle() { return ssl_; }

  // Attaches OpenSSL to the connected socket and runs the handshake (client or server side).
  template <typename Handler>
  void async_handshake(bool client, Handler&& handler) {
    asio::error_code ec;
    socket_.non_blocking(true, ec);
    if (!ec && !attach_bios()) ec = last_error(SSL_ERROR_SSL);
    if (ec) return post(std::forward<Handler>(handler), ec);
    if (client)
      SSL_set_connect_state(ssl_);
    else
      SSL_set_accept_state(ssl_);
    run([this](asio::error_code& error) { return step(SSL_do_handshake(ssl_), error); },
        [h = std::forward<Handler>(handler)](const asio::error_code& error) mutable { h(error); });
  }

  // Reads at least one byte and then as many as are available without waiting, up to the
  // buffer's size.
  template <typename Handler>
  void async_read_some(asio::mutable_buffer buffer, Handler&& handler) {
    auto* data = static_cast<std::uint8_t*>(buffer.data());
    const std::size_t size = buffer.size();
    auto have = std::make_shared<std::size_t>(0);
    run(
        [this, data, size, have](asio::error_code& error) {
          ERR_clear_error();  // successful calls add nothing to the queue: once per attempt is enough
          while (*have < size) {
            std::size_t n = 0;
            const int rc = SSL_read_ex(ssl_, data + *have, size - *have, &n);
            if (rc == 1) {
              *have += n;
              continue;
            }
            const Step s = classify(SSL_get_error(ssl_, rc), error);
            // Bytes already read complete the operation; an error after them shows next time.
            if (*have > 0) {
              error = {};
              return Step::kDone;
            }
            return s;
          }
          return Step::kDone;
        },
        [h = std::forward<Handler>(handler), have](const asio::error_code& error) mutable { h(error, *have); });
  }

  // Writes all of `buffers` (up to two pieces: frame head and payload), then flushes the write
  // buffer, so that the frame is on the wire when the handler runs.
  template <typename Handler>
  void async_write(std::array<asio::const_buffer, 2> buffers, Handler&& handler) {
    auto written = std::make_shared<std::size_t>(0);
    run(
        [this, buffers, written](asio::error_code& error) {
          ERR_clear_error();
          for (;;) {
            std::size_t offset = *written;
            const asio::const_buffer* piece = &buffers[0];
            if (offset >= buffers[0].size()) {
              offset -= buffers[0].size();
              piece = &buffers[1];
            }
            if (offset >= piece->size()) return flush(error);
            std::size_t n = 0;
            const int rc = SSL_write_ex(ssl_, static_cast<const std::uint8_t*>(piece->data()) + offset,
                                        piece->size() - offset, &n);
            if (rc == 1) {
              *written += n;
              continue;
            }
            return classify(SSL_get_error(ssl_, rc), error);
          }
        },
        [h = std::forward<Handler>(handler), written](const asio::error_code& error) mutable { h(error, *written); });
  }

  // Sends close_notify and waits for the peer's (bounded by the caller's deadline).
  template <typename Handler>
  void async_shutdown(Handler&& handler) {
    run(
        [this](asio::error_code& error) {
          ERR_clear_error();
          const int rc = SSL_shutdown(ssl_);
          if (rc >= 0 && flush(error) == Step::kWantWrite) return Step::kWantWrite;  // close_notify still buffered
          if (rc == 1) return Step::kDone;
          if (rc == 0) return Step::kAgain;  // ours is sent; now wait for theirs
          return classify(SSL_get_error(ssl_, rc), error);
        },
        [h = std::forward<Handler>(handler)](const asio::error_code& error) mutable { h(error); });
  }

 private:
  enum class Step { kDone, kWantRead, kWantWrite, kAgain };

  // Reads straight from the socket (OpenSSL's read-ahead buffer does the batching); writes go
  // through a kWriteBuffer buffer BIO: OpenSSL emits one 16 KiB record per BIO write, which
  // would otherwise be one send() and one TCP segment each (TCP_NODELAY). Flushed per frame.
  static constexpr int kWriteBuffer = 256 * 1024;
  bool attach_bios() {
    if (ssl_ == nullptr) return false;
    const int fd = static_cast<int>(socket_.native_handle());
    BIO* read = BIO_new_socket(fd, BIO_NOCLOSE);
    BIO* write = BIO_new_socket(fd, BIO_NOCLOSE);
    BIO* buffer = BIO_new(BIO_f_buffer());
    if (read == nullptr || write == nullptr || buffer == nullptr ||
        BIO_set_write_buffer_size(buffer, kWriteBuffer) != 1) {
      BIO_free(read);
      BIO_free(write);
      BIO_free(buffer);
      return false;
    }
    SSL_set_bio(ssl_, read, BIO_push(buffer, write));  // the SSL object owns both chains now
    return true;
  }

  Step flush(asio::error_code& error) {
    BIO* wbio = SSL_get_wbio(ssl_);
    if (BIO_flush(wbio) == 1) return Step::kDone;
    if (BIO_should_retry(wbio)) return Step::kWantWrite;
    error = last_error(SSL_ERROR_SYSCALL);
    return Step::kDone;
  }

  template <typename Handler>
  void post(Handler&& handler, asio::error_code ec) {
    asio::post(socket_.get_executor(), [h = std::forward<Handler>(handler), ec]() mutable { h(ec); });
  }

  // Runs `attempt` until it is done or fails, waiting for the socket whenever OpenSSL needs it;
  // then posts `complete`. The stream must outlive the operation (the sessions' handlers hold
  // their session, which owns the stream).
  //
  // OpenSSL's BIOs hold the bare descriptor number. Once the socket is closed (a deadline or an
  // eviction closes it while a wait that already completed is still queued behind it on the
  // strand), that number may belong to the next accepted connection, whose socket blocks until
  // its own handshake starts: OpenSSL would read another peer's bytes, or block the I/O thread in
  // read() for as long as that peer stays silent. So no attempt runs on a closed socket.
  template <typename Attempt, typename Complete>
  void run(Attempt attempt, Complete complete) {
    if (!socket_.is_open()) return post(std::move(complete), asio::error::operation_aborted);
    asio::error_code error;
    Step step = attempt(error);
    if (step == Step::kAgain) step = Step::kWantRead;
    if (step == Step::kDone) return post(std::move(complete), error);
    const auto wait = step == Step::kWantRead ? socket_type::wait_read : socket_type::wait_write;
    socket_.async_wait(
        wait, [this, attempt = std::move(attempt), complete = std::move(complete)](const asio::error_code& ec) mutable {
          if (ec) return complete(ec);
          run(std::move(attempt), std::move(complete));
        });
  }

  Step step(int rc, asio::error_code& error) {
    if (rc == 1) return Step::kDone;
    return classify(SSL_get_error(ssl_, rc), error);
  }

  Step classify(int ssl_error, asio::error_code& error) {
    switch (ssl_error) {
      case SSL_ERROR_WANT_READ:
        return Step::kWantRead;
      case SSL_ERROR_WANT_WRITE:
        return Step::kWantWrite;
      default:
        error = last_error(ssl_error);
        return Step::kDone;
    }
  }

  static asio::error_code last_error(int ssl_error) {
    const int saved_errno = errno;
    if (ssl_error == SSL_ERROR_ZERO_RETURN) return asio::error::eof;
    const unsigned long code = ERR_peek_last_error();
    if (code != 0) {
      ERR_clear_error();
      return asio::error_code(static_cast<int>(code), asio::error::get_ssl_category());
    }
    if (ssl_error == SSL_ERROR_SYSCALL && saved_errno == EPIPE) {
      // The write raised SIGPIPE, blocked on the I/O threads (tls_transport.cc): take it back.
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      const timespec now{};
      while (sigtimedwait(&pipe, nullptr, &now) == SIGPIPE) {
      }
    }
    if (ssl_error == SSL_ERROR_SYSCALL && saved_errno != 0 && saved_errno != ECONNRESET && saved_errno != EPIPE)
      return asio::error_code(saved_errno, asio::error::get_system_category());
    return asio::ssl::error::stream_truncated;  // the connection ended without close_notify
  }

  socket_type socket_;
  SSL* ssl_;
};

}  // namespace ballot::transport::detail
