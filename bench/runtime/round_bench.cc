// Seconds per round of the training runtime, split into its stages, for n = 15 nodes:
//   compute    one node's gradients of its partitions (MLP on Fashion-MNIST-sized inputs)
//   encode     signs of those gradients + the node's election vote (pack + encode_replicated)
//   transport  one vote through the in-memory transport: encode payload, SHA-256, Ed25519 sign,
//              frame, decode, verify (what each vote costs beyond the network itself)
//   vote       the server's decision over the 15 votes (bit-sliced majority)
//   round      a whole round of the in-process simulator (all 15 nodes on the machine's cores)
// and the bytes of one vote against an fp32 gradient. Synthetic data of Fashion-MNIST's shape
// keeps the benchmark independent of the dataset package.
//
// The limits, measured in the same run (rows named floor/…):
//   floor/transport  the cryptography a vote cannot avoid: SHA-256 of its payload, one Ed25519
//                    signature and one verification
//   floor/vote       one read of the 15 votes' bits (bench/read_probe.h's sum)
// Encode's limit is reading the 13 gradients it packs (13 · 4d bytes, cache-resident here): its
// bytes_per_second is that rate.
// Compute's limit is the MLP's arithmetic (Eigen GEMMs; learning_bench compares them with the
// machine's peak); the whole round is compute-bound.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "bench/read_probe.h"
#include "coding/election_encoder.h"
#include "kernels/majority_vote.h"
#include "kernels/sign_kernels.h"
#include "runtime/messages.h"
#include "runtime/node_worker.h"
#include "runtime/replica.h"
#include "runtime/simulator.h"
#include "runtime/training.h"
#include "transport/crypto.h"
#include "transport/memory_transport.h"

