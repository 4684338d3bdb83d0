// Test harness for the transports: a recording observer, a raw TLS client that can present any
// (or no) certificate and write arbitrary bytes, and a small cluster (server 0, honest node 1,
// attacker node 2) over either transport.
#pragma once

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "test_pki.h"
#include "transport/detail/ossl.h"
#include "transport/memory_transport.h"
#include "transport/tls_transport.h"

namespace ballot::transport::testing {

using namespace std::chrono_literals;
constexpr std::uint64_t kJob = 4242;

class RecordingObserver : public MisbehaviourObserver {
 public:
  void on_misbehaviour(const MisbehaviourReport& report) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      reports_.push_back(report);
    }
    changed_.notify_all();
  }
  void on_equivocation(const EquivocationProof& proof) override {
    std::lock_guard<std::mutex> lock(mutex_);
    proofs_.push_back(proof);
  }
  // The first report of `kind` (waiting up to `timeout`).
  std::optional<MisbehaviourReport> wait_for(Misbehaviour kind, std::chrono::milliseconds timeout = 3000ms) {
    std::unique_lock<std::mutex> lock(mutex_);
    std::optional<MisbehaviourReport> found;
    changed_.wait_for(lock, timeout, [&] {
      for (const auto& r : reports_)
        if (r.kind == kind) {
          found = r;
          return true;
        }
      return false;
    });
    return found;
  }
  std::vector<MisbehaviourReport> reports() {
    std::lock_guard<std::mutex> lock(mutex_);
    return reports_;
  }
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return reports_.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<MisbehaviourReport> reports_;
  std::vector<EquivocationProof> proofs_;
};

// A TLS 1.3 client under the test's full control. Every operation is bounded by a timeout.
class RawTlsClient {
 public:
  // `credentials` null: no client certificate. `trusted_ca_der`: the CA it trusts for the server.
  RawTlsClient(std::uint16_t port, const Credentials* credentials, const std::vector<std::uint8_t>& trusted_ca_der)
      : context_(asio::ssl::context::tls_client), port_(port) {
    SSL_CTX* ctx = context_.native_handle();
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    if (credentials != nullptr) {
      auto cert = detail::parse_certificate_der(credentials->certificate_der).value();
      SSL_CTX_use_certificate(ctx, cert.get());
      SSL_CTX_use_PrivateKey(ctx, KeyAccess::pkey(credentials->key));
    }
    auto ca = detail::parse_certificate_der(trusted_ca_der).value();
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca.get());
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    stream_.emplace(io_, context_);
  }

  // Connects and runs the TLS handshake; the error of whichever failed.
  asio::error_code connect(std::chrono::milliseconds timeout = 2000ms) {
    asio::error_code result = asio::error::timed_out;
    stream_->next_layer().async_connect(
        asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), [&](const asio::error_code& ec) {
          if (ec) {
            result = ec;
            return;
          }
          stream_->async_handshake(asio::ssl::stream_base::client, [&](const asio::error_code& e) { result = e; });
        });
    run(timeout);
    return result;
  }
  asio::error_code write(const std::vector<std::uint8_t>& bytes, std::chrono::milliseconds timeout = 2000ms) {
    asio::error_code result = asio::error::timed_out;
    asio::async_write(*stream_, asio::buffer(bytes), [&](const asio::error_code& ec, std::size_t) { result = ec; });
    run(timeout);
    return result;
  }
  // Reads exactly `n` bytes (or fails).
  asio::error_code read(std::size_t n, std::vector<std::uint8_t>* out, std::chrono::milliseconds timeout = 2000ms) {
    out->resize(n);
    asio::error_code result = asio::error::timed_out;
    asio::async_read(*stream_, asio::buffer(*out), [&](const asio::error_code& ec, std::size_t) { result = ec; });
    run(timeout);
    return result;
  }
  // Reads the server's Hello frame and answers with our own (signed by `signer`).
  asio::error_code exchange_hello(Signer& signer, NodeId claimed) {
    std::vector<std::uint8_t> header;
    if (auto ec = read(kFrameHeaderSize, &header)) return ec;
    auto decoded = decode_frame_header(header, FrameLimits{});
    if (!decoded.ok()) return asio::error::invalid_argument;
    std::vector<std::uint8_t> body;
    if (auto ec = read(decoded->body_length(), &body)) return ec;
    auto id = std::make_shared<std::vector<std::uint8_t>>(4);
    for (int i = 0; i < 4; ++i) (*id)[i] = static_cast<std::uint8_t>(claimed >> (8 * i));
    return write(signer.seal(MessageType::kHello, 0, id).to_bytes());
  }
  void close() {
    asio::error_code ignored;
    stream_->next_layer().close(ignored);
  }

 private:
  void run(std::chrono::milliseconds timeout) {
    io_.restart();
    io_.run_for(timeout);
    if (!io_.stopped()) {  // timed out: abandon the operation
      close();
      io_.restart();
      io_.run_for(500ms);
    }
  }
  asio::io_context io_;
  asio::ssl::context context_;
  std::optional<asio::ssl::stream<asio::ip::tcp::socket>> stream_;
  std::uint16_t port_;
};

