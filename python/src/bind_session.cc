// ballot._native bindings of the node session (runtime/node_session.h): node i of a real cluster
// (the server and the other nodes are `ballot` processes over mutual TLS) driven from Python. The
// node is opened from the cluster file as `ballot node` opens it (runtime::open_cluster_node: its
// setup and data, its keys, the pinned registry, the node state directory and signed record) and
// its session is the one runtime::Node::run drives: the same protocol code. The caller computes —
// with the built-in NodeWorker (compute) or signs of its own — and submits.
//
// Every network wait (start, poll, poll_for, next_round, await_decision) and the computation run without
// the GIL; one Python thread at a time may use a session (another gets a RuntimeError). Input
// from Python is checked before it reaches the session: the wrong dtype is a TypeError, the wrong
// length, or a submission of the wrong kind, a ValueError; a submission with no round open, or a
// second compute() of one round, a RuntimeError. A refused submission leaves the round open.
// A wait that passes over events (next_round, await_decision) checks for Ctrl-C between them.
#include <Python.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "coding/codec_registry.h"
#include "core/bit_vector.h"
#include "learning/parameter_model.h"
#include "python/src/codec_on_device.h"
#include "python/src/native.h"
#include "runtime/adversary.h"
#include "runtime/cluster.h"
#include "runtime/cluster_config.h"
#include "runtime/messages.h"
#include "runtime/node_session.h"
#include "runtime/node_worker.h"
#include "runtime/replica.h"
#include "runtime/roles.h"
#include "runtime/training.h"
#include "transport/crypto.h"

namespace ballot::python {
namespace {

using runtime::NodeEvent;
using runtime::RoundWork;

const char* kind_name(RoundWork::Kind kind) {
  switch (kind) {
    case RoundWork::Kind::kVote:
      return "vote";
    case RoundWork::Kind::kGradient:
      return "gradient";
    case RoundWork::Kind::kPartitionSigns:
      return "partition_signs";
  }
  return "?";
}

const char* kind_name(NodeEvent::Kind kind) {
  switch (kind) {
    case NodeEvent::Kind::kCompute:
      return "compute";
    case NodeEvent::Kind::kDecided:
      return "decided";
    case NodeEvent::Kind::kStateInstalled:
      return "state_installed";
    case NodeEvent::Kind::kFinished:
      return "finished";
    case NodeEvent::Kind::kCrashed:
      return "crashed";
  }
  return "?";
}

nb::ndarray<nb::numpy, std::uint64_t, nb::ndim<1>> words_to_numpy(const BitVector& bits) {
  auto* owned = new std::vector<std::uint64_t>(bits.words().begin(), bits.words().end());
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<std::uint64_t>*>(p); });
  return nb::ndarray<nb::numpy, std::uint64_t, nb::ndim<1>>(owned->data(), {owned->size()}, owner);
}

class Session {
 public:
  static std::unique_ptr<Session> from_cluster_file(const std::string& path, std::size_t index) {
    auto session = std::unique_ptr<Session>(new Session());
    Result<runtime::ClusterNode> node = make_error(ErrorCode::kInternal, "not opened");
    {
      nb::gil_scoped_release released;  // loading the data set and the keys
      auto config = runtime::load_cluster_config(path);
      if (!config.ok()) {
        node = std::move(config).error();
      } else {
        node = runtime::open_cluster_node(*config, index);
      }
    }
    session->node_ = unwrap(std::move(node));
    const auto& setup = *session->node_.setup;
    session->replica_ = std::make_unique<runtime::Replica>(unwrap(runtime::Replica::create(setup)));
    session->worker_ = std::make_unique<runtime::NodeWorker>(setup, index);
    if (!session->replica_->model().has_forward()) {
      // An attacker that needs the honest messages (ALIE, IPM, the omniscient vote, ...) computes
      // every partition with the caller's framework: set_gradient_source.
      Session* raw = session.get();
      session->node_.options.coalition = std::make_shared<runtime::Coalition>(
          setup, [raw](std::uint64_t round, std::uint32_t partition, std::span<float> gradient) {
            return raw->external_gradient(round, partition, gradient);
          });
    }
    session->keeper_ = std::make_unique<runtime::NodeStateKeeper>(session->node_.options, index);
    session->session_ = std::make_unique<runtime::NodeSession>(
        setup, index, *session->node_.transport, *session->replica_,
        runtime::node_session_options(setup, index, *session->replica_, session->node_.options));
    return session;
  }

  ~Session() { close(); }

  void start() {
    Busy busy(*this);
    if (started_) throw std::runtime_error("the session is already started");
    Status status;
    {
      nb::gil_scoped_release released;
      status = session_->start();
    }
    unwrap(std::move(status));
    started_ = true;
  }

  nb::dict poll() {
    Busy busy(*this, /*needs_start=*/true);
    return event_dict(wait([](const NodeEvent&) { return true; }));
  }

