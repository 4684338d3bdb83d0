#include "transport/tls_transport.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <array>
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "core/byte_io.h"
#include "transport/detail/endpoint.h"
#include "transport/detail/ossl.h"
#include "transport/detail/tls_stream.h"

namespace ballot::transport {

namespace {

using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using SslStream = detail::TlsStream;

// The wait before the next accept after one failed (accept_next).
constexpr std::chrono::milliseconds kAcceptRetry{50};

// The sessions' common face, so that the transport can hold plain and TLS sessions alike.
class SessionBase : public std::enable_shared_from_this<SessionBase> {
 public:
  virtual ~SessionBase() = default;
  virtual void start() = 0;
  virtual void pump_async() = 0;      // write queued frames (any thread)
  virtual void close_async() = 0;     // abrupt close (any thread)
  virtual void shutdown_async() = 0;  // graceful close with deadline (any thread)
  virtual void evict_async() = 0;     // close unless it authenticated meanwhile (any thread)
};

// One per registered peer for the transport's whole life. Lock order: Impl::mutex_ before
// Link::mutex; neither is held while calling into a session or the observer.
struct Link {
  explicit Link(NodeId id, asio::io_context& io) : peer(id), reconnect_timer(io) {}
  const NodeId peer;
  std::mutex mutex;
  std::condition_variable space;
  std::deque<OutboundFrame> queue;
  std::size_t queued_bytes = 0;
  std::shared_ptr<SessionBase> session;  // the authenticated session, if any
  std::optional<PeerAddress> address;    // set when this side dials the peer
  int failures = 0;                      // consecutive dial failures, for the back-off
  std::string dial_error;                // why the last dial failed; cleared once a session delivers
  asio::steady_timer reconnect_timer;
  // When the current session last delivered a frame (steady clock ticks): how a second session
  // claiming this peer tells a live session from a dead one (attach()).
  std::atomic<Clock::rep> last_heard{0};
};

std::string ssl_error_text(const asio::error_code& ec) {
  std::string text = ec.message();
  // The verification reason (e.g. "certificate verify failed") is more useful than the category.
  if (ec.category() == asio::error::get_ssl_category()) {
    char buffer[256];
    ERR_error_string_n(static_cast<unsigned long>(ec.value()), buffer, sizeof(buffer));
    text = buffer;
  }
  return text;
}

bool is_clean_end(const asio::error_code& ec) {
  return ec == asio::error::eof || ec == asio::ssl::error::stream_truncated || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe;
}

}  // namespace

class TlsTransport::Impl {
 public:
  Impl(Credentials credentials, Registry registry, TlsTransportOptions options);
  ~Impl();
  Status start();
  void close();

  template <typename Stream>
  friend class Session;

  // Members used by sessions.
  asio::io_context io_;  // first: destroyed last, after everything holding asio objects
  std::optional<asio::ssl::context> ssl_;
  tcp::acceptor acceptor_;
  // Paces accepts after a failed one (accept_next); used only by the accept chain, which has one
  // operation outstanding at a time. close() need not cancel it: it fires once and sees closing_.
  asio::steady_timer accept_retry_{io_};
  const TlsTransportOptions options_;
  const Credentials credentials_;
  detail::EndpointCore core_;
  std::atomic<bool> closing_{false};

  // Accepted connections not yet authenticated (TlsTransportOptions: admission).
  struct PendingHandshake {
    const SessionBase* session = nullptr;
    std::weak_ptr<SessionBase> handle;
    asio::ip::address source;
    Clock::time_point since;
    bool started = false;  // its first byte arrived: a handshake is under way
    int fd = -1;           // the socket, to ask the kernel whether bytes wait unread
  };
  std::mutex pending_mutex_;  // leaf lock; guards pending_
  std::vector<PendingHandshake> pending_;

  mutable std::mutex mutex_;  // guards sessions_; links_ is immutable after construction
  mutable std::condition_variable connected_;
  std::set<std::shared_ptr<SessionBase>> sessions_;
  std::map<NodeId, std::shared_ptr<Link>> links_;
  std::vector<std::thread> threads_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::minstd_rand jitter_;  // guarded by mutex_

  std::shared_ptr<Link> link(NodeId peer) const {
    const auto it = links_.find(peer);
    return it == links_.end() ? nullptr : it->second;
  }
  void accept_next();
  void dial(const std::shared_ptr<Link>& link);
  void schedule_redial(const std::shared_ptr<Link>& link);
  // Makes `session` the peer's session unless another one is live; false: refused.
  bool attach(NodeId peer, const std::shared_ptr<SessionBase>& session);
  void heard(Link& link, bool first);
  // Admission of an accepted connection: registers it and evicts one pending handshake when a
  // limit is reached (closed by the caller, outside the lock).
  std::shared_ptr<SessionBase> admit(const std::shared_ptr<SessionBase>& session, const asio::ip::address& source,
                                     int fd);
  void pending_started(const SessionBase* session);
  void pending_done(const SessionBase* session);
  void session_closed(const std::shared_ptr<SessionBase>& session, std::optional<NodeId> peer,
                      const std::shared_ptr<Link>& dialled, bool authenticated);
  template <typename Stream>
  std::shared_ptr<SessionBase> make_session(Stream stream, std::shared_ptr<Link> dialled);
};

// ---------------------------------------------------------------------------------------------
// A session over one connection. Everything below runs on the session's strand (the executor of
// its socket and timers), except the *_async entry points, which post onto it.
template <typename Stream>
class Session final : public SessionBase {
  static constexpr bool kTls = std::is_same_v<Stream, SslStream>;

 public:
  Session(TlsTransport::Impl& impl, Stream stream, std::shared_ptr<Link> dialled)
      : impl_(impl),
        stream_(std::move(stream)),
        read_timer_(stream_.get_executor()),
        write_timer_(stream_.get_executor()),
        dialled_(std::move(dialled)) {}

  void start() override {
    asio::post(stream_.get_executor(), [self = self()] { self->guard([&] { self->begin(); }); });
  }
  void pump_async() override {
    asio::post(stream_.get_executor(), [self = self()] { self->guard([&] { self->pump(); }); });
  }
  void close_async() override {
    asio::post(stream_.get_executor(), [self = self()] { self->guard([&] { self->close_now(); }); });
  }
  void shutdown_async() override {
    asio::post(stream_.get_executor(), [self = self()] { self->guard([&] { self->shutdown(); }); });
  }
  void evict_async() override {
    asio::post(stream_.get_executor(), [self = self()] {
      self->guard([&] {
        if (!self->authenticated_) self->close_now();
      });
    });
  }

