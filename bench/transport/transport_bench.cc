// Transport benchmarks, all in one run so that ratios compare like with like:
//   (a) the physical limits: one core's memory read bandwidth (1 GiB probe), SHA-256 bytes/s
//       for one stream and for 16 independent leaves (OpenSSL one by one vs our AVX-512 lanes),
//       the sha256rnds2 latency vs issue time (why multi-buffer SHA-NI does not pay here), the
//       payload tree digest, AES-128-GCM per TLS record, Ed25519 signatures and verifications;
//   (b) the per-message CPU cost of sealing (tree digest + sign) and verifying (verify + tree
//       digest) one 1.4 MB sign vector (11.2M parameters, ResNet-18 size);
//   (c) throughput of 1.4 MB frames between two processes on loopback, through the same
//       TlsTransport code: mutual TLS 1.3 with signed envelopes vs plain TCP without signatures,
//       with the CPU seconds each process spent per GB moved;
//   (d) the server's receive work for one round of n = 8 votes of 1.4 MB (decrypting, hashing
//       while bytes arrive, verifying the signatures) with 1 and 2 I/O threads: the votes wait in
//       the kernel's socket buffers while the server process is stopped, then it is resumed and
//       the time until it holds all n is measured, so the senders' work is not on the cores.
// In (c) each process runs one I/O thread; the sending process also seals on its calling thread.
#include <benchmark/benchmark.h>
#include <openssl/evp.h>

#include "bench/read_probe.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/crypto.h"
#include "transport/detail/sha256_lanes.h"
#include "transport/envelope.h"
#include "transport/pki.h"
#include "transport/tls_transport.h"
#include "transport/verifier.h"

namespace {

using namespace ballot::transport;
using namespace std::chrono_literals;

constexpr std::size_t kSignVectorBytes = 11'200'000 / 8;  // 1.4 MB
constexpr std::size_t kProbeBytes = ballot::bench::kDramProbeBytes;
constexpr int kFramesPerBatch = 32;
constexpr std::uint64_t kJob = 1;

std::vector<std::uint8_t> random_bytes(std::size_t n) {
  std::vector<std::uint8_t> bytes(n);
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (auto& b : bytes) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<std::uint8_t>(x);
  }
  return bytes;
}

double cpu_seconds(int who) {
  rusage usage{};
  getrusage(who, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

// ---- (a) physical limits -------------------------------------------------------------------

void BM_ReadBandwidth(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ballot::bench::read_bandwidth(kProbeBytes, 1));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kProbeBytes));
}
BENCHMARK(BM_ReadBandwidth)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_Sha256(benchmark::State& state) {
  const auto data = random_bytes(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(sha256(data));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.size()));
}
BENCHMARK(BM_Sha256)->Arg(kSignVectorBytes)->Unit(benchmark::kMicrosecond);

// SHA-256 of 16 independent 16 KiB leaves: one by one with OpenSSL (SHA-NI), or all 16 at once
// in the AVX-512 lanes. The multi-stream limit the payload tree uses.
void BM_Sha256Leaves(benchmark::State& state, bool x16) {
  if (x16 && !ballot::transport::detail::sha256_x16_available()) return state.SkipWithError("no AVX-512");
  constexpr std::size_t kLeaves = 16;
  const auto data = random_bytes(kLeaves * kPayloadLeafSize);
  const std::uint8_t* leaves[kLeaves];
  for (std::size_t i = 0; i < kLeaves; ++i) leaves[i] = data.data() + i * kPayloadLeafSize;
  Digest out[kLeaves];
  for (auto _ : state) {
    if (x16) {
      ballot::transport::detail::sha256_x16(leaves, kLeaves, kPayloadLeafSize, out);
    } else {
      for (std::size_t i = 0; i < kLeaves; ++i) out[i] = sha256(ByteSpan(leaves[i], kPayloadLeafSize));
    }
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.size()));
}
BENCHMARK_CAPTURE(BM_Sha256Leaves, openssl_one_by_one, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sha256Leaves, avx512_x16, true)->Unit(benchmark::kMicrosecond);