  // The next event if one comes within `timeout` seconds (0: only what has arrived), else None.
  nb::object poll_for(double timeout) {
    Busy busy(*this, true);
    if (!std::isfinite(timeout) || timeout < 0 || timeout > 86400.0)
      throw nb::value_error("timeout must be a number of seconds in [0, 86400]");
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(timeout * 1000.0)));
    Result<std::optional<NodeEvent>> result = make_error(ErrorCode::kInternal, "not polled");
    {
      nb::gil_scoped_release released;
      while (true) {  // in slices, so that Ctrl-C ends a long wait
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        result = session_->poll_for(std::clamp(left, std::chrono::milliseconds(0), kSignalCheckEvery));
        if (!result.ok()) break;
        if (result->has_value()) {
          saw(**result);
          break;
        }
        if (left <= kSignalCheckEvery) break;
        check_signals();
      }
    }
    if (!result.ok()) result = with_dial_error(std::move(result).error());
    auto event = unwrap(std::move(result));
    if (!event) return nb::none();
    return event_dict(*event);
  }

  nb::dict next_round() {
    Busy busy(*this, true);
    return event_dict(wait([](const NodeEvent& e) {
      return e.kind == NodeEvent::Kind::kCompute || e.kind == NodeEvent::Kind::kFinished ||
             e.kind == NodeEvent::Kind::kCrashed;
    }));
  }

  nb::dict await_decision() {
    Busy busy(*this, true);
    const std::uint64_t waiting_for = session_->round();
    return event_dict(wait(
        [waiting_for](const NodeEvent& e) { return e.kind != NodeEvent::Kind::kDecided || e.round > waiting_for; }));
  }

  // The open round's work with the built-in NodeWorker (once per round: it advances the worker's
  // momentum); what to submit.
  nb::dict compute() {
    Busy busy(*this, true);
    const RoundWork& work = open_work();
    if (computed_round_ == work.round) {
      throw std::runtime_error("round " + std::to_string(work.round) +
                               " is already computed (compute() advances the worker momentum: call it once per round)");
    }
    if (!replica_->model().has_forward()) {
      throw std::runtime_error("the model '" + replica_->model().spec() +
                               "' has no forward pass in Ballot: compute with your framework (fold / submit_*)");
    }
    BitVector signs;
    std::vector<float> gradient;
    double loss = 0.0;
    {
      nb::gil_scoped_release released;
      if (work.kind == RoundWork::Kind::kPartitionSigns) {
        loss = worker_->partition_signs(*replica_, work.round, work.partitions.front(), signs);
      } else if (work.kind == RoundWork::Kind::kVote) {
        loss = worker_->vote(*replica_, work.round, signs);
      } else {
        loss = worker_->gradient(*replica_, work.round);
        const auto computed = replica_->model().gradients();
        gradient.assign(computed.begin(), computed.end());
      }
    }
    computed_round_ = work.round;
    nb::dict out;
    out["kind"] = kind_name(work.kind);
    out["round"] = work.round;
    out["loss"] = loss;
    if (work.kind == RoundWork::Kind::kGradient) {
      out["gradient"] = to_numpy(std::move(gradient));
    } else {
      out["d"] = signs.size();
      out["signs"] = words_to_numpy(signs);
    }
    return out;
  }

  // ---- for nodes whose framework computes (ballot.torch)

  // `source(round, partition)` returns (loss, float32 gradient of the model's dimension): how an
  // attacking node with a parameters-only model recomputes the honest messages it needs.
  void set_gradient_source(nb::object source) { gradient_source_ = std::move(source); }

  double external_gradient(std::uint64_t round, std::uint32_t partition, std::span<float> gradient) {
    nb::gil_scoped_acquire held;  // called from inside a session call that released the GIL
    if (!gradient_source_.is_valid() || gradient_source_.is_none()) {
      throw std::runtime_error(
          "this node's attack needs the honest gradients of every partition, and no gradient "
          "source is set (set_gradient_source; ballot.torch.Node sets it)");
    }
    nb::object out = gradient_source_(round, partition);
    const double loss = nb::cast<double>(out[0]);
    nb::object array = out[1];
    const auto values = cpu_floats(array, "gradient source");
    if (values.size() != gradient.size()) {
      throw nb::value_error(("gradient source: expected " + std::to_string(gradient.size()) + " values, got " +
                             std::to_string(values.size()))
                                .c_str());
    }
    std::copy(values.begin(), values.end(), gradient.begin());
    return loss;
  }

  // The replica's parameters, in place: decisions and state transfers write them, the caller
  // reads them (a framework's tensors are views of this buffer). Valid while the session lives.
  nb::ndarray<nb::numpy, float, nb::ndim<1>> parameters() {
    auto params = replica_->model().parameters();
    return nb::ndarray<nb::numpy, float, nb::ndim<1>>(params.data(), {params.size()}, nb::find(this));
  }

  // The parameter tensors: (name, shape, offset, size) in buffer order. A parameter file's model
  // has their shapes; a built-in model's layer segments are flat.
  nb::list tensors() const {
    nb::list out;
    if (const auto* file = dynamic_cast<const learning::ParameterModel*>(&replica_->model())) {
      for (const auto& t : file->tensors()) {
        nb::list shape;
        for (auto dim : t.shape) shape.append(dim);
        out.append(nb::make_tuple(t.name, nb::tuple(shape), t.offset, t.size));
      }
      return out;
    }
    for (const auto& layer : replica_->model().layout().layers()) {
      out.append(nb::make_tuple(layer.name, nb::make_tuple(layer.size), layer.offset, layer.size));
    }
    return out;
  }

  // The examples of partition `partition` of round `round` (indices into the training set).
  nb::ndarray<nb::numpy, std::uint32_t, nb::ndim<1>> partition_indices(std::uint64_t round, std::uint64_t partition) {
    if (partition >= node_.setup->options.nodes) {
      throw nb::value_error(("partition " + std::to_string(partition) + " does not exist (the run has " +
                             std::to_string(node_.setup->options.nodes) + ")")
                                .c_str());
    }
    auto* owned = new std::vector<std::uint32_t>(node_.setup->sampler.indices(round, partition));
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<std::uint32_t>*>(p); });
    return nb::ndarray<nb::numpy, std::uint32_t, nb::ndim<1>>(owned->data(), {owned->size()}, owner);
  }

  // The run's training options (what the node must agree with).
  nb::dict training() const {
    const auto& o = node_.setup->options;
    nb::dict out;
    out["nodes"] = o.nodes;
    out["byzantine"] = o.byzantine;
    out["code"] = o.code;
    out["placement"] = std::string(runtime::placement_name(o.placement));
    out["model"] = o.model;
    out["update"] = o.update;
    out["worker_momentum"] = o.worker_momentum;
    out["lr"] = o.lr;
    out["partition_size"] = o.partition_size;
    out["rounds"] = o.rounds;
    out["seed"] = o.seed;
    out["data"] = o.data;
    out["rule"] = o.rule;
    out["codec"] = o.codec;
    out["attack"] = o.attack;
    out["digest_every"] = o.digest_every;
    out["training_examples"] = node_.setup->data->train.size();
    return out;
  }

  // The open round's partition `partition` from its gradient (the worker momentum, then signs).
  void fold(std::uint32_t partition, nb::handle array) {
    Busy busy(*this, true);
    require_signs_of(partition);
    require_unfolded(partition, 0, BitVector::words_for(dimension()));
    const auto values = cpu_floats(array, "gradient");
    if (values.size() != dimension()) {
      throw nb::value_error(
          ("gradient: expected " + std::to_string(dimension()) + " values, got " + std::to_string(values.size()))
              .c_str());
    }
    Status status;
    {
      nb::gil_scoped_release released;
      status = worker_->fold(partition, values);
    }
    unwrap(std::move(status));
    folded_whole(partition);
  }

  // The open round's partition `partition` from its packed signs, computed by the caller through
  // its own copy of the worker momentum (ballot.torch on a GPU: momentum_pack, then d/8 bytes).
  void fold_signs(std::uint32_t partition, nb::handle words) {
    Busy busy(*this, true);
    require_signs_of(partition);
    const Words view = words_of(words, "signs", /*writable=*/false);
    if (view.device != Device::kCpu) throw nb::value_error("signs: the packed signs must be a CPU array");
    unwrap(worker_->fold_signs(partition, dimension(), std::span<const std::uint64_t>(view.data, view.count)));
    folded_whole(partition);
  }

  // The open round takes signs (not the gradient path) and asks for `partition`.
  void require_signs_of(std::uint32_t partition) const {
    const RoundWork& work = open_work();
    if (work.kind == RoundWork::Kind::kGradient)
      throw nb::value_error("the gradient path takes submit_gradient, not signs");
    if (std::find(work.partitions.begin(), work.partitions.end(), partition) == work.partitions.end()) {
      throw nb::value_error(
          ("round " + std::to_string(work.round) + " does not ask for partition " + std::to_string(partition)).c_str());
    }
  }

  // A coordinate folded twice in one round would advance its worker momentum twice: refused
  // before anything changes. Words [first, end) of `partition`.
  void require_unfolded(std::uint32_t partition, std::size_t first, std::size_t end) const {
    const auto it = covered_.find(partition);
    if (it == covered_.end()) return;
    for (std::size_t w = first; w < std::min(end, it->second.size()); ++w) {
      if (it->second[w]) {
        throw nb::value_error(("partition " + std::to_string(partition) + ": coordinates from " +
                               std::to_string(64 * w) +
                               " are already folded in this round (folding again would advance their worker "
                               "momentum twice)")
                                  .c_str());
      }
    }
  }

  void folded_whole(std::uint32_t partition) {
    folded_.push_back(partition);
    covered_[partition].assign(BitVector::words_for(dimension()), true);
  }

  // A copy of partition `partition`'s worker momentum (zeros before its first fold), or None when
  // the run keeps none for it.
  nb::object momentum(std::uint32_t partition) const {
    Reading reading(*this);
    const auto* kept = worker_->momentum(partition);
    if (kept == nullptr) return nb::none();
    std::vector<float> values(kept->momentum().begin(), kept->momentum().end());
    if (values.empty()) values.assign(dimension(), 0.0f);
    return nb::cast(to_numpy(std::move(values)));
  }

  // `source(partition)` returns the caller's copy of that partition's worker momentum (float32,
  // the model's dimension; None: nothing newer than the session's). Called before each save of the
  // node state file, so the file holds what a caller folding with fold_signs computed.
  void set_momentum_source(nb::object source) { momentum_source_ = std::move(source); }

  // The replica's update rule's state when it is sgd or heavyball (learning::SgdView: rule "sgd",
  // its options, whether it started and a copy of its momentum buffer), signum
  // (learning::SignumView: rule "signum", β, started, its momentum as the buffer) or ef_sign
  // (learning::EfSignView: rule "ef_sign", started, its error memory as the buffer, and "layers":
  // the (offset, size) its per-layer scales are for); None for the other rules. An empty buffer:
  // no step has made one yet.
  nb::object optimizer_state() const {
    Reading reading(*this);
    nb::dict out;
    std::span<const float> buffer;
    if (const auto view = replica_->optimizer().sgd_view()) {
      out["rule"] = "sgd";
      out["momentum"] = view->options->momentum;
      out["dampening"] = view->options->dampening;
      out["nesterov"] = view->options->nesterov;
      out["started"] = view->started;
      buffer = view->buffer;
    } else if (const auto signum = replica_->optimizer().signum_view()) {
      out["rule"] = "signum";
      out["beta"] = signum->options->beta;
      out["started"] = !signum->momentum.empty();
      buffer = signum->momentum;
    } else if (const auto ef = replica_->optimizer().ef_sign_view()) {
      out["rule"] = "ef_sign";
      out["started"] = !ef->error.empty();
      nb::list layers;  // (offset, size) of each layer its scales are per
      for (const auto& layer : ef->layout->layers()) layers.append(nb::make_tuple(layer.offset, layer.size));
      out["layers"] = layers;
      buffer = ef->error;
    } else {
      return nb::none();
    }
    out["buffer"] = to_numpy(std::vector<float>(buffer.begin(), buffer.end()));
    return out;
  }

  // Keeps each vote decision the replica applies (runtime::Replica::set_vote_observer) for
  // take_votes(): a caller holding a copy of the parameters elsewhere (ballot.torch on a GPU)
  // applies the same steps to it instead of copying the parameters after every decision.
  void track_votes() {
    Busy busy(*this);
    replica_->set_vote_observer(
        [this](std::uint64_t round, const BitVector& vote, learning::StepScale scale, bool full_digest) {
          const std::lock_guard lock(applied_mutex_);
          if (applied_.size() >= kMaxKeptVotes) {  // never taken: the caller copies the parameters instead
            applied_.clear();
            replaced_ = true;
            return;
          }
          std::vector<float> scales;  // ef_sign's per-layer scales of this step
          if (const auto ef = replica_->optimizer().ef_sign_view()) scales.assign(ef->scales.begin(), ef->scales.end());
          applied_.push_back({round, vote, scale, full_digest, std::move(scales)});
        });
  }

  // The votes applied since the last call, oldest first, as (round, sign words, lr, weight decay,
  // full digest, ef_sign's per-layer scales of the step: empty for the other rules), and whether the replica's
  // parameters were replaced meanwhile (a state transfer, or more than kMaxKeptVotes untaken): then the votes do not
  // describe the change, the parameters do. Not a session call (no Busy): a gradient source called inside one may take
  // them.
  nb::dict take_votes() {
    // Taken out under the lock, made into Python objects after it: building them may run Python
    // code (a collection) that lets another thread in, which must not find the lock held.
    decltype(applied_) taken;
    bool replaced = false;
    {
      const std::lock_guard lock(applied_mutex_);
      taken.swap(applied_);
      replaced = std::exchange(replaced_, false);
    }
    try {
      nb::list votes;
      for (const auto& v : taken) {
        votes.append(nb::make_tuple(v.round, words_to_numpy(v.vote), v.scale.lr, v.scale.weight_decay, v.full_digest,
                                    to_numpy(std::vector<float>(v.scales))));
      }
      nb::dict out;
      out["replaced"] = replaced;
      out["votes"] = votes;
      return out;
    } catch (...) {  // the votes are lost to the caller: the next call says the parameters moved
      const std::lock_guard lock(applied_mutex_);
      replaced_ = true;
      throw;
    }
  }

  // For a vote sent in pieces while backward runs: coordinates [offset, offset + len) of the open
  // round's partition `partition` (offset a multiple of 64; the piece ends at one or at d).
  void fold_range(std::uint32_t partition, std::size_t offset, nb::handle array) {
    Busy busy(*this, true);
    require_kind(open_work(), RoundWork::Kind::kVote);
    require_signs_of(partition);
    const auto values = cpu_floats(array, "gradient piece");
    if (offset <= dimension()) require_unfolded(partition, offset / 64, BitVector::words_for(offset + values.size()));
    Status status;
    {
      nb::gil_scoped_release released;
      status = worker_->fold_range(partition, dimension(), offset, values);
    }
    unwrap(std::move(status));
    auto& covered = covered_[partition];
    covered.resize(BitVector::words_for(dimension()), false);
    std::fill(covered.begin() + static_cast<std::ptrdiff_t>(offset / 64),
              covered.begin() + static_cast<std::ptrdiff_t>(BitVector::words_for(offset + values.size())), true);
  }

  // The same from packed signs computed elsewhere (a vote in pieces whose worker momentum and
  // packing run on the model's GPU): the signs of coordinates [offset, offset + 64·len(words)) of
  // the d, offset a multiple of 64 (runtime::NodeWorker::fold_signs_range).
  void fold_signs_range(std::uint32_t partition, std::size_t offset, nb::handle words) {
    Busy busy(*this, true);
    require_kind(open_work(), RoundWork::Kind::kVote);
    require_signs_of(partition);
    const Words view = words_of(words, "signs", /*writable=*/false);
    if (view.device != Device::kCpu) throw nb::value_error("signs: the packed signs must be a CPU array");
    if (offset % 64 != 0) {
      throw nb::value_error(("signs: a piece starts at a multiple of 64, not at " + std::to_string(offset)).c_str());
    }
    unwrap(worker_->fold_signs_range(partition, dimension(), offset / 64,
                                     std::span<const std::uint64_t>(view.data, view.count)));
    auto& covered = covered_[partition];
    covered.resize(BitVector::words_for(dimension()), false);
    std::fill(covered.begin() + static_cast<std::ptrdiff_t>(offset / 64),
              covered.begin() + static_cast<std::ptrdiff_t>(offset / 64 + view.count), true);
  }

  // Piece `index` of `count` of the open round's vote (runtime::NodeSession::submit_vote_piece),
  // over the coordinates every partition of the round has folded; the round is submitted once the
  // last piece is.
  void submit_vote_piece(double loss, std::uint32_t index, std::uint32_t count) {
    Busy busy(*this, true);
    const RoundWork& work = open_work();
    require_kind(work, RoundWork::Kind::kVote);
    const std::size_t words = BitVector::words_for(dimension());
    unwrap(runtime::check_vote_piece(words, index, count));
    const std::size_t begin = runtime::vote_piece_word(words, index, count);
    const std::size_t end = runtime::vote_piece_word(words, index + 1, count);
    for (auto partition : work.partitions) {
      const auto it = covered_.find(partition);
      if (it == covered_.end() || it->second.size() != words ||
          !std::all_of(it->second.begin() + static_cast<std::ptrdiff_t>(begin),
                       it->second.begin() + static_cast<std::ptrdiff_t>(end), [](bool folded) { return folded; })) {
        throw nb::value_error(("vote piece " + std::to_string(index) + ": partition " + std::to_string(partition) +
                               " is not folded over coordinates [" + std::to_string(64 * begin) + ", " +
                               std::to_string(std::min(dimension(), 64 * end)) + ")")
                                  .c_str());
      }
    }
    Status status;
    {
      nb::gil_scoped_release released;
      const auto vote = worker_->folded_vote_words(dimension(), begin, end);
      status = session_->submit_vote_piece(loss, index, count, vote);
    }
    unwrap(std::move(status));
    if (++pieces_sent_ == count) submitted_ = true;
  }

  // Submits the open round's vote (or exchange signs) over the partitions folded for it.
  void submit_folded(double loss) {
    Busy busy(*this, true);
    const RoundWork& work = open_work();
    for (auto partition : work.partitions) {
      if (std::find(folded_.begin(), folded_.end(), partition) == folded_.end()) {
        throw nb::value_error(
            ("partition " + std::to_string(partition) + " of round " + std::to_string(work.round) + " is not folded")
                .c_str());
      }
    }
    folded_.clear();
    if (work.kind == RoundWork::Kind::kPartitionSigns) {
      BitVector signs = worker_->folded_signs(work.partitions.front());
      send([&] { return session_->submit_partition_signs(loss, std::move(signs)); });
    } else if (work.kind == RoundWork::Kind::kVote) {
      BitVector vote;
      worker_->folded_vote(dimension(), vote);
      send([&] { return session_->submit_vote(loss, std::move(vote)); });
    } else {
      throw nb::value_error("the gradient path takes submit_gradient");
    }
  }

  void submit_vote(double loss, nb::handle words, std::size_t d) {
    submit_signs(RoundWork::Kind::kVote, loss, words, d);
  }
  void submit_partition_signs(double loss, nb::handle words, std::size_t d) {
    submit_signs(RoundWork::Kind::kPartitionSigns, loss, words, d);
  }

  // A CPU gradient is encoded by the session. A CUDA one (an honest node's, with a codec that has a
  // device encoder: encodes_on_device) is encoded on its GPU, queued on `stream` after the work
  // that computed it, into the bytes the session's codec would write from the round's random
  // stream; only those bytes come to the host. Error feedback's memory (Signum's momentum) then
  // stays on the GPU, copied into the session's codec before each save of the node state, and back
  // after a restore.
  void submit_gradient(double loss, nb::handle array, std::uintptr_t stream) {
    Busy busy(*this, true);
    const RoundWork& work = open_work();
    require_kind(work, RoundWork::Kind::kGradient);
    const auto [values, device] = floats_on_device(array, "gradient", /*writable=*/false);
    if (values.size() != dimension()) {
      throw nb::value_error(("gradient: expected " + std::to_string(dimension()) +
                             " values (the model's dimension), got " + std::to_string(values.size()))
                                .c_str());
    }
    if (device == Device::kCpu) {
      // The codec's state may be on the GPU (an earlier CUDA gradient's): the host encode goes on
      // from it, and a later CUDA gradient from the host's.
      if (codec_device_) {
        unwrap(codec_device_->sync_host());
        codec_device_->forget();  // the host's encode moves the state and makes the selection
      }
      // Read in place while the GIL is released: `values` holds the import of the caller's
      // memory (never a converted copy) until the call returns.
      send([&] { return session_->submit_gradient(loss, values); });
      return;
    }
    if (!encodes_on_device()) {
      throw nb::value_error(("gradient: a CUDA gradient is encoded on the GPU by an honest node whose codec has a "
                             "device encoder; this node's codec is '" +
                             node_.setup->options.codec + "'" + (byzantine() ? " and it is Byzantine" : "") +
                             ": pass a CPU array")
                                .c_str());
    }
    if (!session_->round_open()) {  // overtaken: nothing is sent, and the codec's state must not move
      submitted_ = true;
      return;
    }
    const int device_id = as_array(array, "gradient").device_id();
    if (!codec_device_) codec_device_ = std::make_unique<CodecOnDevice>(*session_->codec());
    Result<std::vector<std::uint8_t>> encoded = make_error(ErrorCode::kInternal, "not run");
    {
      nb::gil_scoped_release released;
      Rng rng = runtime::codec_rng(*node_.setup, work.round, node_.index);
      // The one copy of the message: from the encoder's pinned buffer into the vector that is sent.
      encode_stream_ = reinterpret_cast<void*>(stream);
      const auto pinned =
          codec_device_->encode(values.data(), device_id, replica_->model().layout(), rng, encode_stream_);
      encoded = pinned.ok()
                    ? Result<std::vector<std::uint8_t>>(std::vector<std::uint8_t>(pinned->begin(), pinned->end()))
                    : Result<std::vector<std::uint8_t>>(pinned.error());
    }
    std::vector<std::uint8_t> bytes = unwrap(std::move(encoded));
    send([&] { return session_->submit_encoded(loss, std::move(bytes)); });
  }

  // Whether submit_gradient takes a CUDA gradient (see there).
  bool encodes_on_device() const {
    if (!encodes_on_device_) {
      const auto codec = coding::make_codec(node_.setup->options.codec);  // the session's, before start()
      encodes_on_device_ = !byzantine() && !node_.setup->sign_vote() && codec.ok() && CodecOnDevice::supports(**codec);
    }
    return *encodes_on_device_;
  }

  nb::bytes global_set() const {
    Reading reading(*this);
    const auto set = session_->global_set();
    return nb::bytes(set.data(), set.size());
  }
  std::uint64_t round() const {
    Reading reading(*this);
    return session_->round();
  }
  std::size_t dimension() const { return replica_->dimension(); }
  std::size_t index() const { return node_.index; }
  std::size_t nodes() const { return node_.setup->options.nodes; }
  std::uint64_t rounds() const { return node_.setup->options.rounds; }
  bool byzantine() const { return node_.setup->is_byzantine(node_.index); }
  std::string model_digest() const {
    Reading reading(*this);
    return transport::to_hex(replica_->digest());
  }
  std::string state_digest() const {
    Reading reading(*this);
    return transport::to_hex(replica_->state_digest());
  }
  nb::object work() const {
    Reading reading(*this);
    if (!work_ || submitted_) return nb::none();
    return work_dict(*work_);
  }

  nb::dict stats() const {
    Reading reading(*this);
    const auto& s = session_->stats();
    nb::dict out;
    out["rounds"] = s.rounds;
    out["votes_sent"] = s.votes_sent;
    out["inputs_missing"] = s.inputs_missing;
    out["inputs_rejected"] = s.inputs_rejected;
    out["rejoins"] = s.rejoins;
    out["resynchronised"] = s.resynchronised;
    out["states_restored"] = keeper_->restored();
    out["abstained"] = s.abstained;
    out["send_failures"] = s.send_failures;
    out["pieces_relayed"] = s.pieces_relayed;
    out["pieces_rejected"] = s.pieces_rejected;
    out["decisions_requested"] = s.decisions_requested;
    return out;
  }

  bool closed() const { return closed_; }

  void close() {
    if (closed_ || !node_.transport) return;
    closed_ = true;
    nb::gil_scoped_release released;
    node_.transport->close();
  }

 private:
  Session() = default;

  // One Python thread at a time; no use after close().
  struct Busy {
    Session& s;
    explicit Busy(Session& session, bool needs_start = false) : s(session) {
      if (s.closed_) throw std::runtime_error("the session is closed");
      if (needs_start && !s.started_) throw std::runtime_error("the session is not started: call start() first");
      if (s.busy_.exchange(true)) throw std::runtime_error("the session is in use by another thread");
      s.busy_thread_ = std::this_thread::get_id();
    }
    ~Busy() { s.busy_ = false; }
  };
  // The accessors of what a call changes without the GIL (the round, the work, the digests, the
  // momentum, the stats): refused while another thread's call runs, as calls are; allowed on the
  // thread of the running call (a gradient source reading the session) and after close().
  struct Reading {
    const Session& s;
    bool owner = false;
    explicit Reading(const Session& session) : s(session) {
      if (s.busy_ && s.busy_thread_ == std::this_thread::get_id()) return;
      if (s.busy_.exchange(true)) throw std::runtime_error("the session is in use by another thread");
      s.busy_thread_ = std::this_thread::get_id();
      owner = true;
    }
    ~Reading() {
      if (owner) s.busy_ = false;
    }
  };

  // How long a wait runs without looking for a pending Ctrl-C (or another signal handler's
  // exception): between events, and every this often while none comes (the session's idle
  // timeout counts from the last message, so slicing the wait does not change it).
  static constexpr std::chrono::milliseconds kSignalCheckEvery{200};

  // Called without the GIL.
  static void check_signals() {
    nb::gil_scoped_acquire held;
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
  }

  template <typename Stop>
  NodeEvent wait(Stop stop) {
    Result<NodeEvent> result = make_error(ErrorCode::kInternal, "not polled");
    {
      nb::gil_scoped_release released;
      while (true) {
        auto next = session_->poll_for(kSignalCheckEvery);
        if (!next.ok()) {
          result = std::move(next).error();
          break;
        }
        if (next->has_value()) {
          saw(**next);
          if (stop(**next)) {
            result = std::move(**next);
            break;
          }
        }
        check_signals();
      }
    }
    if (!result.ok()) result = with_dial_error(std::move(result).error());
    return unwrap(std::move(result));
  }

  // A server that never answered (kTimeout): why, when the transport knows, as `ballot node` says.
  Error with_dial_error(Error error) const {
    if (error.code != ErrorCode::kTimeout) return error;
    if (const std::string why = node_.transport->dial_error(runtime::kServerId); !why.empty())
      error.message += " (the last attempt to reach it: " + why + ")";
    return error;
  }

  // What every event changes here: the node state file, the open round.
  void saw(const NodeEvent& event) {
    // Global top-k encoded on the GPU: the decision's global set goes to the selection there
    // before anything saves the codec's state (the session's codec took it when it encoded).
    if (event.kind == NodeEvent::Kind::kDecided && codec_device_ && !session_->global_set().empty()) {
      if (const Status taken =
              codec_device_->accept_global(session_->global_set(), replica_->model().layout(), encode_stream_);
          !taken.ok())
        throw std::runtime_error("the decision's global set on the GPU: " + taken.error().to_string());
    }
    // A state transfer past the round drops its selection there too (the session dropped the host's).
    if (event.kind == NodeEvent::Kind::kStateInstalled && event.moved && codec_device_) codec_device_->drop_selection();
    // A failure to gather the state to save (the caller's momentum source raised, the GPU copy
    // failed) skips that save, as a full disk does, and reaches the caller once this event's
    // bookkeeping below is done.
    std::exception_ptr failed_save;
    if (keeper_->saves(event)) {
      try {
        take_momentum();
        if (codec_device_) {  // the codec's state from the GPU (no GIL here: a C++ exception)
          if (const Status synced = codec_device_->sync_host(); !synced.ok())
            throw std::runtime_error("the node state's codec state from the GPU: " + synced.error().to_string());
        }
      } catch (...) {
        failed_save = std::current_exception();
      }
    }
    const std::uint64_t restored = keeper_->restored();
    if (!failed_save) keeper_->observe(event, *worker_, *session_, *replica_);
    if (codec_device_ && keeper_->restored() != restored) codec_device_->forget();  // the saved memory
    if (event.kind == NodeEvent::Kind::kStateInstalled) {  // track_votes: the parameters were replaced
      const std::lock_guard lock(applied_mutex_);
      applied_.clear();
      replaced_ = true;
    }
    if (event.kind == NodeEvent::Kind::kCompute) {
      work_ = event.work;
      submitted_ = false;
      folded_.clear();
      covered_.clear();
      pieces_sent_ = 0;
    } else if (event.kind != NodeEvent::Kind::kDecided || (work_ && event.round > work_->round)) {
      submitted_ = true;  // the open round, if any, was overtaken (the session sends nothing for it)
    }
    if (failed_save) std::rethrow_exception(failed_save);
  }

  // The caller's worker momentum into the NodeWorker (set_momentum_source), before a save.
  void take_momentum() {
    nb::gil_scoped_acquire held;  // called inside a session call that released the GIL
    if (!momentum_source_.is_valid() || momentum_source_.is_none()) return;
    for (const std::uint32_t partition : worker_->partitions()) {
      if (worker_->momentum(partition) == nullptr) continue;
      nb::object values = momentum_source_(partition);
      if (values.is_none()) continue;
      unwrap(worker_->set_momentum(partition, cpu_floats(values, "momentum source"), dimension()));
    }
  }

  const RoundWork& open_work() const {
    if (!work_ || submitted_)
      throw std::runtime_error("no round is open: call next_round() (or poll()) until a 'compute' event first");
    return *work_;
  }

  static void require_kind(const RoundWork& work, RoundWork::Kind kind) {
    if (work.kind != kind) {
      throw nb::value_error(
          ("round " + std::to_string(work.round) + " takes " + kind_name(work.kind) + ", not " + kind_name(kind))
              .c_str());
    }
  }

  void submit_signs(RoundWork::Kind kind, double loss, nb::handle words, std::size_t d) {
    Busy busy(*this, true);
    const RoundWork& work = open_work();
    require_kind(work, kind);
    if (d != dimension()) {
      throw nb::value_error(
          ("signs: d = " + std::to_string(d) + " is not the model's dimension " + std::to_string(dimension())).c_str());
    }
    const Words view = words_of(words, "signs", /*writable=*/false);
    if (view.device != Device::kCpu) throw nb::value_error("signs: the packed signs must be a CPU array");
    auto signs = unwrap(BitVector::from_words(d, std::span<const std::uint64_t>(view.data, view.count)));
    send([&] {
      return kind == RoundWork::Kind::kVote ? session_->submit_vote(loss, std::move(signs))
                                            : session_->submit_partition_signs(loss, std::move(signs));
    });
  }

  template <typename Send>
  void send(Send do_send) {
    // The session consumed the round, sent or not, also when a callback of the caller's (an
    // attack's gradient source) raised during the send.
    struct Consumed {
      bool& submitted;
      ~Consumed() { submitted = true; }
    } consumed{submitted_};
    Status status;
    {
      nb::gil_scoped_release released;
      status = do_send();
    }
    unwrap(std::move(status));
  }

  static nb::dict work_dict(const RoundWork& work) {
    nb::dict out;
    out["round"] = work.round;
    out["kind"] = kind_name(work.kind);
    out["partitions"] = nb::cast(work.partitions);
    out["deadline_ms"] = work.deadline_ms;
    out["state_digest"] = transport::to_hex(work.model_digest);
    return out;
  }

  static nb::dict event_dict(const NodeEvent& event) {
    nb::dict out;
    out["kind"] = kind_name(event.kind);
    out["round"] = event.round;
    out["moved"] = event.moved;
    out["work"] = event.kind == NodeEvent::Kind::kCompute ? nb::object(work_dict(event.work)) : nb::none();
    return out;
  }

  // Destroyed in reverse: the session before what it references.
  runtime::ClusterNode node_;
  std::unique_ptr<runtime::Replica> replica_;
  std::unique_ptr<runtime::NodeWorker> worker_;
  std::unique_ptr<runtime::NodeStateKeeper> keeper_;
  std::unique_ptr<runtime::NodeSession> session_;
  std::optional<RoundWork> work_;  // of the last kCompute
  bool submitted_ = true;          // work_ was submitted or overtaken
  std::optional<std::uint64_t> computed_round_;
  std::vector<std::uint32_t> folded_;                   // partitions of the open round folded so far
  std::map<std::uint32_t, std::vector<bool>> covered_;  // their words folded (fold_range, fold)
  std::uint32_t pieces_sent_ = 0;                       // of the open round's vote
  nb::object gradient_source_;                          // set_gradient_source
  nb::object momentum_source_;                          // set_momentum_source
  std::unique_ptr<CodecOnDevice> codec_device_;
  void* encode_stream_ = nullptr;  // the caller's stream of the last device encode (its global set goes there) // the
                                   // session codec's GPU side (CUDA gradients)
  mutable std::optional<bool> encodes_on_device_;
  struct AppliedVote {
    std::uint64_t round;
    BitVector vote;
    learning::StepScale scale;
    bool full_digest;
    std::vector<float> scales;  // ef_sign's, one per layer
  };
  static constexpr std::size_t kMaxKeptVotes = 64;
  std::mutex applied_mutex_;
  std::vector<AppliedVote> applied_;  // track_votes, since the last take_votes
  bool replaced_ = true;              // the parameters were replaced since the last take_votes
  bool started_ = false;
  bool closed_ = false;
  mutable std::atomic<bool> busy_{false};
  mutable std::thread::id busy_thread_;  // whose call holds busy_ (read and written with the GIL)
};

}  // namespace