namespace {

using namespace ballot;

runtime::TrainingOptions options_for_bench() {
  runtime::TrainingOptions options;
  options.nodes = 15;
  options.byzantine = 3;
  options.code = "deterministic";
  options.data = "synthetic:examples=4096,features=784,classes=10,separation=1";
  options.rounds = 20;
  options.eval_every = 0;
  return options;
}

const runtime::TrainingSetup& setup() {
  static const runtime::TrainingSetup instance = [] {
    auto options = options_for_bench();
    auto data = runtime::load_training_data(options).value();
    return runtime::make_training_setup(options, std::make_shared<const learning::TrainTestSplit>(std::move(data)))
        .value();
  }();
  return instance;
}

// Node 1 of the deterministic code is a "complement" row: it computes n − 2 = 13 partitions, the
// most work any node does; a full row (the last 2b + 1 nodes) computes all 15.
constexpr std::size_t kNode = 1;

void BM_Compute(benchmark::State& state) {
  auto replica = runtime::Replica::create(setup()).value();
  runtime::NodeWorker worker(setup(), kNode);
  std::uint64_t round = 0;
  for (auto _ : state) {
    for (auto partition : worker.partitions()) {
      const auto indices = setup().sampler.indices(round, partition);
      learning::Batch batch = learning::gather(setup().data->train, indices);
      benchmark::DoNotOptimize(replica.model().forward_backward(batch.features, batch.labels));
    }
    ++round;
  }
  state.counters["partitions"] = static_cast<double>(worker.partitions().size());
}

void BM_Encode(benchmark::State& state) {
  auto replica = runtime::Replica::create(setup()).value();
  const std::size_t d = replica.dimension();
  std::vector<BitVector> signs(setup().options.nodes, BitVector(d));
  BitVector vote;
  const auto partitions = setup().code.row(kNode);
  // One distinct gradient of random signs per partition, as in a round (5.3 MB for the 13: more
  // than this CPU's L2, so the pack reads them from L3 as the runtime does after backward).
  std::vector<std::vector<float>> gradients(setup().options.nodes, std::vector<float>(d));
  Rng rng(11);
  for (auto& gradient : gradients)
    for (auto& g : gradient) g = rng.uniform_float() - 0.5f;
  for (auto _ : state) {
    for (auto partition : partitions) kernels::pack_signs(gradients[partition], signs[partition]);
    coding::encode_replicated(setup().code, kNode, signs, vote);
    benchmark::DoNotOptimize(vote.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * partitions.size() * d * sizeof(float)));
}

void BM_Transport(benchmark::State& state) {
  auto server_key = transport::SigningKey::generate().value();
  auto node_key = transport::SigningKey::generate().value();
  transport::Registry registry;
  (void)registry.add(0, transport::Role::kServer, server_key.verify_key());
  (void)registry.add(1, transport::Role::kNode, node_key.verify_key());
  auto network = transport::MemoryNetwork::create();
  auto server = network->attach({0, transport::Role::kServer, server_key}, registry).value();
  auto node = network->attach({1, transport::Role::kNode, node_key}, registry).value();
  const std::size_t d = runtime::Replica::create(setup()).value().dimension();
  runtime::Vote vote;
  vote.signs = BitVector(d, true);
  std::uint64_t round = 0;
  std::size_t bytes = 0;
  for (auto _ : state) {
    server->set_round(round);
    vote.round = round;
    auto payload = runtime::encode(vote);
    bytes = payload.size();
    (void)node->send(0, transport::MessageType::kVote, round, std::move(payload));
    auto received = server->receive(std::chrono::milliseconds(1000));
    auto decoded = runtime::decode_vote(received->payload, d);
    benchmark::DoNotOptimize(decoded);
    ++round;
  }
  state.counters["vote_bytes"] = static_cast<double>(bytes);
  state.counters["fp32_bytes"] = static_cast<double>(d * sizeof(float));
  state.counters["reduction"] = static_cast<double>(d * sizeof(float)) / static_cast<double>(bytes);
}

void BM_TransportFloor(benchmark::State& state) {
  auto key = transport::SigningKey::generate().value();
  const auto verify = key.verify_key();
  const std::size_t d = runtime::Replica::create(setup()).value().dimension();
  runtime::Vote vote;
  vote.signs = BitVector(d, true);
  const auto payload = runtime::encode(vote);
  for (auto _ : state) {
    const auto digest = transport::sha256(payload);
    const auto signature = key.sign(digest);
    benchmark::DoNotOptimize(verify.verify(digest, signature));
  }
}

void BM_Vote(benchmark::State& state) {
  const std::size_t d = runtime::Replica::create(setup()).value().dimension();
  std::vector<BitVector> votes;
  Rng rng(3);
  for (std::size_t i = 0; i < setup().options.nodes; ++i) {
    BitVector bits(d);
    for (auto& word : bits.words()) word = rng.next_u64();
    bits.clear_padding();
    votes.push_back(std::move(bits));
  }
  std::vector<const BitVector*> pointers;
  for (const auto& v : votes) pointers.push_back(&v);
  for (auto _ : state) benchmark::DoNotOptimize(runtime::decide(pointers, d));
}

void BM_VoteFloor(benchmark::State& state) {
  const std::size_t d = runtime::Replica::create(setup()).value().dimension();
  std::vector<BitVector> votes(setup().options.nodes, BitVector(d, true));
  for (auto _ : state) {
    for (const auto& vote : votes)
      benchmark::DoNotOptimize(bench::read_all(vote.words().data(), 8 * vote.words().size()));
  }
}

void BM_SimulatedRound(benchmark::State& state) {
  for (auto _ : state) {
    auto result = runtime::simulate(setup());
    benchmark::DoNotOptimize(result);
    state.SetIterationTime(result.value().server.seconds / static_cast<double>(setup().options.rounds));
  }
}

BENCHMARK(BM_Compute)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Encode)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Transport)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TransportFloor)->Name("floor/transport")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Vote)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_VoteFloor)->Name("floor/vote")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimulatedRound)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