 private:
  std::shared_ptr<Session> self() { return std::static_pointer_cast<Session>(shared_from_this()); }
  tcp::socket& socket() {
    if constexpr (kTls)
      return stream_.next_layer();
    else
      return stream_;
  }
  const TlsTransportOptions& options() const { return impl_.options_; }
  // Who to blame: the authenticated peer, else the certificate's (CA-verified) identity.
  std::optional<NodeId> blame() const { return peer_ ? peer_ : cert_peer_; }

  // No exception escapes a handler: anything thrown (e.g. bad_alloc) closes this session only.
  template <typename F>
  void guard(F&& body) {
    try {
      body();
    } catch (const std::exception& e) {
      fail(Misbehaviour::kMalformedFrame, make_error(ErrorCode::kInternal, std::string("session error: ") + e.what()),
           /*report=*/false);
    } catch (...) {
      fail(Misbehaviour::kMalformedFrame, make_error(ErrorCode::kInternal, "session error"), false);
    }
  }

  // ---- deadlines: a generation number makes a late or cancelled expiry harmless ----
  void arm(asio::steady_timer& timer, std::uint64_t& generation, std::chrono::milliseconds after, Misbehaviour kind,
           std::string what) {
    const std::uint64_t armed = ++generation;
    timer.expires_after(after);
    timer.async_wait(
        [self = self(), &generation, armed, kind, what = std::move(what), after](const asio::error_code& ec) {
          self->guard([&] {
            if (ec || armed != generation || self->closed_) return;
            self->fail(
                kind, make_error(ErrorCode::kTimeout,
                                 what + " deadline of " + std::to_string(after.count()) + " ms passed", self->blame()));
          });
        });
  }
  void disarm(asio::steady_timer& timer, std::uint64_t& generation) {
    ++generation;
    timer.cancel();
  }

  // ---- connect (dialler) ----
  void begin() {
    if (impl_.closing_) return close_now();
    if (!dialled_) return await_first_byte();
    resolver_.emplace(stream_.get_executor());
    arm(read_timer_, read_generation_, options().connect_timeout, Misbehaviour::kTimeout, "connect");
    const PeerAddress address = *dialled_->address;
    resolver_->async_resolve(address.host, std::to_string(address.port),
                             [self = self()](const asio::error_code& ec, tcp::resolver::results_type results) {
                               self->guard([&] { self->on_resolve(ec, std::move(results)); });
                             });
  }
  void on_resolve(const asio::error_code& ec, tcp::resolver::results_type results) {
    if (closed_) return;
    const PeerAddress& address = *dialled_->address;
    if (ec) {
      note_dial_error("cannot resolve '" + address.host + "': " + ec.message());
      return fail_quietly();
    }
    asio::async_connect(socket(), results, [self = self()](const asio::error_code& error, const tcp::endpoint&) {
      self->guard([&] {
        if (self->closed_) return;
        if (error) {
          const PeerAddress& to = *self->dialled_->address;
          self->note_dial_error("cannot connect to " + to.host + ":" + std::to_string(to.port) + ": " +
                                error.message());
          return self->fail_quietly();
        }
        self->handshake();
      });
    });
  }
  // Why dialling failed, for TlsTransport::dial_error (the operator's "why is nothing happening").
  void note_dial_error(std::string text) {
    if (!dialled_) return;
    std::lock_guard<std::mutex> lock(dialled_->mutex);
    dialled_->dial_error = std::move(text);
  }

  // ---- accepted connection: its first byte, under a short deadline, before any TLS work ----
  void await_first_byte() {
    asio::error_code ec;
    if (socket().available(ec) > 0 && !ec) return first_byte();
    arm(read_timer_, read_generation_, options().first_byte_timeout, Misbehaviour::kTimeout, "first byte");
    socket().async_wait(tcp::socket::wait_read, [self = self()](const asio::error_code& error) {
      self->guard([&] {
        if (self->closed_) return;
        if (error) return self->close_now();
        self->first_byte();
      });
    });
  }
  void first_byte() {
    if (pending_) impl_.pending_started(this);
    handshake();
  }

  // ---- TLS handshake + Hello exchange, under one deadline ----
  void handshake() {
    asio::error_code ignored;
    socket().set_option(tcp::no_delay(true), ignored);
    arm(read_timer_, read_generation_, options().handshake_timeout, Misbehaviour::kTimeout, "handshake");
    if constexpr (kTls) {
      stream_.async_handshake(dialled_ != nullptr, [self = self()](const asio::error_code& ec) {
        self->guard([&] { self->on_handshake(ec); });
      });
    } else {
      on_handshake({});
    }
  }

  void on_handshake(const asio::error_code& ec) {
    if (closed_) return;
    if (ec)
      return fail(Misbehaviour::kHandshakeFailed,
                  make_error(ErrorCode::kAuthentication, "TLS handshake failed: " + ssl_error_text(ec)));
    if constexpr (kTls) {
      if (!check_certificate()) return;
    }
    write(impl_.core_.hello());
    read_header();
  }

  // The peer certificate (already verified against the CA by OpenSSL) must name a registered
  // participant with the registered role and the pinned key; a dialler also checks it reached
  // the peer it dialled. The certificate's id is the peer's identity, and blamed, only once all of
  // that holds: a second certificate the CA issued for an id (leaked, mis-issued or superseded), or
  // a connection forwarded to another node, must not get that id's node counted.
  bool check_certificate() {
    X509* cert = SSL_get0_peer_certificate(stream_.native_handle());
    if (cert == nullptr) {
      fail(Misbehaviour::kHandshakeFailed, make_error(ErrorCode::kAuthentication, "peer presented no certificate"));
      return false;
    }
    auto identity = detail::certificate_identity(cert);
    if (!identity.ok()) {
      fail(Misbehaviour::kHandshakeFailed, identity.error());
      return false;
    }
    const RegistryEntry* entry = impl_.core_.verifier().registry().find(identity->node);
    if (entry == nullptr || entry->role != identity->role) {
      fail(Misbehaviour::kUnknownSender,
           make_error(ErrorCode::kAuthentication, "certificate for " + std::string(role_name(identity->role)) + " " +
                                                      std::to_string(identity->node) + " is not in the registry"));
      return false;
    }
    PublicKeyBytes key{};
    std::size_t length = key.size();
    EVP_PKEY* pkey = X509_get0_pubkey(cert);
    if (pkey == nullptr || EVP_PKEY_get_raw_public_key(pkey, key.data(), &length) != 1 || key != entry->key.bytes()) {
      ERR_clear_error();
      fail(Misbehaviour::kIdentityMismatch,
           make_error(ErrorCode::kAuthentication,
                      "certificate key of node " + std::to_string(identity->node) +
                          " differs from the pinned key (a second certificate for that id; node " +
                          std::to_string(identity->node) + " is not blamed)"));
      return false;
    }
    // The node that answered did not claim to be the one dialled (the address is stale, or
    // something forwarded the connection): nobody is blamed.
    if (dialled_ && identity->node != dialled_->peer) {
      fail(Misbehaviour::kIdentityMismatch,
           make_error(ErrorCode::kAuthentication, "dialled node " + std::to_string(dialled_->peer) +
                                                      " but its certificate names node " +
                                                      std::to_string(identity->node) + " (not blamed)"));
      return false;
    }
    cert_peer_ = identity->node;
    return true;
  }

