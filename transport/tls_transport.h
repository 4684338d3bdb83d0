// TlsTransport: the Transport interface over TCP with mutual TLS 1.3 (Asio + OpenSSL).
//
// Session life: connect (dialler) -> TLS 1.3 handshake, both sides presenting certificates of the
// cluster CA -> the peer certificate's ballot:// identity must be in the pinned registry with the
// same role and the same public key -> each side sends a signed Hello claiming its id, which must
// equal the certificate's (and, for the dialler, the id it dialled) -> frames both ways.
// Each session runs on its own strand; every operation has a deadline (connect, handshake + Hello,
// each frame from its first byte to its last, each write, shutdown). Each peer has a bounded send
// queue that survives reconnects: while the peer has a session and the queue is full, a
// one-per-round frame already queued (same round and payload) is not queued twice, and frames of
// rounds two or more before the new one's (not control frames) are dropped, oldest first, until
// there is room; otherwise send() waits for room up to send_timeout (back-pressure). While it has
// none, the oldest queued round frames (and an older state transfer, for a newer one) are dropped
// to make room, so a peer that is gone costs its senders no time; control frames and the newest
// state are kept. Reading pauses while the inbox is full.
// A dialled peer is redialled with exponential back-off after any failure. No exception escapes
// an I/O handler; a failing session is closed, counted and reported, and the others carry on.
//
// Connections: each endpoint listens (unless listen = false) and dials the peers in `dial`. Dial
// each pair from one side only (e.g. nodes dial the server; between nodes, the lower id dials).
//
// One session per identity: a second authenticated session for a peer whose session is live
// (a frame from it within session_takeover_after) is refused right after the handshake and
// reported as kDuplicateSession; none of its frames is read. The live session is untouched, so
// the process that holds the id keeps voting while another process with the same key knocks.
// A session silent for longer (its process hung, or its host died without closing the
// connection) is replaced by the newcomer. Each new session of a peer starts fresh sequence
// windows (Verifier::forget_sequences), so whoever holds the id next is not taken for a replayer.
//
// Admission before authentication: an accepted connection must send its first byte within
// first_byte_timeout and finish the TLS handshake and Hello within handshake_timeout. At most
// max_pending_handshakes are pending at once, at most max_pending_per_source from one address.
// A connection beyond either limit is admitted by evicting one: one of its own address's when that
// address is at its limit, else anyone's; a connection that has not sent a byte first, then one
// from the address holding the most, then the oldest. So a peer with a valid certificate, which
// sends its ClientHello at once and completes in one round trip, is never pushed out by idle
// sockets (from any number of addresses); only by connections that send bytes, newer than its own
// and as many as the limit they fill, arriving before its handshake ends.
//
// kInsecurePlaintext uses plain TCP, unsigned frames and trusts the peer's claimed id. It exists
// only to measure what security costs (bench/transport) through the same code; never deploy it.
//
// Thread-safety: all member functions may be called from any thread, except that the destructor
// and close() must not run inside an observer callback.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "transport/pki.h"
#include "transport/transport.h"

namespace ballot::transport {

enum class ChannelSecurity : std::uint8_t {
  kMutualTls,          // the default, and the only mode fit for use
  kInsecurePlaintext,  // benchmarks only: no TLS, no signatures, claimed ids trusted
};

struct PeerAddress {
  std::string host;  // name or address
  std::uint16_t port = 0;
};

struct TlsTransportOptions {
  TransportOptions transport;
  std::string listen_host = "127.0.0.1";
  std::uint16_t listen_port = 0;  // 0: an ephemeral port (see TlsTransport::port())
  bool listen = true;
  std::map<NodeId, PeerAddress> dial;  // peers this endpoint connects to
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds handshake_timeout{3000};   // TLS handshake and Hello exchange together
  std::chrono::milliseconds first_byte_timeout{1000};  // accepted connection: until its first byte
  std::chrono::milliseconds frame_timeout{30000};      // from a frame's first byte to its last
  std::chrono::milliseconds write_timeout{30000};      // one frame
  std::chrono::milliseconds shutdown_timeout{1000};
  std::chrono::milliseconds idle_timeout{0};                // between frames; 0 = no limit
  std::chrono::milliseconds reconnect_initial{50};          // doubled after each failure ...
  std::chrono::milliseconds reconnect_max{2000};            // ... up to this
  std::size_t max_pending_handshakes = 64;                  // unauthenticated connections at once
  std::size_t max_pending_per_source = 8;                   // of which from one address
  std::chrono::milliseconds session_takeover_after{15000};  // see "One session per identity"
  std::size_t read_chunk_bytes = 4u << 20;                  // payload buffers grow by this as bytes arrive
  int io_threads = 1;
  ChannelSecurity security = ChannelSecurity::kMutualTls;
};

class TlsTransport final : public Transport {
 public:
  // Binds the listening socket (errors: kIo naming the address) and starts dialling.
  static Result<std::unique_ptr<TlsTransport>> create(Credentials credentials, Registry registry,
                                                      TlsTransportOptions options);
  ~TlsTransport() override;  // close()

  NodeId self() const override;
  OutboundFrame seal(MessageType type, std::uint64_t round,
                     std::shared_ptr<const std::vector<std::uint8_t>> payload) override;
  Status send_frame(NodeId to, OutboundFrame frame) override;
  Result<Message> receive(std::chrono::milliseconds timeout) override;
  const FrameLimits& limits() const override;
  void set_round(std::uint64_t round) override;
  void reset_round(std::uint64_t round) override;
  MisbehaviourCounts misbehaviour_counts(NodeId peer) const override;
  Status check_relayed(const SignedEnvelope& envelope, ByteSpan payload) const override;

  std::uint16_t port() const;  // the bound listening port
  bool connected(NodeId peer) const;
  // Why the last attempt to dial `peer` failed ("cannot resolve 'host': …", "cannot connect to
  // host:port: …", a refused handshake); empty when none failed since a session last delivered.
  std::string dial_error(NodeId peer) const;
  // Waits until an authenticated session with `peer` exists; kTimeout otherwise.
  Status wait_connected(NodeId peer, std::chrono::milliseconds timeout) const;
  // Closes the current session with `peer` (a dialled peer is redialled after the back-off).
  void disconnect(NodeId peer);
  // Graceful TLS shutdown of every session (bounded by shutdown_timeout), then stops the I/O
  // threads. Idempotent. Blocked send()/receive() calls return kUnavailable.
  void close();

  class Impl;

 private:
  explicit TlsTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ballot::transport
