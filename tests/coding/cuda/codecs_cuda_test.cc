// The codecs on a CUDA device (coding/cuda) against the CPU codecs: the same bytes from the same
// gradient, layout and Rng (and the Rng moved the same way), the same floats added by the
// decoders, the same errors for bad messages. Skips without a GPU, except the argument checks.
#include "coding/cuda/codecs_cuda.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "coding/dgc.h"
#include "coding/global_topk.h"
#include "coding/quantizers.h"
#include "coding/wire_format.h"
#include "kernels/cuda/cuda_kernels.h"
#include "tests/coding/codec_test_util.h"

namespace ballot::coding::cuda {
namespace {

const char* const kSpecs[] = {
    "fp32",
    "fp16",
    "bf16",
    "qsgd:ef=0,s=1",
    "qsgd:ef=0,s=16",
    "qsgd:ef=0,s=255,granularity=layer",
    "qsgd:ef=0,s=65535",
    "qsgd:ef=0,s=5,granularity=layer",
    "qsgd:ef=0,elias=1,s=1",
    "qsgd:ef=0,elias=1,s=16",
    "qsgd:ef=0,elias=1,s=5,granularity=layer",
    "qsgd:ef=0,elias=1,s=65535,granularity=layer",
    "terngrad:ef=0",
    "terngrad:ef=0,granularity=model",
    "terngrad:ef=0,clip=2.5",
    "terngrad:ef=0,clip=1,granularity=model",
    "topk:ef=0,ratio=0.01",
    "topk:ef=0,ratio=0.3,granularity=layer",
    "topk:ef=0,k=7",
    "topk:ef=0,k=100000,granularity=layer",
    "sign",
    "scaled_sign:ef=0",
    "scaled_sign:ef=0,granularity=model",
    "onebit:ef=0",
    "onebit:ef=0,granularity=model",
    "randomk:ef=0,ratio=0.01",
    "randomk:ef=0,k=7,granularity=layer",
    "randomk:ef=0,ratio=1",
    "threshold:ef=0,tau=0.5",
    "threshold:ef=0,tau=0",
    "threshold:ef=0,tau=1e30",
};

// Layers whose sizes straddle the lane (16), word (64), rounding-group (128) and chunk (4096)
// boundaries, one empty.
GradientLayout layered(std::size_t d) {
  if (d == 0) return GradientLayout::whole(0);
  const std::size_t pieces[] = {63, 0, 4097, 129, 1, 64};
  std::vector<std::pair<std::string, std::size_t>> sizes;
  std::size_t used = 0;
  for (std::size_t i = 0; used < d; ++i) {
    const std::size_t size = std::min(d - used, pieces[i % 6]);
    sizes.push_back({"layer" + std::to_string(i), size});
    used += size;
  }
  return GradientLayout::from_sizes(sizes).value();
}

enum class Kind { kNormal, kSpecial, kTies, kZero };

std::vector<float> gradient(std::size_t d, Kind kind, std::uint64_t seed) {
  auto x = testing::normal_values(d, seed);
  for (std::size_t i = 0; i < d; ++i) {
    switch (kind) {
      case Kind::kNormal:
        x[i] *= std::ldexp(1.0f, static_cast<int>(i % 23) - 11);
        break;
      case Kind::kSpecial:
        if (i % 97 == 5) x[i] = std::numeric_limits<float>::infinity();
        if (i % 89 == 3) x[i] = -std::numeric_limits<float>::quiet_NaN();
        if (i % 13 == 1) x[i] = -0.0f;
        if (i % 211 == 7) x[i] = 1e-42f;  // subnormal
        break;
      case Kind::kTies:
        x[i] = std::round(x[i] * 2.0f) / 2.0f;  // few distinct magnitudes, many ties
        break;
      case Kind::kZero:
        x[i] = (i % 2 == 0) ? 0.0f : -0.0f;
        break;
    }
  }
  return x;
}

class CodecsCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  }
};

// The bits of each float, every NaN as one pattern: IEEE leaves the sign and payload of a NaN that
// arithmetic produces to the hardware (x86 gives 0xFFC00000, a GPU 0x7FFFFFFF), so "the same bits"
// means the same bits for numbers and a NaN for a NaN.
std::vector<std::uint32_t> float_bits(const std::vector<float>& v) {
  std::vector<std::uint32_t> bits(v.size());
  std::memcpy(bits.data(), v.data(), 4 * v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) bits[i] = 0x7FC00000u;
  }
  return bits;
}