  // The first frame on a session must be the peer's Hello.
  void on_hello() {
    NodeId claimed = 0;
    if (header_.is_signed()) {
      auto envelope = decode_envelope(meta_span());
      if (!envelope.ok()) return fail(Misbehaviour::kMalformedFrame, envelope.error());
      if (envelope->header.type != MessageType::kHello || envelope->header.payload_length != payload_.size())
        return fail(Misbehaviour::kMalformedFrame, make_error(ErrorCode::kMalformed, "malformed hello"));
      claimed = envelope->header.sender;
      if constexpr (kTls) {
        // Identity first: a valid certificate of node 3 claiming node 4 is an identity mismatch,
        // whatever the signature says.
        Verdict verdict = impl_.core_.verifier().verify_authentic(*envelope, payload_, cert_peer_);
        if (!verdict.ok()) return fail(verdict.kind, std::move(verdict.status).error());
      }
    } else if (impl_.core_.require_signatures()) {
      return fail(Misbehaviour::kMalformedFrame, make_error(ErrorCode::kAuthentication, "unsigned hello"));
    }
    ByteReader reader(payload_, "hello payload");
    const auto id = reader.read<std::uint32_t>("node id");
    if (!id.ok() || !reader.expect_end().ok())
      return fail(Misbehaviour::kMalformedFrame, make_error(ErrorCode::kMalformed, "malformed hello payload"));
    if (*id != claimed) {
      if (header_.is_signed())
        return fail(Misbehaviour::kMalformedFrame, make_error(ErrorCode::kMalformed, "malformed hello payload"));
      claimed = *id;  // plaintext mode: the claim is all there is
    }
    if (!kTls) {
      const RegistryEntry* entry = impl_.core_.verifier().registry().find(claimed);
      if (entry == nullptr || claimed == impl_.core_.self())
        return fail(Misbehaviour::kUnknownSender,
                    make_error(ErrorCode::kAuthentication, "hello from unknown node " + std::to_string(claimed)));
      if (dialled_ && claimed != dialled_->peer)
        return fail(Misbehaviour::kIdentityMismatch,
                    make_error(ErrorCode::kAuthentication, "dialled node " + std::to_string(dialled_->peer) +
                                                               " but it says it is node " + std::to_string(claimed)));
    }
    if (!impl_.attach(claimed, shared_from_this()))
      return fail(
          Misbehaviour::kDuplicateSession,
          make_error(ErrorCode::kAuthentication,
                     "node " + std::to_string(claimed) + " already has a live session; this second one is refused",
                     claimed));
    peer_ = claimed;
    authenticated_ = true;
    disarm(read_timer_, read_generation_);
    if (pending_) {
      impl_.pending_done(this);
      pending_ = false;
    }
    link_ = impl_.link(claimed);
    pump();
    read_header();
  }

  // ---- reading: header (24 bytes, validated), then envelope and payload ----
  void read_header() {
    if (closed_) return;
    if (authenticated_ && !impl_.core_.has_space()) {
      // Back-pressure towards the peer: stop reading until the consumer makes room; TCP flow
      // control then slows the sender.
      std::weak_ptr<SessionBase> weak = shared_from_this();
      impl_.core_.when_space([weak] {
        if (auto session = weak.lock()) static_cast<Session&>(*session).resume_async();
      });
      return;
    }
    header_have_ = 0;
    if (authenticated_ && options().idle_timeout.count() > 0)
      arm(read_timer_, read_generation_, options().idle_timeout, Misbehaviour::kTimeout, "idle");
    read_header_some();
  }
  void resume_async() {
    asio::post(stream_.get_executor(), [self = self()] { self->guard([&] { self->read_header(); }); });
  }
  void read_header_some() {
    stream_.async_read_some(asio::buffer(header_bytes_.data() + header_have_, kFrameHeaderSize - header_have_),
                            [self = self()](const asio::error_code& ec, std::size_t n) {
                              self->guard([&] { self->on_header_bytes(ec, n); });
                            });
  }
  void on_header_bytes(const asio::error_code& ec, std::size_t n) {
    if (closed_) return;
    if (ec) return on_read_error(ec);
    // The frame deadline runs from a frame's first byte to its last (before authentication the
    // handshake deadline covers the Hello).
    if (header_have_ == 0 && n > 0 && authenticated_)
      arm(read_timer_, read_generation_, options().frame_timeout, Misbehaviour::kTimeout, "frame");
    header_have_ += n;
    if (header_have_ < kFrameHeaderSize) return read_header_some();
    auto header = decode_frame_header(header_bytes_, impl_.core_.options().limits);
    if (!header.ok()) {
      Error error = std::move(header).error();
      error.peer = blame();
      return fail(error.code == ErrorCode::kLimitExceeded ? Misbehaviour::kOversize : Misbehaviour::kMalformedFrame,
                  std::move(error));
    }
    header_ = *header;
    if (!authenticated_ && header_.type != MessageType::kHello)
      return fail(Misbehaviour::kMalformedFrame,
                  make_error(ErrorCode::kMalformed, "first frame is not a hello", blame()));
    // A type the peer's role never sends (a node's 1 GiB "state transfer") ends the session
    // before a byte of its payload is buffered.
    if (authenticated_) {
      if (auto permitted = impl_.core_.permits(*peer_, header_.type); !permitted.ok())
        return fail(Misbehaviour::kNotPermitted, std::move(permitted).error());
    }
    payload_have_ = 0;
    payload_.clear();
    payload_.shrink_to_fit();
    digester_.reset(header_.payload_length);
    read_meta(0);
  }
  void read_meta(std::size_t have) {
    if (have == header_.meta_length) return read_payload();
    stream_.async_read_some(asio::buffer(meta_bytes_.data() + have, header_.meta_length - have),
                            [self = self(), have](const asio::error_code& ec, std::size_t n) {
                              self->guard([&] {
                                if (self->closed_) return;
                                if (ec) return self->on_read_error(ec);
                                self->read_meta(have + n);
                              });
                            });
  }
  // The payload buffer grows by at most read_chunk_bytes ahead of the bytes that arrived, so an
  // announced length (already within the limit) never costs memory the peer did not send.
  // Reads go straight into it, kReadWindow at a time; after each, the complete 16 KiB leaves of
  // a signed payload are hashed while they are still in cache (PayloadDigester), so verifying
  // costs no second pass over the payload.
  static constexpr std::size_t kReadWindow = 16 * kPayloadLeafSize;  // one group of the 16-lane hash
  void read_payload() {
    if (payload_have_ == header_.payload_length) return on_frame();
    if (payload_.size() == payload_have_) {
      const std::uint64_t remaining = header_.payload_length - payload_have_;
      payload_.resize(payload_have_ +
                      static_cast<std::size_t>(std::min<std::uint64_t>(remaining, options().read_chunk_bytes)));
    }
    const std::size_t window = std::min(payload_.size() - static_cast<std::size_t>(payload_have_), kReadWindow);
    stream_.async_read_some(asio::buffer(payload_.data() + payload_have_, window),
                            [self = self()](const asio::error_code& ec, std::size_t n) {
                              self->guard([&] {
                                if (self->closed_) return;
                                self->payload_have_ += n;
                                if (ec) return self->on_read_error(ec);
                                if (self->header_.is_signed() && self->authenticated_)
                                  self->digester_.update(ByteSpan(self->payload_.data(), self->payload_have_));
                                self->read_payload();
                              });
                            });
  }
  ByteSpan meta_span() const { return ByteSpan(meta_bytes_.data(), header_.meta_length); }