// Why the tree does not use SHA-NI in several lanes: the issue rate of sha256rnds2 against its
// latency. `chains` independent dependency chains of sha256rnds2; the time per instruction falls
// from the latency (1 chain) to the issue limit (many chains). Multi-buffer SHA-NI can gain at
// most latency / issue time over one stream.
#if defined(__x86_64__)
template <int kChains>
__attribute__((target("sha,sse4.1"))) __m128i sha_rounds(std::int64_t iterations) {
  __m128i a[kChains], b[kChains];
  const __m128i k = _mm_set1_epi32(0x5be0cd19);
  for (int i = 0; i < kChains; ++i) {
    a[i] = _mm_set1_epi32(i);
    b[i] = _mm_set1_epi32(3 * i + 1);
  }
  for (std::int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 8
    for (int i = 0; i < kChains; ++i) {
      b[i] = _mm_sha256rnds2_epu32(b[i], a[i], k);
      a[i] = _mm_sha256rnds2_epu32(a[i], b[i], k);
    }
  }
  __m128i r = a[0];
  for (int i = 1; i < kChains; ++i) r = _mm_xor_si128(r, a[i]);
  return r;
}

template <int kChains>
void BM_ShaNiRounds(benchmark::State& state) {
  if (!__builtin_cpu_supports("sha")) return state.SkipWithError("no SHA-NI");
  constexpr std::int64_t kIterations = 1 << 20;
  for (auto _ : state) {
    std::int64_t iterations = kIterations;
    benchmark::DoNotOptimize(iterations);  // or the pure call is hoisted out of the loop
    benchmark::DoNotOptimize(sha_rounds<kChains>(iterations));
  }
  state.counters["ns_per_rnds2"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kIterations * 2 * kChains,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ShaNiRounds<1>)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ShaNiRounds<2>)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ShaNiRounds<4>)->Unit(benchmark::kMillisecond);
#endif

// The envelope's payload digest (64 KiB-leaf tree, protocol v2) over one 1.4 MB sign vector.
void BM_PayloadDigest(benchmark::State& state) {
  const auto data = random_bytes(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(payload_digest(data));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.size()));
}
BENCHMARK(BM_PayloadDigest)->Arg(kSignVectorBytes)->Unit(benchmark::kMicrosecond);

// Ed25519 over the 91-byte envelope signature input (label + 72 bytes of fields).
void BM_Ed25519Sign(benchmark::State& state) {
  const SigningKey key = SigningKey::generate().value();
  const auto input = signature_input(EnvelopeHeader{});
  for (auto _ : state) benchmark::DoNotOptimize(key.sign(input));
  state.counters["per_second"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Ed25519Sign)->Unit(benchmark::kMicrosecond);

void BM_Ed25519Verify(benchmark::State& state) {
  const SigningKey key = SigningKey::generate().value();
  const auto input = signature_input(EnvelopeHeader{});
  const Signature signature = key.sign(input);
  for (auto _ : state) benchmark::DoNotOptimize(key.verify_key().verify(input, signature));
  state.counters["per_second"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Ed25519Verify)->Unit(benchmark::kMicrosecond);

// AES-128-GCM over one full TLS record (16 KiB): what TLS 1.3 spends per byte on each side.
void BM_Aes128GcmRecord(benchmark::State& state) {
  constexpr std::size_t kRecord = 16384;
  const auto plain = random_bytes(kRecord);
  std::vector<std::uint8_t> cipher(kRecord + 16);
  const std::vector<std::uint8_t> key(16, 7), iv(12, 9);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  EVP_CIPHER* aes = EVP_CIPHER_fetch(nullptr, "AES-128-GCM", nullptr);
  for (auto _ : state) {
    int n = 0, tail = 0;
    EVP_EncryptInit_ex2(ctx, aes, key.data(), iv.data(), nullptr);
    EVP_EncryptUpdate(ctx, cipher.data(), &n, plain.data(), static_cast<int>(kRecord));
    EVP_EncryptFinal_ex(ctx, cipher.data() + n, &tail);
    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, cipher.data() + kRecord);
    benchmark::DoNotOptimize(cipher.data());
  }
  EVP_CIPHER_free(aes);
  EVP_CIPHER_CTX_free(ctx);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kRecord));
}
BENCHMARK(BM_Aes128GcmRecord)->Unit(benchmark::kMicrosecond);