void expect_same_as_cpu(const std::string& spec, const std::vector<float>& x, const GradientLayout& layout) {
  SCOPED_TRACE(spec + ", d = " + std::to_string(x.size()) + ", " + std::to_string(layout.num_layers()) + " layers");
  auto cpu_codec = testing::codec(spec);
  auto gpu_codec = testing::codec(spec);
  ASSERT_TRUE(on_device(*gpu_codec));
  Rng cpu_rng(1234, 5), gpu_rng(1234, 5);
  cpu_rng.next_u32();  // an unaligned position: the rounding window starts at the next block
  gpu_rng.next_u32();
  const auto expected = cpu_codec->encode(x, layout, cpu_rng);
  auto encoded = encode_on_device(*gpu_codec, x, layout, gpu_rng);
  ASSERT_TRUE(encoded.ok()) << encoded.error().to_string();
  EXPECT_EQ(gpu_rng.position(), cpu_rng.position());
  ASSERT_EQ(encoded->bytes.size(), expected.bytes.size());
  if (encoded->bytes != expected.bytes) {
    std::size_t first = 0;
    while (encoded->bytes[first] == expected.bytes[first]) ++first;
    ADD_FAILURE() << "the device encoding differs from byte " << first << " of " << expected.bytes.size();
    return;
  }
  // Decoding: onto a non-zero accumulator (with −0 entries), weight 0.5.
  std::vector<float> cpu_sum = testing::normal_values(x.size(), 99), gpu_sum;
  for (std::size_t i = 0; i < cpu_sum.size(); i += 5) cpu_sum[i] = -0.0f;
  gpu_sum = cpu_sum;
  ASSERT_TRUE(cpu_codec->decode_add(expected.view(), layout, cpu_sum, 0.5f).ok());
  const Status decoded = decode_add_on_device(*gpu_codec, expected.view(), layout, gpu_sum, 0.5f);
  ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
  EXPECT_EQ(float_bits(gpu_sum), float_bits(cpu_sum));
}

TEST_F(CodecsCuda, EncodeAndDecodeAsTheCpuAtBoundarySizes) {
  for (const std::size_t d : {0, 1, 63, 64, 65, 127, 129, 4097, 33333}) {
    for (const char* spec : kSpecs) {
      const auto x = gradient(d, Kind::kNormal, d);
      expect_same_as_cpu(spec, x, GradientLayout::whole(d));
      expect_same_as_cpu(spec, x, layered(d));
    }
  }
}

TEST_F(CodecsCuda, EncodeAndDecodeAsTheCpuOnALargeGradient) {
  const std::size_t d = (std::size_t{1} << 20) + 3;
  for (const char* spec : kSpecs) {
    expect_same_as_cpu(spec, gradient(d, Kind::kNormal, 7), GradientLayout::whole(d));
  }
  expect_same_as_cpu("qsgd:ef=0,s=16,granularity=layer", gradient(d, Kind::kNormal, 8), layered(d));
  expect_same_as_cpu("topk:ef=0,ratio=0.01,granularity=layer", gradient(d, Kind::kTies, 8), layered(d));
}

// Top-k of a large segment selects among candidates above a sampled threshold; these inputs make
// the sample mislead it (ties at the threshold, non-finite values, all zeros: every entry a
// candidate; the largest entries exactly between the sample points), which must change nothing.
TEST_F(CodecsCuda, TopKOfALargeSegmentWhateverTheSampleSays) {
  const std::size_t d = (std::size_t{1} << 21) + 5;
  const auto whole = GradientLayout::whole(d);
  for (const char* spec : {"topk:ef=0,ratio=0.01", "topk:ef=0,k=3", "topk:ef=0,ratio=0.1"}) {
    expect_same_as_cpu(spec, gradient(d, Kind::kTies, 21), whole);
    expect_same_as_cpu(spec, gradient(d, Kind::kSpecial, 22), whole);
    expect_same_as_cpu(spec, gradient(d, Kind::kZero, 23), whole);
    auto hidden = gradient(d, Kind::kNormal, 24);
    for (std::size_t i = 5; i < d; i += 32) hidden[i] += 100.0f;  // the sample takes every 32nd entry from 0
    expect_same_as_cpu(spec, hidden, whole);
  }
}

TEST_F(CodecsCuda, NonFiniteTiedAndZeroGradients) {
  for (const Kind kind : {Kind::kSpecial, Kind::kTies, Kind::kZero}) {
    for (const std::size_t d : {1, 65, 5000, 70001}) {
      for (const char* spec : kSpecs) {
        const auto x = gradient(d, kind, 3 * d + static_cast<std::size_t>(kind));
        expect_same_as_cpu(spec, x, GradientLayout::whole(d));
        expect_same_as_cpu(spec, x, layered(d));
      }
    }
  }
}