  void on_frame() {
    header_have_ = 0;
    if (!authenticated_) return on_hello();
    disarm(read_timer_, read_generation_);
    std::optional<Digest> digest;
    if (header_.is_signed()) digest = digester_.finish(payload_);
    const auto rejected =
        impl_.core_.accept(*peer_, header_, meta_span(), std::move(payload_), digest ? &*digest : nullptr);
    payload_ = {};
    if (rejected && detail::closes_session(*rejected)) return close_now();
    if (!rejected && link_) {
      impl_.heard(*link_, !heard_any_);
      heard_any_ = true;
    }
    read_header();
  }

  void on_read_error(const asio::error_code& ec) {
    const bool mid_frame = header_have_ > 0;
    if (!authenticated_) {
      // The connection ended during the handshake or before the Hello. Nobody is blamed: on the
      // dialling side this is usually the other end refusing *us*.
      impl_.core_.report(
          std::nullopt, Misbehaviour::kHandshakeFailed,
          make_error(ErrorCode::kAuthentication, "connection ended before authentication: " + ssl_error_text(ec)));
      note_dial_error("the peer ended the connection before authentication (it refused this side's certificate?): " +
                      ssl_error_text(ec));
      return close_now();
    }
    if (mid_frame)
      return fail(
          Misbehaviour::kTruncated,
          make_error(ErrorCode::kMalformed, "connection ended inside a frame (" + ssl_error_text(ec) + ")", peer_));
    (void)is_clean_end(ec);  // a clean end between frames: the peer left, nothing to report
    close_now();
  }

  // ---- writing: one frame at a time from the link's queue ----
  void pump() {
    if (closed_ || writing_ || !authenticated_ || !link_) return;
    OutboundFrame frame;
    {
      std::lock_guard<std::mutex> lock(link_->mutex);
      if (link_->queue.empty()) return;
      frame = std::move(link_->queue.front());
      link_->queue.pop_front();
      link_->queued_bytes -= frame.size();
    }
    link_->space.notify_all();
    write(std::move(frame));
  }
  bool queued() {
    if (!authenticated_ || !link_) return false;
    std::lock_guard<std::mutex> lock(link_->mutex);
    return !link_->queue.empty();
  }
  void write(OutboundFrame frame) {
    writing_ = true;
    outgoing_ = std::move(frame);
    arm(write_timer_, write_generation_, options().write_timeout, Misbehaviour::kTimeout, "write");
    std::array<asio::const_buffer, 2> buffers{
        asio::buffer(outgoing_.head), outgoing_.payload ? asio::buffer(*outgoing_.payload) : asio::const_buffer()};
    auto done = [self = self()](const asio::error_code& ec, std::size_t) {
      self->guard([&] {
        self->disarm(self->write_timer_, self->write_generation_);
        self->writing_ = false;
        self->outgoing_ = {};
        if (self->closed_) return;
        if (ec) return self->fail_quietly();
        self->pump();
        if (self->draining_ && !self->writing_) self->shutdown();
      });
    };
    if constexpr (kTls)
      stream_.async_write(buffers, std::move(done));
    else
      asio::async_write(stream_, buffers, std::move(done));
  }

  // ---- ending ----
  void fail(Misbehaviour kind, Error error, bool report = true) {
    if (closed_) return;
    if (!authenticated_) note_dial_error(error.message);  // the attempt failed, not a session
    if (report) impl_.core_.report(error.peer ? error.peer : blame(), kind, std::move(error));
    close_now();
  }
  void fail_quietly() { close_now(); }  // our own connect/write failures: not the peer's fault to count

  void close_now() {
    if (closed_) return;
    closed_ = true;
    disarm(read_timer_, read_generation_);
    disarm(write_timer_, write_generation_);
    if (resolver_) resolver_->cancel();
    if (pending_) {  // before the close: the admission list reads the descriptor number it holds
      impl_.pending_done(this);
      pending_ = false;
    }
    asio::error_code ignored;
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
    impl_.session_closed(shared_from_this(), peer_, dialled_, authenticated_);
  }