// ---- (b) per-message cost ------------------------------------------------------------------

void BM_SealSignVector(benchmark::State& state) {
  Signer signer(SigningKey::generate().value(), kJob, 1, Role::kNode);
  auto payload = std::make_shared<const std::vector<std::uint8_t>>(random_bytes(kSignVectorBytes));
  for (auto _ : state) benchmark::DoNotOptimize(signer.seal(MessageType::kVote, 0, payload));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kSignVectorBytes));
}
BENCHMARK(BM_SealSignVector)->Unit(benchmark::kMicrosecond);

void BM_VerifySignVector(benchmark::State& state) {
  const SigningKey key = SigningKey::generate().value();
  Registry registry;
  (void)registry.add(1, Role::kNode, key.verify_key());
  Verifier verifier(std::move(registry), VerifierOptions{kJob});
  Signer signer(key, kJob, 1, Role::kNode);
  const auto payload = random_bytes(kSignVectorBytes);
  const SignedEnvelope envelope = signer.envelope_for(MessageType::kVote, 0, payload);
  for (auto _ : state) benchmark::DoNotOptimize(verifier.verify_authentic(envelope, payload, 1));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kSignVectorBytes));
}
BENCHMARK(BM_VerifySignVector)->Unit(benchmark::kMicrosecond);

// ---- (c) two processes on loopback ---------------------------------------------------------

// A throw-away PKI: the server (id 0) and nodes 1..`nodes`.
struct Pki {
  explicit Pki(NodeId nodes = 1) {
    std::string pattern = (std::filesystem::temp_directory_path() / "ballot-bench-XXXXXX").string();
    dir = ::mkdtemp(pattern.data());
    dir /= "pki";
    if (!init_ca(dir).ok() || !issue_node(dir, 0, Role::kServer).ok()) std::abort();
    for (NodeId id = 1; id <= nodes; ++id)
      if (!issue_node(dir, id, Role::kNode).ok()) std::abort();
  }
  ~Pki() {
    std::error_code ec;
    std::filesystem::remove_all(dir.parent_path(), ec);
  }
  std::filesystem::path dir;
};

TlsTransportOptions options_for(ChannelSecurity security) {
  TlsTransportOptions options;
  options.security = security;
  options.transport.job = kJob;
  options.transport.max_inbox_bytes = 64ull << 20;
  options.transport.max_send_queue_frames = 8;
  options.transport.send_timeout = 30s;
  return options;
}

// The receiving process: counts frames, acknowledges each batch with its CPU seconds so far.
[[noreturn]] void run_receiver(const Pki& pki, ChannelSecurity security, int port_pipe) {
  auto transport =
      TlsTransport::create(load_credentials(pki.dir, 0).value(), load_registry(pki.dir).value(), options_for(security));
  if (!transport.ok()) std::_Exit(2);
  const std::uint16_t port = (*transport)->port();
  if (::write(port_pipe, &port, sizeof(port)) != sizeof(port)) std::_Exit(3);
  int frames = 0;
  for (;;) {
    auto message = (*transport)->receive(60s);
    if (!message.ok()) std::_Exit(4);
    if (message->type == MessageType::kControl) break;  // "done"
    if (message->payload.size() != kSignVectorBytes) std::_Exit(5);
    if (++frames % kFramesPerBatch == 0) {
      const double cpu = cpu_seconds(RUSAGE_SELF);
      std::vector<std::uint8_t> ack(sizeof(cpu));
      std::memcpy(ack.data(), &cpu, sizeof(cpu));
      if (!(*transport)->send(1, MessageType::kControl, 0, ack).ok()) std::_Exit(6);
    }
  }
  (*transport)->close();
  std::_Exit(0);
}