TEST_F(CodecsCuda, BadMessagesFailAsOnTheCpuAndChangeNothing) {
  const std::size_t d = 1000;
  const auto layout = layered(d);
  for (const char* spec :
       {"qsgd:ef=0,s=5", "terngrad:ef=0", "topk:ef=0,ratio=0.05", "scaled_sign:ef=0", "sign", "onebit:ef=0",
        "randomk:ef=0,ratio=0.05", "threshold:ef=0,tau=0.5", "fp16", "fp32", "dgc:ratio=0.05,granularity=layer",
        "gtopk:ratio=0.05,granularity=layer", "qsgd:ef=0,s=5,elias=1"}) {
    SCOPED_TRACE(spec);
    auto codec = testing::codec(spec);
    Rng rng(3, 4);
    const auto good = codec->encode(gradient(d, Kind::kNormal, 1), layout, rng);
    std::vector<std::vector<std::uint8_t>> bad = {
        std::vector<std::uint8_t>(good.bytes.begin(), good.bytes.end() - 1),  // truncated
        good.bytes,
    };
    const std::string name = spec;
    if (name.starts_with("topk") || name.starts_with("dgc") || name.starts_with("gtopk")) {
      bad[1][kHeaderBytes + 4 * layout.num_layers()] = 0xFF;  // an index out of its segment (63 coordinates)
    } else if (name.starts_with("threshold")) {
      ASSERT_GE(good.bytes.size(), kHeaderBytes + 12);         // at least one pair kept
      std::memset(bad[1].data() + kHeaderBytes + 4, 0xFF, 4);  // the first index out of the model
    } else if (name.starts_with("randomk")) {
      bad[1][kHeaderBytes] = 0xFF;  // a count above its segment's size (63)
    } else if (name.find("elias=1") != std::string::npos) {
      // One bit more in the count than the codes hold: trailing bits, or a missing word.
      const std::size_t count_at = kHeaderBytes + 4 + 4 * segments_of(layout, codec->granularity()).size();
      const std::uint64_t bits = load_pod<std::uint64_t>(bad[1].data() + count_at) + 1;
      std::memcpy(bad[1].data() + count_at, &bits, 8);
    } else if (name.starts_with("fp")) {
      bad[1].push_back(0);  // a byte after the values
    } else {
      bad[1].back() = 0xFF;  // padding bits of the streams
    }
    for (const auto& message : bad) {
      std::vector<float> cpu_sum(d, 1.0f), gpu_sum(d, 1.0f);
      const Status cpu = codec->decode_add(message, layout, cpu_sum);
      const Status gpu = decode_add_on_device(*codec, message, layout, gpu_sum);
      ASSERT_FALSE(cpu.ok());
      ASSERT_FALSE(gpu.ok());
      EXPECT_EQ(gpu.error().code, cpu.error().code);
      EXPECT_EQ(gpu.error().message, cpu.error().message);
      EXPECT_EQ(gpu_sum, std::vector<float>(d, 1.0f));
    }
  }
}