  void shutdown() {
    if (closed_) return;
    // Frames already queued for the peer (a server's last decision and Finish) go out first; the
    // write that empties the queue calls shutdown() again. Impl::close bounds the wait.
    draining_ = true;
    if (writing_ || queued()) return pump();
    if constexpr (kTls) {
      if (authenticated_) {
        arm(write_timer_, write_generation_, options().shutdown_timeout, Misbehaviour::kTimeout, "shutdown");
        stream_.async_shutdown([self = self()](const asio::error_code&) { self->guard([&] { self->close_now(); }); });
        return;
      }
    }
    close_now();
  }

 public:
  bool pending_ = false;  // accepted, counted in Impl::pending_ until authenticated or closed

 private:
  TlsTransport::Impl& impl_;
  Stream stream_;
  asio::steady_timer read_timer_;
  asio::steady_timer write_timer_;
  std::uint64_t read_generation_ = 0;
  std::uint64_t write_generation_ = 0;
  std::optional<tcp::resolver> resolver_;
  const std::shared_ptr<Link> dialled_;  // set for the dialling side
  std::shared_ptr<Link> link_;           // set once authenticated
  std::optional<NodeId> cert_peer_;      // the certificate's id, once checked (pinned key, id dialled)
  std::optional<NodeId> peer_;           // set once authenticated
  bool authenticated_ = false;
  bool heard_any_ = false;  // a frame of this session was accepted
  bool closed_ = false;
  bool writing_ = false;
  bool draining_ = false;  // shutting down once the queued frames are written
  OutboundFrame outgoing_;
  std::array<std::uint8_t, kFrameHeaderSize> header_bytes_{};
  std::size_t header_have_ = 0;
  FrameHeader header_;
  std::array<std::uint8_t, kEnvelopeMetaSize> meta_bytes_{};
  PayloadBytes payload_;  // resize() leaves bytes uninitialised: the reads fill them
  std::uint64_t payload_have_ = 0;
  PayloadDigester digester_;
};

}  // namespace ballot::transport

namespace ballot::transport {

namespace {

constexpr std::size_t kTlsReadBuffer = 64 * 1024;  // measured best of 32, 64, 256 KiB (RESULTS.md)

Result<asio::ssl::context> make_tls_context(const Credentials& credentials) {
  asio::ssl::context context(asio::ssl::context::tls);
  SSL_CTX* ctx = context.native_handle();
  // TLS 1.3 only; no session tickets or cache (every session authenticates with certificates).
  bool ok =
      SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) == 1 &&
      SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) == 1 &&
      SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") == 1;
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(ctx, 0);  // TLS 1.3 would otherwise still send tickets after the handshake
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  // The sessions' TLS stream (detail/tls_stream.h) lets OpenSSL read the socket itself: with
  // read-ahead one recv() fills up to kTlsReadBuffer of records, decrypted in place. Writes may
  // complete in parts (non-blocking socket) and resume from a moved buffer pointer.
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, kTlsReadBuffer);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_clear_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  auto cert = detail::parse_certificate_der(credentials.certificate_der);
  auto ca = detail::parse_certificate_der(credentials.ca_certificate_der);
  if (!cert.ok() || !ca.ok()) return make_error(ErrorCode::kMalformed, "credentials hold an unreadable certificate");
  ok = ok && SSL_CTX_use_certificate(ctx, cert->get()) == 1 &&
       SSL_CTX_use_PrivateKey(ctx, KeyAccess::pkey(credentials.key)) == 1 && SSL_CTX_check_private_key(ctx) == 1;
  // Trust exactly the cluster CA, nothing from the system store.
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  ok = ok && store != nullptr && X509_STORE_add_cert(store, ca->get()) == 1;
  if (!ok) return make_error(ErrorCode::kInternal, "cannot set up TLS: " + detail::take_openssl_errors());
  X509_VERIFY_PARAM_set_flags(SSL_CTX_get0_param(ctx), X509_V_FLAG_X509_STRICT);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_verify_depth(ctx, 1);  // node certificate -> cluster CA, nothing longer
  return context;
}

LocalIdentity identity_of(const Credentials& credentials) {
  return LocalIdentity{credentials.node, credentials.role, credentials.key};
}

}  // namespace

TlsTransport::Impl::Impl(Credentials credentials, Registry registry, TlsTransportOptions options)
    : acceptor_(io_),
      options_(std::move(options)),
      credentials_(credentials),
      core_(identity_of(credentials), std::move(registry), options_.transport,
            options_.security == ChannelSecurity::kMutualTls),
      jitter_(credentials.node + 1) {
  for (const auto& [id, entry] : core_.verifier().registry().entries()) {
    if (id == credentials_.node) continue;
    auto link = std::make_shared<Link>(id, io_);
    if (const auto it = options_.dial.find(id); it != options_.dial.end()) link->address = it->second;
    links_.emplace(id, std::move(link));
  }
}

TlsTransport::Impl::~Impl() { close(); }

Status TlsTransport::Impl::start() {
  if (options_.io_threads < 1) return make_error(ErrorCode::kInvalidArgument, "io_threads must be at least 1");
  for (const auto& [id, address] : options_.dial)
    if (links_.count(id) == 0)
      return make_error(ErrorCode::kInvalidArgument,
                        "cannot dial node " + std::to_string(id) + ": not in the registry");
  if (options_.security == ChannelSecurity::kMutualTls) {
    auto context = make_tls_context(credentials_);
    if (!context.ok()) return std::move(context).error();
    ssl_.emplace(std::move(context).value());
  }
  if (options_.listen) {
    asio::error_code ec;
    tcp::endpoint endpoint;
    if (const auto address = asio::ip::make_address(options_.listen_host, ec); !ec) {
      endpoint = tcp::endpoint(address, options_.listen_port);
    } else {
      // A host name (a cluster file written from a Slurm node list names hosts). It must resolve
      // (a typo is an error here, not a listener nobody can reach). Other machines reach this one
      // by the name, but on the machine itself a name often resolves to a loopback address
      // (Debian maps the host name to 127.0.1.1), so the listener takes every address of the
      // machine; "localhost" keeps its loopback address.
      tcp::resolver resolver(io_);
      const auto results = resolver.resolve(options_.listen_host, std::to_string(options_.listen_port), ec);
      if (ec || results.empty()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "cannot resolve the listen host '" + options_.listen_host +
                              "': " + (ec ? ec.message() : std::string("no address")) +
                              " (give an address of this machine or a name that resolves to one)");
      }
      endpoint = options_.listen_host == "localhost" ? results.begin()->endpoint()
                                                     : tcp::endpoint(tcp::v6(), options_.listen_port);
    }
    const std::string where = options_.listen_host + ":" + std::to_string(options_.listen_port);
    if (acceptor_.open(endpoint.protocol(), ec);
        ec && endpoint.address().is_v6() && endpoint.address().is_unspecified()) {
      endpoint = tcp::endpoint(tcp::v4(), options_.listen_port);  // a kernel without IPv6
      acceptor_.open(endpoint.protocol(), ec);
    }
    if (ec) return make_error(ErrorCode::kIo, "cannot open " + where + ": " + ec.message());
    if (endpoint.address().is_v6() && endpoint.address().is_unspecified()) {
      acceptor_.set_option(asio::ip::v6_only(false), ec);  // IPv4 too, as IPv4-mapped addresses
    }
    acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (acceptor_.bind(endpoint, ec); ec)
      return make_error(ErrorCode::kIo, "cannot bind " + where + ": " + ec.message());
    if (acceptor_.listen(asio::socket_base::max_listen_connections, ec); ec)
      return make_error(ErrorCode::kIo, "cannot listen on " + where + ": " + ec.message());
    accept_next();
  }
  for (const auto& [id, link] : links_)
    if (link->address) dial(link);
  work_.emplace(io_.get_executor());
  for (int i = 0; i < options_.io_threads; ++i) {
    threads_.emplace_back([this] {
      // OpenSSL writes the TLS sockets itself (detail/tls_stream.h) with write(), which raises
      // SIGPIPE when the peer has gone; blocked here, the write fails with EPIPE instead and
      // the session closes. All socket I/O runs on these threads.
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
      // Handlers do not throw (each is guarded); this loop is the last line of defence.
      for (;;) {
        try {
          io_.run();
          return;
        } catch (...) {
        }
      }
    });
  }
  return {};
}