void register_session(nb::module_& m) {
  nb::class_<Session>(m, "NodeSession")
      .def_static("from_cluster_file", &Session::from_cluster_file, nb::arg("path"), nb::arg("index"))
      .def("start", &Session::start)
      .def("poll", &Session::poll)
      .def("poll_for", &Session::poll_for, nb::arg("timeout"))
      .def("next_round", &Session::next_round)
      .def("await_decision", &Session::await_decision)
      .def("compute", &Session::compute)
      .def("submit_vote", &Session::submit_vote, nb::arg("loss"), nb::arg("signs"), nb::arg("d"))
      .def("submit_partition_signs", &Session::submit_partition_signs, nb::arg("loss"), nb::arg("signs"), nb::arg("d"))
      .def("submit_gradient", &Session::submit_gradient, nb::arg("loss"), nb::arg("gradient"), nb::arg("stream") = 0)
      .def_prop_ro("encodes_on_device", &Session::encodes_on_device)
      .def("parameters", &Session::parameters)
      .def("tensors", &Session::tensors)
      .def("partition_indices", &Session::partition_indices, nb::arg("round"), nb::arg("partition"))
      .def("training", &Session::training)
      .def("fold", &Session::fold, nb::arg("partition"), nb::arg("gradient"))
      .def("submit_folded", &Session::submit_folded, nb::arg("loss"))
      .def("fold_signs", &Session::fold_signs, nb::arg("partition"), nb::arg("signs"))
      .def("fold_signs_range", &Session::fold_signs_range, nb::arg("partition"), nb::arg("offset"), nb::arg("signs"))
      .def("momentum", &Session::momentum, nb::arg("partition"))
      .def("set_momentum_source", &Session::set_momentum_source, nb::arg("source").none())
      .def("optimizer_state", &Session::optimizer_state)
      .def("track_votes", &Session::track_votes)
      .def("take_votes", &Session::take_votes)
      .def("fold_range", &Session::fold_range, nb::arg("partition"), nb::arg("offset"), nb::arg("gradient"))
      .def("submit_vote_piece", &Session::submit_vote_piece, nb::arg("loss"), nb::arg("index"), nb::arg("count"))
      .def("set_gradient_source", &Session::set_gradient_source, nb::arg("source").none())
      .def("model_digest", &Session::model_digest)
      .def("state_digest", &Session::state_digest)
      .def("stats", &Session::stats)
      .def("work", &Session::work)
      .def("close", &Session::close)
      .def_prop_ro("global_set", &Session::global_set)
      .def_prop_ro("round", &Session::round)
      .def_prop_ro("dimension", &Session::dimension)
      .def_prop_ro("index", &Session::index)
      .def_prop_ro("nodes", &Session::nodes)
      .def_prop_ro("rounds", &Session::rounds)
      .def_prop_ro("byzantine", &Session::byzantine)
      .def_prop_ro("closed", &Session::closed);
}

}  // namespace ballot::python