// Error feedback with the memory on the device against ErrorFeedback on the CPU, and Signum with
// its momentum there against SignumCodec: the same message every round, the same state blob at the
// end, and either side resumes from the other's state.
TEST_F(CodecsCuda, StateOnTheDeviceKeepsTheCpuState) {
  for (const std::size_t d : {1000, 70001}) {
    for (const char* spec :
         {"topk:ratio=0.05,ef=1", "topk:ratio=0.0078125,ef=1,granularity=layer", "scaled_sign:ef=1",
          "scaled_sign:ef=1,granularity=model", "sign:ef=1", "threshold:tau=0.5,ef=1", "threshold:tau=1.2345678,ef=1",
          "fp16:ef=1", "bf16:ef=1", "onebit", "onebit:granularity=model", "signum", "signum:beta=0.5", "signum:beta=0",
          "signum:ef=1", "signum:beta=0.5,ef=1"}) {
      for (const auto& layout : {GradientLayout::whole(d), layered(d)}) {
        SCOPED_TRACE(std::string(spec) + ", d = " + std::to_string(d) + ", " + std::to_string(layout.num_layers()) +
                     " layers");
        auto cpu = testing::codec(spec);
        auto created = DeviceStatefulCodec::create(*cpu);
        ASSERT_TRUE(created.ok()) << created.error().to_string();
        auto& device = **created;
        const std::size_t bytes = cpu->wire_size(layout);
        float* d_gradient = nullptr;
        std::uint8_t* d_message = nullptr;
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_gradient), 4 * d), cudaSuccess);
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_message), bytes), cudaSuccess);
        Rng cpu_rng(8, 1), gpu_rng(8, 1);
        for (std::uint64_t round = 0; round < 4; ++round) {
          const auto g = gradient(d, Kind::kNormal, 50 + round);
          ASSERT_EQ(cudaMemcpy(d_gradient, g.data(), 4 * d, cudaMemcpyHostToDevice), cudaSuccess);
          const auto expected = cpu->encode(g, layout, cpu_rng);
          const auto written = device.encode(d_gradient, layout, gpu_rng, d_message, nullptr);
          ASSERT_TRUE(written.ok()) << written.error().to_string();
          std::vector<std::uint8_t> message(*written);
          ASSERT_EQ(cudaMemcpy(message.data(), d_message, *written, cudaMemcpyDeviceToHost), cudaSuccess);
          ASSERT_EQ(message, expected.bytes) << "round " << round;
          EXPECT_EQ(gpu_rng.position(), cpu_rng.position());
        }
        auto saved = device.save_state(nullptr);
        ASSERT_TRUE(saved.ok());
        EXPECT_EQ(*saved, cpu->save_state());
        // Each resumes from the other's state and encodes one more round alike.
        auto cpu_resumed = testing::codec(spec);
        ASSERT_TRUE(cpu_resumed->load_state(*saved, layout).ok());
        auto gpu_resumed = std::move(DeviceStatefulCodec::create(*cpu).value());
        ASSERT_TRUE(gpu_resumed->load_state(cpu->save_state(), layout, nullptr).ok());
        const auto g = gradient(d, Kind::kNormal, 99);
        ASSERT_EQ(cudaMemcpy(d_gradient, g.data(), 4 * d, cudaMemcpyHostToDevice), cudaSuccess);
        Rng a(3, 3), b(3, 3);
        const auto expected = cpu_resumed->encode(g, layout, a);
        const auto written = gpu_resumed->encode(d_gradient, layout, b, d_message, nullptr);
        ASSERT_TRUE(written.ok()) << written.error().to_string();
        std::vector<std::uint8_t> message(*written);
        ASSERT_EQ(cudaMemcpy(message.data(), d_message, *written, cudaMemcpyDeviceToHost), cudaSuccess);
        EXPECT_EQ(message, expected.bytes);
        auto after = gpu_resumed->save_state(nullptr);
        ASSERT_TRUE(after.ok());
        EXPECT_EQ(*after, cpu_resumed->save_state());
        cudaFree(d_gradient);
        cudaFree(d_message);
      }
    }
  }
}

// A sparse message with each NaN value as one pattern (see float_bits): DGC's accumulation makes its
// NaNs by arithmetic.
std::vector<std::uint8_t> sparse_bits(std::vector<std::uint8_t> bytes, std::size_t segments) {
  const std::size_t pairs_at = kHeaderBytes + 4 * segments;
  if (bytes.size() < pairs_at) return bytes;
  const std::size_t k = (bytes.size() - pairs_at) / 8;
  for (std::size_t j = 0; j < k; ++j) {
    std::uint8_t* at = bytes.data() + pairs_at + 4 * k + 4 * j;
    float value;
    std::memcpy(&value, at, 4);
    if (std::isnan(value)) {
      const std::uint32_t nan = 0x7FC00000u;
      std::memcpy(at, &nan, 4);
    }
  }
  return bytes;
}

// The state arrays of a dgc or gtopk blob (u and v, or the residual), NaN as one pattern, and DGC's
// round count.
std::pair<std::vector<std::vector<std::uint32_t>>, std::uint64_t> state_of(const std::string& spec,
                                                                           std::span<const std::uint8_t> blob,
                                                                           const GradientLayout& layout) {
  auto codec = testing::codec(spec);
  EXPECT_TRUE(codec->load_state(blob, layout).ok()) << spec;
  if (const auto* dgc = dynamic_cast<const DgcCodec*>(codec.get())) {
    const std::vector<float> u(dgc->momentum().begin(), dgc->momentum().end());
    const std::vector<float> v(dgc->velocity().begin(), dgc->velocity().end());
    return {{float_bits(u), float_bits(v)}, dgc->rounds()};
  }
  const auto& gtopk = dynamic_cast<const GlobalTopKCodec&>(*codec);
  return {{float_bits(std::vector<float>(gtopk.residual().begin(), gtopk.residual().end()))}, 0};
}