template <typename Stream>
std::shared_ptr<SessionBase> TlsTransport::Impl::make_session(Stream stream, std::shared_ptr<Link> dialled) {
  auto session = std::make_shared<Session<Stream>>(*this, std::move(stream), std::move(dialled));
  std::lock_guard<std::mutex> lock(mutex_);
  if (closing_) return nullptr;
  sessions_.insert(session);
  return session;
}

void TlsTransport::Impl::accept_next() {
  acceptor_.async_accept(asio::make_strand(io_), [this](const asio::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || closing_ || !acceptor_.is_open()) return;
    if (ec) {
      // Out of descriptors or kernel memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): while a connection
      // waits in the listen queue, another accept fails again at once, so trying again at once
      // would hold an I/O thread in a loop of failures. Try again shortly; the connections
      // already waiting stay queued, and descriptors come free as pending handshakes time out.
      accept_retry_.expires_after(kAcceptRetry);
      accept_retry_.async_wait([this](const asio::error_code& error) {
        if (!error && !closing_) accept_next();
      });
      return;
    }
    // Whatever happens to this connection, the acceptor is armed again below: an exception here
    // (no memory for the connection's TLS state, a socket call that throws) would otherwise leave
    // the server accepting nothing for the rest of its life.
    try {
      asio::error_code error;
      const auto source = socket.remote_endpoint(error).address();
      std::shared_ptr<SessionBase> session;
      const int fd = error ? -1 : socket.native_handle();
      if (error) {
        socket.close(error);  // already gone
      } else if (ssl_) {
        session = make_session(SslStream(std::move(socket), ssl_->native_handle()), nullptr);
        if (session) static_cast<Session<SslStream>&>(*session).pending_ = true;
      } else {
        session = make_session(std::move(socket), nullptr);
        if (session) static_cast<Session<tcp::socket>&>(*session).pending_ = true;
      }
      if (session) {
        if (auto evicted = admit(session, source, fd)) evicted->evict_async();
        session->start();
      }
    } catch (...) {
      // The connection is dropped (its socket closes with the objects that held it).
    }
    accept_next();
  });
}

void TlsTransport::Impl::dial(const std::shared_ptr<Link>& link) {
  if (closing_) return;
  // As in accept_next: a session that cannot be set up (no memory for its TLS state) must not end
  // this link's redials, which only a failing session schedules.
  try {
    tcp::socket socket(asio::make_strand(io_));
    std::shared_ptr<SessionBase> session;
    if (ssl_)
      session = make_session(SslStream(std::move(socket), ssl_->native_handle()), link);
    else
      session = make_session(std::move(socket), link);
    if (session) session->start();
  } catch (...) {
    schedule_redial(link);
  }
}

void TlsTransport::Impl::schedule_redial(const std::shared_ptr<Link>& link) {
  std::chrono::milliseconds delay;
  {
    std::lock_guard<std::mutex> lock(link->mutex);
    const int shift = std::min(link->failures, 20);
    ++link->failures;
    delay = std::min<std::chrono::milliseconds>(options_.reconnect_max, options_.reconnect_initial * (1ll << shift));
  }
  {
    // Jitter in [delay/2, delay]: nodes that lost the server together do not return together.
    std::lock_guard<std::mutex> lock(mutex_);
    delay = delay / 2 + std::chrono::milliseconds(delay.count() > 1 ? jitter_() % (delay.count() / 2 + 1) : 0);
  }
  asio::post(io_, [this, link, delay] {
    link->reconnect_timer.expires_after(delay);
    link->reconnect_timer.async_wait([this, link](const asio::error_code& ec) {
      if (!ec && !closing_) dial(link);
    });
  });
}

bool TlsTransport::Impl::attach(NodeId peer, const std::shared_ptr<SessionBase>& session) {
  auto link = this->link(peer);
  if (!link) return false;
  std::shared_ptr<SessionBase> previous;
  const auto now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(link->mutex);
    const Clock::time_point heard{Clock::duration(link->last_heard.load())};
    if (link->session && link->session != session && now - heard < options_.session_takeover_after) return false;
    previous = std::exchange(link->session, session);
    // The takeover clock of the new session starts now; the back-off resets with its first frame.
    link->last_heard = now.time_since_epoch().count();
  }
  core_.verifier().forget_sequences(peer);
  if (previous && previous != session) previous->close_async();
  {
    std::lock_guard<std::mutex> lock(mutex_);  // pairs with wait_connected's predicate
  }
  connected_.notify_all();
  return true;
}

void TlsTransport::Impl::heard(Link& link, bool first) {
  link.last_heard = Clock::now().time_since_epoch().count();
  if (first) {
    // A session that the other side refuses right after the handshake never gets here, so its
    // dialler keeps backing off instead of knocking every 50 ms.
    std::lock_guard<std::mutex> lock(link.mutex);
    link.failures = 0;
    link.dial_error.clear();
  }
}

