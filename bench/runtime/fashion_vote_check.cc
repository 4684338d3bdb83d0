// Acceptance check (not a unit test, and not a benchmark: it measures accuracy, so no physical
// limit applies): signSGD / Signum with majority vote over n
// simulated workers trains the MLP on Fashion-MNIST. Each worker takes the gradient of its own
// partition of the round's global batch (PartitionSampler: partition w of round r), keeps its
// momentum (β = 0 is signSGD) and sends sign(m); the server takes the coordinate-wise majority
// (ties → +1) and applies the update rule — "sign": x ← x − η(r)(v + λx) (Bernstein et al.
// 2019), or "heavyball": the election-coding paper's server momentum on v (Sohn et al. 2020).
// Prints test accuracy against rounds and the wall time, on one core.
//
//   fashion_vote_check [rounds=3000] [workers=7] [batch=32] [hidden=128] [beta=0.9]
//                      [schedule="constant:lr=0.001 > cosine:rounds=3000,min=0.05"] [wd=0]
//                      [rule=sign|heavyball] [eval=250] [seed=1] [data=/usr/share/datasets/fashion-mnist]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "core/bit_vector.h"
#include "learning/dataset.h"
#include "learning/models.h"
#include "learning/optimizer.h"

namespace {

std::map<std::string, std::string> parse_args(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "argument '%s' is not key=value\n", a.c_str());
      std::exit(2);
    }
    args[a.substr(0, eq)] = a.substr(eq + 1);
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ballot;
  auto args = parse_args(argc, argv);
  auto get = [&](const std::string& key, const std::string& fallback) {
    auto it = args.find(key);
    return it == args.end() ? fallback : it->second;
  };
  const std::uint64_t rounds = std::stoull(get("rounds", "3000"));
  const std::size_t workers = std::stoul(get("workers", "7"));
  const std::size_t batch = std::stoul(get("batch", "32"));
  const std::string hidden = get("hidden", "128");
  const double beta = std::stod(get("beta", "0.9"));
  const double wd = std::stod(get("wd", "0"));
  const std::string rule = get("rule", "sign");
  const std::uint64_t eval_every = std::stoull(get("eval", "250"));
  const std::uint64_t seed = std::stoull(get("seed", "1"));
  const std::string schedule_text =
      get("schedule", "constant:lr=0.001 > cosine:rounds=" + std::to_string(rounds) + ",min=0.05");

  auto schedule = learning::LrSchedule::parse(schedule_text);
  if (!schedule.ok()) return std::fprintf(stderr, "%s\n", schedule.error().to_string().c_str()), 2;
  auto data = learning::load_fashion_mnist(get("data", std::string(learning::kDefaultFashionMnistDir)));
  if (!data.ok()) return std::fprintf(stderr, "%s\n", data.error().to_string().c_str()), 1;
  auto model = learning::make_model("mlp:hidden=" + hidden, learning::shape_of(data->train), seed);
  if (!model.ok()) return std::fprintf(stderr, "%s\n", model.error().to_string().c_str()), 2;
  learning::Model& m = **model;
  const std::string server_spec =
      rule == "heavyball" ? "heavyball:wd=" + std::to_string(wd) : "sign:wd=" + std::to_string(wd);
  auto server = learning::make_optimizer(server_spec, m.layout());
  if (!server.ok()) return std::fprintf(stderr, "%s\n", server.error().to_string().c_str()), 2;

  std::printf(
      "fashion_vote_check: mlp:hidden=%s (%zu params), %zu workers x batch %zu, worker beta=%g, server %s,\n"
      "  schedule %s\n",
      hidden.c_str(), m.parameters().size(), workers, batch, beta, (*server)->spec().c_str(), schedule->spec().c_str());
  std::printf("%8s %10s %10s %10s %9s\n", "round", "lr", "test_acc", "test_loss", "seconds");

  learning::PartitionSampler sampler({seed, batch}, data->train.size());
  std::vector<learning::WorkerMomentum> momentum(workers, learning::WorkerMomentum(beta));
  std::vector<BitVector> signs(workers);
  const std::size_t d = m.parameters().size();
  BitVector vote(d);
  std::vector<std::uint32_t> ones(d);
  learning::Batch b;
  double compute_seconds = 0.0;
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  double best = 0.0;
  for (std::uint64_t r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t w = 0; w < workers; ++w) {
      learning::gather(data->train, sampler.indices(r, w), b);
      m.forward_backward(b.features, b.labels);
      momentum[w].update(m.gradients(), signs[w]);
    }
    compute_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Majority of the packed signs: bit 1 when at least half of the workers say +1 (ties → +1).
    std::fill(ones.begin(), ones.end(), 0u);
    for (const BitVector& s : signs) {
      for (std::size_t i = 0; i < d; ++i) ones[i] += s.get(i) ? 1u : 0u;
    }
    for (std::size_t i = 0; i < d; ++i) vote.set(i, 2 * ones[i] >= workers);
    (*server)->step_vote(m.parameters(), vote, schedule->at(r));
    if ((r + 1) % eval_every == 0 || r + 1 == rounds) {
      const learning::Evaluation e = learning::evaluate(m, data->test);
      best = std::max(best, e.accuracy);
      std::printf("%8llu %10.6f %10.4f %10.4f %9.1f\n", static_cast<unsigned long long>(r + 1), schedule->at(r),
                  e.accuracy, e.loss, seconds());
      std::fflush(stdout);
    }
  }
  const learning::Evaluation final_eval = learning::evaluate(m, data->test);
  std::printf("final test accuracy %.4f (best %.4f) after %llu rounds, %.1f s (%.1f s in worker forward/backward)\n",
              final_eval.accuracy, best, static_cast<unsigned long long>(rounds), seconds(), compute_seconds);
  return final_eval.accuracy >= 0.85 ? 0 : 3;
}