// DGC and global top-k with their state on the device, round after round, on gradients that make
// DGC's sampled threshold pass too many (ties, zeros: the exact top-k finishes) or meet non-finite
// values, with a warm-up, clipping, and segments above and below the exact-selection size; global
// top-k also takes back, after each round, what an aggregator's global set left out.
TEST_F(CodecsCuda, DgcAndGlobalTopKFollowTheCpuCodecs) {
  const Kind kinds[] = {Kind::kNormal, Kind::kSpecial, Kind::kTies, Kind::kZero, Kind::kNormal};
  for (const char* spec :
       {"dgc:ratio=0.01", "dgc:ratio=0.001,clip=0.5,warmup=3", "dgc:ratio=0.05,granularity=model,momentum=0",
        "dgc:ratio=1,sample=0.5", "gtopk:ratio=0.01", "gtopk:k=9,granularity=layer"}) {
    for (const std::size_t d : {std::size_t{1}, std::size_t{5000}, std::size_t{70001}, (std::size_t{1} << 20) + 3}) {
      for (const auto& layout : {GradientLayout::whole(d), layered(d)}) {
        SCOPED_TRACE(std::string(spec) + ", d = " + std::to_string(d) + ", " + std::to_string(layout.num_layers()) +
                     " layers");
        auto cpu = testing::codec(spec);
        auto created = DeviceStatefulCodec::create(*cpu);
        ASSERT_TRUE(created.ok()) << created.error().to_string();
        auto& device = **created;
        const std::size_t S = segments_of(layout, cpu->granularity()).size();
        float* d_gradient = nullptr;
        std::uint8_t* d_message = nullptr;
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_gradient), 4 * d), cudaSuccess);
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_message), cpu->wire_size(layout)), cudaSuccess);
        Rng cpu_rng(5, 2), gpu_rng(5, 2);
        for (std::size_t round = 0; round < std::size(kinds); ++round) {
          const auto g = gradient(d, kinds[round], 40 + round);
          ASSERT_EQ(cudaMemcpy(d_gradient, g.data(), 4 * d, cudaMemcpyHostToDevice), cudaSuccess);
          const auto expected = cpu->encode(g, layout, cpu_rng);
          const auto written = device.encode(d_gradient, layout, gpu_rng, d_message, nullptr);
          ASSERT_TRUE(written.ok()) << written.error().to_string();
          std::vector<std::uint8_t> message(*written);
          ASSERT_EQ(cudaMemcpy(message.data(), d_message, *written, cudaMemcpyDeviceToHost), cudaSuccess);
          ASSERT_EQ(sparse_bits(message, S), sparse_bits(expected.bytes, S)) << "round " << round;
          EXPECT_EQ(gpu_rng.position(), cpu_rng.position()) << "round " << round;
          if (auto* gtopk = dynamic_cast<GlobalTopKCodec*>(cpu.get())) {
            GlobalTopKCodec other(gtopk->options());
            Rng unused(1);
            const auto theirs = other.encode(gradient(d, Kind::kNormal, 900 + round), layout, unused);
            const std::span<const std::uint8_t> both[] = {expected.view(), theirs.view()};
            const auto global = global_topk_reduce(both, layout, {gtopk->options(), false});
            ASSERT_TRUE(global.ok()) << global.error().to_string();
            ASSERT_TRUE(gtopk->accept_global(global->view(), layout).ok());
            const Status accepted =
                dynamic_cast<DeviceGlobalTopK&>(device).accept_global(global->view(), layout, nullptr);
            ASSERT_TRUE(accepted.ok()) << accepted.error().to_string();
          }
        }
        auto saved = device.save_state(nullptr);
        ASSERT_TRUE(saved.ok()) << saved.error().to_string();
        EXPECT_EQ(state_of(spec, *saved, layout), state_of(spec, cpu->save_state(), layout));
        // The device resumes from the CPU's state and encodes one more round alike.
        auto resumed = std::move(DeviceStatefulCodec::create(*cpu).value());
        ASSERT_TRUE(resumed->load_state(cpu->save_state(), layout, nullptr).ok());
        const auto g = gradient(d, Kind::kNormal, 99);
        ASSERT_EQ(cudaMemcpy(d_gradient, g.data(), 4 * d, cudaMemcpyHostToDevice), cudaSuccess);
        const auto expected = cpu->encode(g, layout, cpu_rng);
        const auto written = resumed->encode(d_gradient, layout, gpu_rng, d_message, nullptr);
        ASSERT_TRUE(written.ok()) << written.error().to_string();
        std::vector<std::uint8_t> message(*written);
        ASSERT_EQ(cudaMemcpy(message.data(), d_message, *written, cudaMemcpyDeviceToHost), cudaSuccess);
        EXPECT_EQ(sparse_bits(message, S), sparse_bits(expected.bytes, S));
        // Their messages decode into a device accumulator as on the CPU.
        std::vector<float> cpu_sum = gradient(d, Kind::kNormal, 3), gpu_sum = cpu_sum;
        ASSERT_TRUE(cpu->decode_add(expected.bytes, layout, cpu_sum, 0.5f).ok());
        const Status decoded = decode_add_on_device(*cpu, expected.bytes, layout, gpu_sum, 0.5f);
        ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
        EXPECT_EQ(float_bits(gpu_sum), float_bits(cpu_sum));
        cudaFree(d_gradient);
        cudaFree(d_message);
      }
    }
  }
}