std::shared_ptr<SessionBase> TlsTransport::Impl::admit(const std::shared_ptr<SessionBase>& session,
                                                       const asio::ip::address& source, int fd) {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  // A session that is gone without closing (its socket closed with it) no longer holds its number.
  std::erase_if(pending_, [](const PendingHandshake& p) { return p.handle.expired(); });
  std::shared_ptr<SessionBase> evicted;
  const auto from = [&](const asio::ip::address& address) {
    return static_cast<std::size_t>(std::count_if(pending_.begin(), pending_.end(),
                                                  [&](const PendingHandshake& p) { return p.source == address; }));
  };
  // Who makes room: at this address's cap, one of its own; at the global cap, anyone's. Either way
  // a connection that never sent a byte goes first, then the one from the address holding the most,
  // then the oldest — so idle sockets, from one address or from many, never push out a handshake
  // that has started while one of theirs is left. A connection whose first bytes already wait in
  // the kernel counts as started even if its handler has not run yet: under load the I/O thread
  // falls behind a flood of accepts, and an honest dialler that has sent its ClientHello must not
  // be taken for one of the flood's idle sockets.
  const bool own_cap = from(source) >= std::max<std::size_t>(options_.max_pending_per_source, 1);
  if (own_cap || pending_.size() >= std::max<std::size_t>(options_.max_pending_handshakes, 1)) {
    const auto has_started = [](const PendingHandshake& p) {
      if (p.started) return true;
      int waiting = 0;
      return p.fd >= 0 && ::ioctl(p.fd, FIONREAD, &waiting) == 0 && waiting > 0;
    };
    struct Rank {
      bool started;
      std::size_t held;  // by its address
      Clock::time_point since;
      bool before(const Rank& other) const {  // a better victim than `other`
        if (started != other.started) return !started;
        if (held != other.held) return held > other.held;
        return since < other.since;
      }
    };
    auto victim = pending_.end();
    Rank victim_rank{};
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if (own_cap && it->source != source) continue;
      const Rank rank{has_started(*it), from(it->source), it->since};
      if (victim == pending_.end() || rank.before(victim_rank)) {
        victim = it;
        victim_rank = rank;
      }
    }
    if (victim != pending_.end()) {
      evicted = victim->handle.lock();
      pending_.erase(victim);
    }
  }
  pending_.push_back(PendingHandshake{session.get(), session, source, Clock::now(), false, fd});
  return evicted;
}

void TlsTransport::Impl::pending_started(const SessionBase* session) {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  for (auto& p : pending_) {
    if (p.session == session) p.started = true;
  }
}

void TlsTransport::Impl::pending_done(const SessionBase* session) {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  std::erase_if(pending_, [&](const PendingHandshake& p) { return p.session == session; });
}

void TlsTransport::Impl::session_closed(const std::shared_ptr<SessionBase>& session, std::optional<NodeId> peer,
                                        const std::shared_ptr<Link>& dialled, bool authenticated) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sessions_.erase(session);
  }
  if (authenticated && peer) {
    if (auto link = this->link(*peer)) {
      std::lock_guard<std::mutex> lock(link->mutex);
      if (link->session == session) link->session = nullptr;
    }
  }
  if (dialled && !closing_) schedule_redial(dialled);
}

void TlsTransport::Impl::close() {
  if (closing_.exchange(true)) {
    for (auto& thread : threads_)
      if (thread.joinable()) thread.join();
    return;
  }
  std::vector<std::shared_ptr<SessionBase>> sessions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sessions.assign(sessions_.begin(), sessions_.end());
  }
  asio::post(io_, [this] {
    asio::error_code ignored;
    acceptor_.close(ignored);
    for (auto& [id, link] : links_) link->reconnect_timer.cancel();
  });
  for (auto& session : sessions) session->shutdown_async();
  core_.close_inbox();
  // Under each waiter's mutex: a sender between its check of closing_ and its wait would
  // otherwise miss the wake-up and wait out its whole send timeout.
  for (auto& [id, link] : links_) {
    { std::lock_guard<std::mutex> lock(link->mutex); }
    link->space.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    connected_.notify_all();
  }
  work_.reset();
  // Sessions end within shutdown_timeout; whatever is left after that is stopped.
  const auto deadline = Clock::now() + options_.shutdown_timeout + std::chrono::milliseconds(200);
  while (!io_.stopped() && Clock::now() < deadline && !threads_.empty())
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  io_.stop();
  for (auto& thread : threads_)
    if (thread.joinable()) thread.join();
  std::lock_guard<std::mutex> lock(mutex_);
  sessions_.clear();
  for (auto& [id, link] : links_) {
    std::lock_guard<std::mutex> link_lock(link->mutex);
    link->session = nullptr;
  }
}

// ---------------------------------------------------------------------------------------------

Result<std::unique_ptr<TlsTransport>> TlsTransport::create(Credentials credentials, Registry registry,
                                                           TlsTransportOptions options) {
  auto impl = std::make_unique<Impl>(std::move(credentials), std::move(registry), std::move(options));
  BALLOT_TRY(impl->start());
  return std::unique_ptr<TlsTransport>(new TlsTransport(std::move(impl)));
}

TlsTransport::TlsTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TlsTransport::~TlsTransport() { close(); }

NodeId TlsTransport::self() const { return impl_->core_.self(); }

OutboundFrame TlsTransport::seal(MessageType type, std::uint64_t round,
                                 std::shared_ptr<const std::vector<std::uint8_t>> payload) {
  return impl_->core_.seal(type, round, std::move(payload));
}

