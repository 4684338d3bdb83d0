#include "transport/detail/tls_stream.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>
#include <chrono>
#include <future>
#include <optional>
#include <thread>

namespace ballot::transport::detail {
namespace {

// A wait that completed while its strand was busy, and whose socket is closed before the wait's
// handler runs, must not let OpenSSL use the closed descriptor's number: the process may already
// have given that number to a new socket. Here the new socket is a blocking socketpair end put on
// that number with dup2, as an accepted connection that has not started its handshake would be.
// Before the stream checked its socket, the handshake's next attempt blocked in read() on it.
TEST(TlsStream, AnAttemptAfterItsSocketClosedNeverTouchesTheOldDescriptor) {
  asio::io_context io;
  auto strand = asio::make_strand(io);
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::address_v4::loopback(), 0});
  asio::ip::tcp::socket client(io);
  client.connect(acceptor.local_endpoint());
  asio::ip::tcp::socket accepted(strand);
  acceptor.accept(accepted);
  SSL_CTX* context = SSL_CTX_new(TLS_method());
  ASSERT_NE(context, nullptr);
  std::optional<TlsStream> stream;
  stream.emplace(std::move(accepted), context);
  const int fd = static_cast<int>(stream->next_layer().native_handle());

  // The server side's handshake waits for the client's first bytes.
  std::promise<asio::error_code> finished;
  stream->async_handshake(false, [&](const asio::error_code& ec) { finished.set_value(ec); });

  // A handler holds the strand while the client's bytes arrive: the wait completes on the other
  // thread and its handler queues behind this one.
  std::promise<void> holding;
  std::promise<void> go;
  int other_end = -1;
  asio::post(strand, [&] {
    holding.set_value();
    go.get_future().wait();
    asio::error_code ignored;
    stream->next_layer().close(ignored);
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);  // blocking, and silent
    if (pair[0] != fd) {                                        // the lowest free number is usually the one just closed
      ASSERT_EQ(::dup2(pair[0], fd), fd);
      ::close(pair[0]);
    }
    other_end = pair[1];
  });
  auto guard = asio::make_work_guard(io);
  std::thread first([&] { io.run(); });
  std::thread second([&] { io.run(); });
  holding.get_future().wait();
  const char hello[] = "client hello";
  asio::write(client, asio::buffer(hello));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the wait completes meanwhile
  go.set_value();

  auto result = finished.get_future();
  const bool done = result.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  if (!done && other_end >= 0) ::close(other_end);  // unblocks the read: the test fails, it does not hang
  EXPECT_TRUE(done) << "the handshake read from a descriptor its socket had closed";
  const asio::error_code ec = result.get();
  EXPECT_EQ(ec, asio::error::operation_aborted) << ec.message();
  guard.reset();
  io.stop();
  first.join();
  second.join();
  if (done && other_end >= 0) ::close(other_end);
  ::close(fd);
  stream.reset();
  SSL_CTX_free(context);
}

}  // namespace
}  // namespace ballot::transport::detail