// A gradient whose size changes restarts DGC's u and v at zero and keeps its round count (the
// warm-up goes on), as on the CPU; a global set accepted twice, or after a state load, puts nothing
// back the second time.
TEST_F(CodecsCuda, DgcAndGlobalTopKAcrossSizeChangesAndRepeatedAccepts) {
  for (const char* spec : {"dgc:ratio=0.01,warmup=6", "gtopk:ratio=0.02"}) {
    SCOPED_TRACE(spec);
    auto cpu = testing::codec(spec);
    auto device = std::move(DeviceStatefulCodec::create(*cpu).value());
    Rng cpu_rng(9, 1), gpu_rng(9, 1);
    for (const std::size_t d : {6000, 6000, 9001, 9001, 6000}) {
      const auto layout = GradientLayout::whole(d);
      const auto g = gradient(d, Kind::kNormal, d + gpu_rng.position());
      float* d_gradient = nullptr;
      std::uint8_t* d_message = nullptr;
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_gradient), 4 * d), cudaSuccess);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_message), cpu->wire_size(layout)), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(d_gradient, g.data(), 4 * d, cudaMemcpyHostToDevice), cudaSuccess);
      const auto expected = cpu->encode(g, layout, cpu_rng);
      const auto written = device->encode(d_gradient, layout, gpu_rng, d_message, nullptr);
      ASSERT_TRUE(written.ok()) << written.error().to_string();
      std::vector<std::uint8_t> message(*written);
      ASSERT_EQ(cudaMemcpy(message.data(), d_message, *written, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(message, expected.bytes) << "d = " << d;
      EXPECT_EQ(device->size(), d);
      if (auto* gtopk = dynamic_cast<GlobalTopKCodec*>(cpu.get())) {
        const std::span<const std::uint8_t> one[] = {expected.view()};
        GlobalTopKReduceOptions half{gtopk->options(), false};
        half.budget.ratio = 0.01;  // the global set keeps half of what was sent
        const auto global = global_topk_reduce(one, layout, half).value();
        auto& twin = dynamic_cast<DeviceGlobalTopK&>(*device);
        for (int repeat = 0; repeat < 2; ++repeat) {
          ASSERT_TRUE(gtopk->accept_global(global.view(), layout).ok());
          ASSERT_TRUE(twin.accept_global(global.view(), layout, nullptr).ok());
        }
      }
      auto saved = device->save_state(nullptr);
      ASSERT_TRUE(saved.ok());
      EXPECT_EQ(*saved, cpu->save_state()) << "d = " << d;
      cudaFree(d_gradient);
      cudaFree(d_message);
    }
    if (const auto* dgc = dynamic_cast<const DgcCodec*>(cpu.get())) {
      EXPECT_EQ(dynamic_cast<DeviceDgc&>(*device).rounds(), dgc->rounds());
    }
  }
}