void BM_LoopbackThroughput(benchmark::State& state, ChannelSecurity security) {
  Pki pki;
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return state.SkipWithError("pipe failed");
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    run_receiver(pki, security, pipe_fds[1]);
  }
  ::close(pipe_fds[1]);
  std::uint16_t port = 0;
  if (::read(pipe_fds[0], &port, sizeof(port)) != sizeof(port)) return state.SkipWithError("receiver did not start");
  ::close(pipe_fds[0]);
  auto options = options_for(security);
  options.listen = false;
  options.dial[0] = PeerAddress{"127.0.0.1", port};
  auto sender =
      TlsTransport::create(load_credentials(pki.dir, 1).value(), load_registry(pki.dir).value(), options).value();
  if (!sender->wait_connected(0, 10s).ok()) return state.SkipWithError("no connection");
  auto payload = std::make_shared<const std::vector<std::uint8_t>>(random_bytes(kSignVectorBytes));
  double receiver_cpu_start = 0, receiver_cpu_end = 0;
  const double sender_cpu_start = cpu_seconds(RUSAGE_SELF);
  bool first = true;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kFramesPerBatch; ++i) {
      // seal() signs (mTLS mode) or frames (plaintext) on this thread: part of the measured cost.
      if (!sender->send_frame(0, sender->seal(MessageType::kVotePiece, 0, payload)).ok())
        return state.SkipWithError("send failed");
    }
    auto ack = sender->receive(60s);
    if (!ack.ok() || ack->payload.size() != sizeof(double)) return state.SkipWithError("no acknowledgement");
    double cpu = 0;
    std::memcpy(&cpu, ack->payload.data(), sizeof(cpu));
    if (first) receiver_cpu_start = cpu;  // (the first batch's receiver CPU includes its start-up)
    receiver_cpu_end = cpu;
    first = false;
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double sender_cpu = cpu_seconds(RUSAGE_SELF) - sender_cpu_start;
  (void)sender->send(0, MessageType::kControl, 0, {0});
  int status = 0;
  ::waitpid(child, &status, 0);
  sender->close();
  const double bytes = static_cast<double>(state.iterations()) * kFramesPerBatch * kSignVectorBytes;
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["frames_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kFramesPerBatch, benchmark::Counter::kIsRate);
  state.counters["sender_cpu_s_per_GB"] = sender_cpu / (bytes / 1e9);
  if (state.iterations() > 1)
    state.counters["receiver_cpu_s_per_GB"] =
        (receiver_cpu_end - receiver_cpu_start) /
        ((static_cast<double>(state.iterations()) - 1) * kFramesPerBatch * kSignVectorBytes / 1e9);
}
BENCHMARK_CAPTURE(BM_LoopbackThroughput, mtls_signed, ChannelSecurity::kMutualTls)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK_CAPTURE(BM_LoopbackThroughput, plain_unsigned, ChannelSecurity::kInsecurePlaintext)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

// ---- (d) the server's receive work for one round, with k I/O threads -------------------------

constexpr int kVoters = 8;