enum class Kind { kMemory, kTls };
inline std::string kind_name(const ::testing::TestParamInfo<Kind>& info) {
  return info.param == Kind::kMemory ? "memory" : "tls";
}

// Server 0, honest node 1 (a Transport), attacker node 2 (raw bytes on an authenticated session).
class Cluster {
 public:
  virtual ~Cluster() = default;
  virtual Transport& server() = 0;
  virtual Transport& honest() = 0;
  virtual void attacker_send(const std::vector<std::uint8_t>& bytes) = 0;
  virtual void attacker_close() = 0;
  Signer& attacker() { return *attacker_signer_; }
  RecordingObserver& observer() { return *observer_; }

 protected:
  std::shared_ptr<RecordingObserver> observer_ = std::make_shared<RecordingObserver>();
  std::unique_ptr<Signer> attacker_signer_;
};

inline TransportOptions transport_options(std::shared_ptr<MisbehaviourObserver> observer) {
  TransportOptions options;
  options.job = kJob;
  options.observer = std::move(observer);
  options.send_timeout = 2000ms;
  return options;
}

class MemoryCluster : public Cluster {
 public:
  explicit MemoryCluster(TestPki& pki) : network_(MemoryNetwork::create()) {
    auto identity = [&](NodeId id) {
      const Credentials c = pki.credentials(id);
      return LocalIdentity{c.node, c.role, c.key};
    };
    server_ = network_->attach(identity(0), pki.registry(), transport_options(observer_)).value();
    honest_ = network_->attach(identity(1), pki.registry(), transport_options(nullptr)).value();
    attacker_ = network_->attach(identity(2), pki.registry(), transport_options(nullptr)).value();
    attacker_signer_ = std::make_unique<Signer>(pki.credentials(2).key, kJob, 2, Role::kNode);
  }
  Transport& server() override { return *server_; }
  Transport& honest() override { return *honest_; }
  void attacker_send(const std::vector<std::uint8_t>& bytes) override {
    ASSERT_TRUE(attacker_->send_frame(0, OutboundFrame{bytes, nullptr}).ok());
  }
  void attacker_close() override {}

 private:
  std::shared_ptr<MemoryNetwork> network_;
  std::unique_ptr<MemoryTransport> server_, honest_, attacker_;
};

inline TlsTransportOptions tls_options(std::shared_ptr<MisbehaviourObserver> observer) {
  TlsTransportOptions options;
  options.transport = transport_options(std::move(observer));
  options.connect_timeout = 1000ms;
  options.handshake_timeout = 1000ms;
  options.frame_timeout = 1000ms;
  options.write_timeout = 2000ms;
  options.shutdown_timeout = 300ms;
  options.reconnect_initial = 20ms;
  options.reconnect_max = 200ms;
  return options;
}

class TlsCluster : public Cluster {
 public:
  explicit TlsCluster(TestPki& pki, TlsTransportOptions server_options = tls_options(nullptr)) {
    server_options.transport.observer = observer_;
    server_ = TlsTransport::create(pki.credentials(0), pki.registry(), server_options).value();
    auto node = tls_options(nullptr);
    node.listen = false;
    node.dial[0] = PeerAddress{"127.0.0.1", server_->port()};
    honest_ = TlsTransport::create(pki.credentials(1), pki.registry(), node).value();
    EXPECT_TRUE(honest_->wait_connected(0, 3000ms).ok());
    EXPECT_TRUE(server_->wait_connected(1, 3000ms).ok());
    const Credentials attacker = pki.credentials(2);
    attacker_signer_ = std::make_unique<Signer>(attacker.key, kJob, 2, Role::kNode);
    raw_ = std::make_unique<RawTlsClient>(server_->port(), &attacker, attacker.ca_certificate_der);
    EXPECT_FALSE(raw_->connect());
    EXPECT_FALSE(raw_->exchange_hello(*attacker_signer_, 2));
    EXPECT_TRUE(server_->wait_connected(2, 3000ms).ok());
  }
  Transport& server() override { return *server_; }
  Transport& honest() override { return *honest_; }
  TlsTransport& tls_server() { return *server_; }
  TlsTransport& tls_honest() { return *honest_; }
  RawTlsClient& raw() { return *raw_; }
  void attacker_send(const std::vector<std::uint8_t>& bytes) override { ASSERT_FALSE(raw_->write(bytes)); }
  void attacker_close() override { raw_->close(); }

 private:
  std::unique_ptr<TlsTransport> server_, honest_;
  std::unique_ptr<RawTlsClient> raw_;
};

}  // namespace ballot::transport::testing