Status TlsTransport::send_frame(NodeId to, OutboundFrame frame) {
  if (to == self()) return make_error(ErrorCode::kInvalidArgument, "cannot send to self");
  auto link = impl_->link(to);
  if (!link) return make_error(ErrorCode::kNotFound, "node " + std::to_string(to) + " is not in the registry", to);
  const auto& o = impl_->core_.options();
  const std::size_t size = frame.size();
  std::shared_ptr<SessionBase> session;
  {
    std::unique_lock<std::mutex> lock(link->mutex);
    const auto has_room = [&] {
      return impl_->closing_ || (link->queue.size() < o.max_send_queue_frames &&
                                 (link->queue.empty() || link->queued_bytes + size <= o.max_send_queue_bytes));
    };
    // Drops the oldest queued frames `evictable` accepts until there is room (a frame being written
    // is out of the queue already).
    const auto make_room = [&](const auto& evictable) {
      bool evicted = false;
      for (auto it = link->queue.begin(); it != link->queue.end() && !has_room();) {
        if (!evictable(*it)) {
          ++it;
          continue;
        }
        link->queued_bytes -= it->size();
        it = link->queue.erase(it);
        evicted = true;
      }
      if (evicted) link->space.notify_all();  // another sender waiting on this link may fit now
    };
    // No session: nothing drains the queue until the peer is back, so waiting for room would only
    // cost every send send_timeout (each round, for a crashed, cut-off or refused peer). The oldest
    // round-scoped frames (round starts, votes, partition signs, decisions) give way instead, and
    // an older state transfer gives way to a newer one: the protocol brings a peer that missed them
    // up to date itself (a node's Join, the state transfer). Control frames (Join, Finish,
    // evidence) and the newest state never give way; without anything to evict the send waits.
    if (!link->session && !impl_->closing_) {
      const auto type_of = [](const OutboundFrame& queued) {
        return queued.head.size() > 5 ? static_cast<MessageType>(queued.head[5]) : MessageType::kControl;
      };
      const MessageType incoming = type_of(frame);
      const auto evictable = [&](const OutboundFrame& queued) {
        const MessageType type = type_of(queued);
        return type == MessageType::kRoundStart || type == MessageType::kVote || type == MessageType::kPartitionSigns ||
               type == MessageType::kDecision || type == MessageType::kDecisionPiece ||
               type == MessageType::kVotePiece ||
               (type == MessageType::kStateTransfer && incoming == MessageType::kStateTransfer);
      };
      make_room(evictable);
    } else if (!impl_->closing_ && !has_room()) {
      // A session whose peer does not read (slow, or hostile: it could make every send to it, and
      // the sender's loop, wait send_timeout). A one-per-round frame it already has queued, the
      // same payload of the same round (a round start answering another Join), is not queued
      // twice. What it has not read of rounds at least two before this frame's (round frames,
      // pieces, state transfers; never control frames) is stale and goes, oldest first, until
      // there is room: a peer one round behind still gets that round's decision, and a control
      // frame (Finish after the last decision) makes nothing go. Otherwise the send waits, so the
      // bulk sends of one round (state transfers, the benchmark's) keep their back-pressure.
      const auto envelope_of = [](const OutboundFrame& queued) -> std::optional<EnvelopeHeader> {
        if (queued.head.size() != kFrameHeaderSize + kEnvelopeMetaSize) return std::nullopt;
        auto decoded = decode_envelope(ByteSpan(queued.head).subspan(kFrameHeaderSize, kEnvelopeMetaSize));
        if (!decoded.ok()) return std::nullopt;
        return decoded->header;
      };
      const auto incoming = envelope_of(frame);
      if (incoming && one_payload_per_round(incoming->type)) {
        for (const auto& queued_frame : link->queue) {
          const auto queued = envelope_of(queued_frame);
          if (queued && queued->type == incoming->type && queued->round == incoming->round &&
              queued->payload_digest == incoming->payload_digest) {
            return {};  // already on its way
          }
        }
      }
      if (incoming && incoming->type != MessageType::kControl) {
        make_room([&](const OutboundFrame& queued_frame) {
          const auto queued = envelope_of(queued_frame);
          return queued && queued->type != MessageType::kControl && queued->round + 1 < incoming->round;
        });
      }
    }
    if (!link->space.wait_for(lock, o.send_timeout, has_room))
      return make_error(ErrorCode::kTimeout,
                        "send queue to node " + std::to_string(to) + " stayed full for " +
                            std::to_string(o.send_timeout.count()) + " ms",
                        to);
    if (impl_->closing_) return make_error(ErrorCode::kUnavailable, "transport closed");
    link->queue.push_back(std::move(frame));
    link->queued_bytes += size;
    session = link->session;
  }
  if (session) session->pump_async();
  return {};
}

Result<Message> TlsTransport::receive(std::chrono::milliseconds timeout) { return impl_->core_.pop(timeout); }
const FrameLimits& TlsTransport::limits() const { return impl_->core_.options().limits; }
void TlsTransport::set_round(std::uint64_t round) { impl_->core_.verifier().set_round(round); }
void TlsTransport::reset_round(std::uint64_t round) { impl_->core_.verifier().reset_round(round); }
MisbehaviourCounts TlsTransport::misbehaviour_counts(NodeId peer) const { return impl_->core_.counts(peer); }
Status TlsTransport::check_relayed(const SignedEnvelope& envelope, ByteSpan payload) const {
  return impl_->core_.verifier().verify_authentic(envelope, payload, std::nullopt).status;
}

std::uint16_t TlsTransport::port() const {
  asio::error_code ec;
  const auto endpoint = impl_->acceptor_.local_endpoint(ec);
  return ec ? 0 : endpoint.port();
}

bool TlsTransport::connected(NodeId peer) const {
  auto link = impl_->link(peer);
  if (!link) return false;
  std::lock_guard<std::mutex> lock(link->mutex);
  return link->session != nullptr;
}

std::string TlsTransport::dial_error(NodeId peer) const {
  auto link = impl_->link(peer);
  if (!link) return {};
  std::lock_guard<std::mutex> lock(link->mutex);
  return link->dial_error;
}

Status TlsTransport::wait_connected(NodeId peer, std::chrono::milliseconds timeout) const {
  if (!impl_->link(peer))
    return make_error(ErrorCode::kNotFound, "node " + std::to_string(peer) + " is not in the registry");
  std::unique_lock<std::mutex> lock(impl_->mutex_);
  if (!impl_->connected_.wait_for(lock, timeout, [&] { return connected(peer) || impl_->closing_; }))
    return make_error(
        ErrorCode::kTimeout,
        "no session with node " + std::to_string(peer) + " within " + std::to_string(timeout.count()) + " ms", peer);
  if (!connected(peer)) return make_error(ErrorCode::kUnavailable, "transport closed");
  return {};
}

void TlsTransport::disconnect(NodeId peer) {
  auto link = impl_->link(peer);
  if (!link) return;
  std::shared_ptr<SessionBase> session;
  {
    std::lock_guard<std::mutex> lock(link->mutex);
    session = link->session;
  }
  if (session) session->close_async();
}

void TlsTransport::close() { impl_->close(); }

}  // namespace ballot::transport
