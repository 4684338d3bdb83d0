// Fuzz target: a node's local state file (NodeWorker::load_state, runtime/node_worker.h: the worker
// momentum of each partition it computes) on hostile bytes. Invariants: nothing crashes or reads
// out of bounds; a rejected blob leaves the worker as it was; an accepted one saves to a blob that
// loads again to the same state.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>

#include "runtime/node_worker.h"
#include "runtime/replica.h"
#include "runtime/training.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/state_fuzz_support.h"

namespace {

using namespace ballot;

using ballot::fuzzing::check;

struct Fixture {
  Fixture() {
    const auto options = fuzzing::node_state_run();
    auto data = runtime::load_training_data(options);
    check(data.ok());
    auto made =
        runtime::make_training_setup(options, std::make_shared<const learning::TrainTestSplit>(std::move(*data)));
    check(made.ok());
    setup = std::make_unique<runtime::TrainingSetup>(std::move(*made));
    auto made_replica = runtime::Replica::create(*setup);
    check(made_replica.ok());
    replica = std::make_unique<runtime::Replica>(std::move(*made_replica));
  }
  std::unique_ptr<runtime::TrainingSetup> setup;
  std::unique_ptr<runtime::Replica> replica;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Fixture fixture;
  const std::span<const std::uint8_t> bytes(data, size);
  const std::size_t dimension = fixture.replica->dimension();
  runtime::NodeWorker worker(*fixture.setup, 0);
  // One round first, so that "unchanged" is checked against momentum that holds something.
  BitVector vote;
  worker.vote(*fixture.replica, 0, vote);
  const auto before = worker.save_state();
  if (!worker.load_state(bytes, dimension).ok()) {
    check(worker.save_state() == before);
    return 0;
  }
  const auto saved = worker.save_state();
  check(worker.load_state(saved, dimension).ok());
  check(worker.save_state() == saved);
  return 0;
}