// Signum on the device through the fused momentum pass: special values (−0 and NaN pack as 1), a
// gradient whose size changes (the momentum restarts at zero, as on the CPU), the message through
// encode_to_host, and its decode into a device accumulator adding the CPU decoder's floats.
TEST_F(CodecsCuda, SignumOnTheDeviceFollowsTheCpuCodec) {
  auto cpu = testing::codec("signum:beta=0.75");
  auto created = DeviceStatefulCodec::create(*cpu);
  ASSERT_TRUE(created.ok()) << created.error().to_string();
  Rng cpu_rng(1, 1), gpu_rng(1, 1);
  for (const auto& [d, kind] : std::vector<std::pair<std::size_t, Kind>>{
           {1000, Kind::kNormal}, {1000, Kind::kSpecial}, {70001, Kind::kNormal}, {65, Kind::kZero}}) {
    SCOPED_TRACE("d = " + std::to_string(d));
    const auto layout = GradientLayout::whole(d);
    const auto g = gradient(d, kind, 7 + d);
    float* d_gradient = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_gradient), 4 * d), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_gradient, g.data(), 4 * d, cudaMemcpyHostToDevice), cudaSuccess);
    const auto expected = cpu->encode(g, layout, cpu_rng);
    const auto message = (*created)->encode_to_host(d_gradient, layout, gpu_rng, nullptr);
    ASSERT_TRUE(message.ok()) << message.error().to_string();
    EXPECT_EQ(std::vector<std::uint8_t>(message->begin(), message->end()), expected.bytes);
    EXPECT_EQ((*created)->size(), d);
    std::vector<float> cpu_sum = gradient(d, Kind::kNormal, 3), gpu_sum = cpu_sum;
    ASSERT_TRUE(cpu->decode_add(expected.bytes, layout, cpu_sum, 0.5f).ok());
    const Status decoded = decode_add_on_device(*cpu, expected.bytes, layout, gpu_sum, 0.5f);
    ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
    EXPECT_EQ(float_bits(gpu_sum), float_bits(cpu_sum));
    cudaFree(d_gradient);
  }
  // The last gradient (zeros, after a size change) left no NaN in the momentum: the blobs are equal.
  auto saved = (*created)->save_state(nullptr);
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(*saved, cpu->save_state());
}