// The server process: receives rounds of kVoters votes; after each, tells node 1 its CPU seconds.
[[noreturn]] void run_round_server(const Pki& pki, int io_threads, int port_pipe) {
  auto options = options_for(ChannelSecurity::kMutualTls);
  options.io_threads = io_threads;
  options.transport.max_inbox_bytes = 256ull << 20;
  auto transport = TlsTransport::create(load_credentials(pki.dir, 0).value(), load_registry(pki.dir).value(), options);
  if (!transport.ok()) std::_Exit(2);
  const std::uint16_t port = (*transport)->port();
  if (::write(port_pipe, &port, sizeof(port)) != sizeof(port)) std::_Exit(3);
  for (;;) {
    for (int vote = 0; vote < kVoters; ++vote) {
      auto message = (*transport)->receive(120s);
      if (!message.ok()) std::_Exit(4);
      if (message->type == MessageType::kControl) {
        (*transport)->close();
        std::_Exit(0);
      }
      if (message->payload.size() != kSignVectorBytes) std::_Exit(5);
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const double cpu[2] = {
        static_cast<double>(usage.ru_utime.tv_sec) + 1e-6 * static_cast<double>(usage.ru_utime.tv_usec),
        static_cast<double>(usage.ru_stime.tv_sec) + 1e-6 * static_cast<double>(usage.ru_stime.tv_usec)};
    std::vector<std::uint8_t> ack(sizeof(cpu));
    std::memcpy(ack.data(), cpu, sizeof(cpu));
    if (!(*transport)->send(1, MessageType::kControl, 0, ack).ok()) std::_Exit(6);
  }
}

void BM_ServerRoundReceive(benchmark::State& state) {
  const int io_threads = static_cast<int>(state.range(0));
  Pki pki(kVoters);
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return state.SkipWithError("pipe failed");
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    run_round_server(pki, io_threads, pipe_fds[1]);
  }
  ::close(pipe_fds[1]);
  std::uint16_t port = 0;
  if (::read(pipe_fds[0], &port, sizeof(port)) != sizeof(port)) return state.SkipWithError("server did not start");
  ::close(pipe_fds[0]);
  std::vector<std::unique_ptr<TlsTransport>> voters;
  for (NodeId id = 1; id <= kVoters; ++id) {
    auto options = options_for(ChannelSecurity::kMutualTls);
    options.listen = false;
    options.dial[0] = PeerAddress{"127.0.0.1", port};
    voters.push_back(
        TlsTransport::create(load_credentials(pki.dir, id).value(), load_registry(pki.dir).value(), options).value());
  }
  for (auto& voter : voters)
    if (!voter->wait_connected(0, 10s).ok()) return state.SkipWithError("no connection");
  auto payload = std::make_shared<const std::vector<std::uint8_t>>(random_bytes(kSignVectorBytes));
  double user_before = -1, sys_before = 0, user_total = 0, sys_total = 0;
  std::int64_t measured = 0;
  for (auto _ : state) {
    // Sealed (signed) before, as nodes do; sent while the server is stopped: the bytes wait in
    // the loopback sockets' buffers (1.4 MB each fits).
    std::vector<OutboundFrame> frames;
    for (auto& voter : voters) frames.push_back(voter->seal(MessageType::kVotePiece, 0, payload));
    ::kill(child, SIGSTOP);
    for (std::size_t i = 0; i < voters.size(); ++i)
      if (!voters[i]->send_frame(0, frames[i]).ok()) return state.SkipWithError("send failed");
    std::this_thread::sleep_for(300ms);  // the senders' I/O threads encrypt and write everything
    const auto start = std::chrono::steady_clock::now();
    ::kill(child, SIGCONT);
    auto ack = voters[0]->receive(60s);
    const auto end = std::chrono::steady_clock::now();
    if (!ack.ok() || ack->payload.size() != 2 * sizeof(double)) return state.SkipWithError("no acknowledgement");
    double cpu[2] = {0, 0};
    std::memcpy(cpu, ack->payload.data(), sizeof(cpu));
    if (user_before >= 0) {
      user_total += cpu[0] - user_before;
      sys_total += cpu[1] - sys_before;
      ++measured;
    }
    user_before = cpu[0];
    sys_before = cpu[1];
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
  }
  (void)voters[0]->send(0, MessageType::kControl, 0, {0});
  int status = 0;
  ::waitpid(child, &status, 0);
  for (auto& voter : voters) voter->close();
  const double bytes = static_cast<double>(state.iterations()) * kVoters * kSignVectorBytes;
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  // The server's CPU per round (between acknowledgements), user and system: with 2 threads,
  // (user + system) / wall near 2 means the votes were worked on in parallel.
  if (measured > 0) {
    state.counters["server_user_ms"] = 1e3 * user_total / static_cast<double>(measured);
    state.counters["server_sys_ms"] = 1e3 * sys_total / static_cast<double>(measured);
  }
}
BENCHMARK(BM_ServerRoundReceive)
    ->ArgName("io_threads")
    ->Arg(1)
    ->Arg(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20);

}  // namespace

BENCHMARK_MAIN();