// Needs no device: error feedback on the device takes ef=1 over a codec with a device encoder,
// Signum takes signum, and a bad state blob is refused before anything is uploaded.
TEST(CodecsCudaArguments, DeviceErrorFeedbackTakesOnlyErrorFeedbackOverADeviceCodec) {
  for (const char* spec : {"qsgd:ef=0", "topk:ratio=0.1", "onebit:ef=0", "signum"}) {
    const auto created = DeviceErrorFeedback::create(*testing::codec(spec));
    ASSERT_FALSE(created.ok()) << spec;
    EXPECT_EQ(created.error().code, ErrorCode::kInvalidArgument) << spec;
  }
  auto created = DeviceErrorFeedback::create(*testing::codec("topk:ratio=0.1,ef=1"));
  ASSERT_TRUE(created.ok());
  EXPECT_EQ((*created)->inner().spec(), testing::codec("topk:ratio=0.1")->spec());
  // The inner codec is copied from its options, not re-parsed from its spec (which keeps six
  // decimals: 0.0078125 would print as 0.007812, a budget of 7812 instead of 7813 at d = 10^6).
  for (const char* spec : {"topk:ratio=0.0078125,ef=1", "threshold:tau=0.1234567,ef=1"}) {
    auto cpu = testing::codec(spec);
    auto device = DeviceErrorFeedback::create(*cpu);
    ASSERT_TRUE(device.ok()) << spec;
    const auto layout = GradientLayout::whole(1000000);
    EXPECT_EQ((*device)->inner().wire_size(layout), cpu->wire_size(layout)) << spec;
    if (const auto* threshold = dynamic_cast<const ThresholdCodec*>(&(*device)->inner())) {
      EXPECT_EQ(threshold->options().tau, 0.1234567f);
    }
  }
  const std::vector<std::uint8_t> garbage = {1, 2, 3};
  const Status status = (*created)->load_state(garbage, GradientLayout::whole(10), nullptr);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ((*created)->memory(), nullptr);
  // Signum, DGC and global top-k keep their state on the device; a stateless or host-only codec is
  // refused.
  for (const char* spec : {"qsgd:ef=0", "topk:ratio=0.1", "fp16"}) {
    EXPECT_FALSE(state_on_device(*testing::codec(spec))) << spec;
    const auto refused = DeviceStatefulCodec::create(*testing::codec(spec));
    ASSERT_FALSE(refused.ok()) << spec;
    EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument) << spec;
  }
  EXPECT_FALSE(DeviceSignum::create(*testing::codec("topk:ratio=0.1,ef=1")).ok());
  auto signum = DeviceStatefulCodec::create(*testing::codec("signum:beta=0.5"));
  ASSERT_TRUE(signum.ok());
  EXPECT_NE(dynamic_cast<DeviceSignum*>(signum->get()), nullptr);
  EXPECT_FALSE((*signum)->load_state(garbage, GradientLayout::whole(10), nullptr).ok());
  EXPECT_EQ((*signum)->size(), 0u);
  // A blob of error feedback is not Signum's.
  auto topk = testing::codec("topk:ratio=0.1,ef=1");
  Rng rng(1);
  topk->encode(std::vector<float>(10, 1.0f), GradientLayout::whole(10), rng);
  EXPECT_FALSE((*signum)->load_state(topk->save_state(), GradientLayout::whole(10), nullptr).ok());
  EXPECT_EQ((*signum)->size(), 0u);
  for (const char* spec : {"signum", "dgc:ratio=0.05", "gtopk", "topk:ratio=0.1,ef=1", "signum:ef=1"}) {
    EXPECT_TRUE(state_on_device(*testing::codec(spec))) << spec;
  }
  // Error feedback over signum keeps both states on the device; its blob nests Signum's.
  auto feedback_over_signum = DeviceStatefulCodec::create(*testing::codec("signum:beta=0.5,ef=1"));
  ASSERT_TRUE(feedback_over_signum.ok());
  EXPECT_NE(dynamic_cast<DeviceErrorFeedback*>(feedback_over_signum->get()), nullptr);
  EXPECT_FALSE((*feedback_over_signum)->load_state(garbage, GradientLayout::whole(10), nullptr).ok());
  auto dgc = DeviceStatefulCodec::create(*testing::codec("dgc:ratio=0.05"));
  ASSERT_TRUE(dgc.ok());
  EXPECT_NE(dynamic_cast<DeviceDgc*>(dgc->get()), nullptr);
  EXPECT_FALSE(DeviceDgc::create(*testing::codec("gtopk")).ok());
  EXPECT_FALSE((*dgc)->load_state(garbage, GradientLayout::whole(10), nullptr).ok());
  EXPECT_FALSE((*dgc)->load_state(topk->save_state(), GradientLayout::whole(10), nullptr).ok());
  EXPECT_EQ((*dgc)->size(), 0u);
  auto gtopk = DeviceStatefulCodec::create(*testing::codec("gtopk:ratio=0.5"));
  ASSERT_TRUE(gtopk.ok());
  auto* device_gtopk = dynamic_cast<DeviceGlobalTopK*>(gtopk->get());
  ASSERT_NE(device_gtopk, nullptr);
  EXPECT_FALSE(DeviceGlobalTopK::create(*testing::codec("topk:ratio=0.5")).ok());
  EXPECT_FALSE((*gtopk)->load_state(garbage, GradientLayout::whole(10), nullptr).ok());
  EXPECT_EQ((*gtopk)->size(), 0u);
  // accept_global() validates the aggregator's message first: a worker's message is not one.
  auto worker = testing::codec("gtopk:ratio=0.5");
  const auto message = worker->encode(std::vector<float>(10, 1.0f), GradientLayout::whole(10), rng);
  const Status refused = device_gtopk->accept_global(message.bytes, GradientLayout::whole(10), nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("not the aggregator's global set"), std::string::npos);
  EXPECT_FALSE(device_gtopk->accept_global(garbage, GradientLayout::whole(10), nullptr).ok());
}

// Needs no device: the codecs whose encoder is not encode()'s (error feedback, and the codecs that
// keep state: DeviceStatefulCodec) are refused before anything runs.
TEST(CodecsCudaArguments, CodecsWithoutADeviceEncoderAreRefused) {
  Workspace workspace;
  const auto layout = GradientLayout::whole(100);
  for (const char* spec : {"topk:ef=1,ratio=0.1", "onebit", "signum", "dgc:ratio=0.05", "gtopk"}) {
    auto codec = testing::codec(spec);
    EXPECT_FALSE(on_device(*codec)) << spec;
    Rng rng(1, 1);
    const auto written = encode(*codec, nullptr, layout, rng, nullptr, workspace, nullptr);
    ASSERT_FALSE(written.ok()) << spec;
    EXPECT_EQ(written.error().code, ErrorCode::kInvalidArgument) << spec;
    EXPECT_EQ(rng.position(), 0u) << spec;
  }
  for (const char* spec : {"qsgd:ef=0", "terngrad:ef=0", "topk:ef=0", "sign", "scaled_sign:ef=0", "randomk:ef=0",
                           "threshold:tau=1,ef=0", "fp32", "fp16", "bf16", "onebit:ef=0", "qsgd:ef=0,elias=1"}) {
    EXPECT_TRUE(on_device(*testing::codec(spec))) << spec;
  }
}

}  // namespace
}  // namespace ballot::coding::cuda
