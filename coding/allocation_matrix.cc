#include "coding/allocation_matrix.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>

#include "core/enforce.h"
#include "core/file_io.h"
#include "core/rng.h"

namespace ballot::coding {
namespace {

// Stream purpose of the Bernoulli draw, so that it never shares random numbers with anything else
// drawn from the run's seed.
constexpr std::uint64_t kPurposeBernoulliCode = 0xB0C0DE;
constexpr std::size_t kMaxFileBytes = std::size_t{64} << 20;

Error malformed(std::size_t line, const std::string& what) {
  return make_error(ErrorCode::kMalformed, "allocation matrix, line " + std::to_string(line) + ": " + what);
}

}  // namespace

AllocationMatrix::AllocationMatrix(std::size_t n)
    : n_(n), words_per_row_((n + 63) / 64), bits_(n * ((n + 63) / 64), 0) {
  BALLOT_ENFORCE_LE(n, kMaxNodes);
}

AllocationMatrix AllocationMatrix::identity(std::size_t n) {
  AllocationMatrix g(n);
  for (std::size_t i = 0; i < n; ++i) g.set(i, i, true);
  return g;
}

Result<AllocationMatrix> AllocationMatrix::bernoulli(std::size_t n, double r, std::uint64_t seed) {
  if (n == 0 || n > kMaxNodes)
    return make_error(ErrorCode::kInvalidArgument,
                      "bernoulli code: n = " + std::to_string(n) + " is not in [1, " + std::to_string(kMaxNodes) + "]");
  if (!(r > 0.0) || !(r <= static_cast<double>(n)))
    return make_error(ErrorCode::kInvalidArgument,
                      "bernoulli code: redundancy r = " + std::to_string(r) + " is not in (0, n]");
  const double p = r / static_cast<double>(n);
  Rng rng(seed, Rng::stream_id({kPurposeBernoulliCode, n}));
  AllocationMatrix g(n);
  for (int attempt = 0; attempt < kMaxBernoulliAttempts; ++attempt) {
    // Reference rule (Election-Coding MPI_main.py): draw every entry i.i.d., redraw the whole
    // matrix while some row is empty. Restarting at the first empty row accepts exactly the same
    // distribution (i.i.d. rows conditioned on being non-empty) with less work.
    std::fill(g.bits_.begin(), g.bits_.end(), 0);
    bool every_row_nonempty = true;
    for (std::size_t i = 0; i < n && every_row_nonempty; ++i) {
      for (std::size_t j = 0; j < n; ++j) g.set(i, j, rng.bernoulli(p));
      every_row_nonempty = g.row_size(i) > 0;
    }
    if (every_row_nonempty) return g;
  }
  return make_error(ErrorCode::kPrecondition, "bernoulli code: no draw without an empty row in " +
                                                  std::to_string(kMaxBernoulliAttempts) + " attempts (r too small)");
}

AllocationMatrix AllocationMatrix::paper_n5() {
  auto g = from_rows(5, {{0}, {1, 2, 3}, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}});
  return std::move(g).value();
}

Result<AllocationMatrix> AllocationMatrix::deterministic(std::size_t n, std::size_t b) {
  if (n == 0 || n > kMaxNodes || n % 2 == 0)
    return make_error(ErrorCode::kInvalidArgument, "deterministic code: n = " + std::to_string(n) +
                                                       " must be odd and at most " + std::to_string(kMaxNodes));
  if (b > (n - 1) / 2)  // 2b + 1 <= n, without forming 2b + 1 (a b near 2^63 would wrap)
    return make_error(ErrorCode::kInvalidArgument, "deterministic code: needs 2b + 1 <= n (n = " + std::to_string(n) +
                                                       ", b = " + std::to_string(b) + ")");
  const std::size_t pairs = (n - 2 * b - 1) / 2;  // L / 2
  AllocationMatrix g(n);
  for (std::size_t k = 0; k < pairs; ++k) {
    // p_k = k and q_k = n-1-k are distinct because k < L/2 <= (n-1)/2.
    g.set(2 * k, k, true);
    for (std::size_t j = 0; j < n; ++j) g.set(2 * k + 1, j, j != k && j != n - 1 - k);
  }
  for (std::size_t i = 2 * pairs; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) g.set(i, j, true);
  return g;
}

Result<AllocationMatrix> AllocationMatrix::from_rows(std::size_t n,
                                                     const std::vector<std::vector<std::uint32_t>>& rows) {
  if (n > kMaxNodes)
    return make_error(ErrorCode::kInvalidArgument,
                      "allocation matrix: n = " + std::to_string(n) + " exceeds " + std::to_string(kMaxNodes));
  if (rows.size() != n)
    return make_error(ErrorCode::kInvalidArgument,
                      "allocation matrix: " + std::to_string(rows.size()) + " rows for n = " + std::to_string(n));
  AllocationMatrix g(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (const std::uint32_t j : rows[i]) {
      if (j >= n)
        return make_error(ErrorCode::kInvalidArgument, "allocation matrix: row " + std::to_string(i) +
                                                           " names partition " + std::to_string(j) + " >= n");
      if (g.get(i, j))
        return make_error(ErrorCode::kInvalidArgument,
                          "allocation matrix: row " + std::to_string(i) + " repeats partition " + std::to_string(j));
      g.set(i, j, true);
    }
  }
  return g;
}

Result<AllocationMatrix> AllocationMatrix::parse(std::string_view text) {
  std::vector<std::vector<bool>> rows;
  std::size_t line_number = 0;
  std::size_t width = 0;
  std::size_t first_row_line = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    std::vector<bool> row;
    for (std::size_t c = 0; c < line.size(); ++c) {
      const char ch = line[c];
      if (ch == '0' || ch == '1') {
        if (row.size() == kMaxNodes)
          return malformed(line_number, "more than " + std::to_string(kMaxNodes) + " entries");
        row.push_back(ch == '1');
      } else if (ch != ' ' && ch != '\t' && ch != ',' && ch != '\r') {
        const unsigned code = static_cast<unsigned char>(ch);
        std::string shown =
            (code >= 0x20 && code < 0x7f) ? std::string("'") + ch + "'" : "byte " + std::to_string(code);
        return malformed(line_number,
                         "unexpected " + shown + " at column " + std::to_string(c + 1) + " (expected 0 or 1)");
      }
    }
    if (row.empty()) continue;
    if (rows.empty()) {
      width = row.size();
      first_row_line = line_number;
    } else if (row.size() != width) {
      return malformed(line_number, std::to_string(row.size()) + " entries, but the row on line " +
                                        std::to_string(first_row_line) + " has " + std::to_string(width));
    }
    if (rows.size() == width)
      return malformed(line_number,
                       "more rows than the " + std::to_string(width) + " entries per row (the matrix must be square)");
    rows.push_back(std::move(row));
    if (end == text.size()) break;
  }
  if (rows.empty()) return malformed(line_number, "no rows (empty matrix)");
  if (rows.size() != width)
    return make_error(ErrorCode::kMalformed, "allocation matrix: " + std::to_string(rows.size()) + " rows of " +
                                                 std::to_string(width) + " entries (the matrix must be square)");
  AllocationMatrix g(width);
  for (std::size_t i = 0; i < width; ++i)
    for (std::size_t j = 0; j < width; ++j) g.set(i, j, rows[i][j]);
  return g;
}

Result<AllocationMatrix> AllocationMatrix::load(const std::string& path) {
  // A directory, a FIFO or a device is an error naming it, not a read that never ends.
  BALLOT_ASSIGN_OR_RETURN(const auto bytes, read_file(path, kMaxFileBytes, "allocation matrix"));
  const std::string text(bytes.begin(), bytes.end());
  auto g = parse(text);
  if (!g.ok()) {
    Error error = std::move(g).error();
    error.message = "'" + path + "': " + error.message;
    return error;
  }
  return g;
}

std::string AllocationMatrix::to_text() const {
  std::string text =
      "# Ballot allocation matrix: n = " + std::to_string(n_) + ", ones = " + std::to_string(ones()) + "\n";
  text.reserve(text.size() + n_ * (2 * n_ + 1));
  for (std::size_t i = 0; i < n_; ++i) {
    for (std::size_t j = 0; j < n_; ++j) {
      if (j > 0) text.push_back(' ');
      text.push_back(get(i, j) ? '1' : '0');
    }
    text.push_back('\n');
  }
  return text;
}

Status AllocationMatrix::save(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return make_error(ErrorCode::kIo, "allocation matrix: cannot create '" + path + "'");
  const std::string text = to_text();
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return make_error(ErrorCode::kIo, "allocation matrix: cannot write '" + path + "'");
  return {};
}

bool AllocationMatrix::get(std::size_t node, std::size_t partition) const {
  BALLOT_ENFORCE_LT(node, n_);
  BALLOT_ENFORCE_LT(partition, n_);
  return (bits_[node * words_per_row_ + partition / 64] >> (partition % 64)) & 1u;
}

void AllocationMatrix::set(std::size_t node, std::size_t partition, bool value) {
  BALLOT_ENFORCE_LT(node, n_);
  BALLOT_ENFORCE_LT(partition, n_);
  std::uint64_t& word = bits_[node * words_per_row_ + partition / 64];
  const std::uint64_t bit = std::uint64_t{1} << (partition % 64);
  word = value ? (word | bit) : (word & ~bit);
}

std::size_t AllocationMatrix::ones() const noexcept {
  std::size_t total = 0;
  for (const std::uint64_t word : bits_) total += static_cast<std::size_t>(std::popcount(word));
  return total;
}

double AllocationMatrix::redundancy() const noexcept {
  return n_ == 0 ? 0.0 : static_cast<double>(ones()) / static_cast<double>(n_);
}

std::size_t AllocationMatrix::row_size(std::size_t node) const {
  BALLOT_ENFORCE_LT(node, n_);
  std::size_t total = 0;
  for (std::size_t w = 0; w < words_per_row_; ++w)
    total += static_cast<std::size_t>(std::popcount(bits_[node * words_per_row_ + w]));
  return total;
}

std::size_t AllocationMatrix::column_size(std::size_t partition) const {
  std::size_t total = 0;
  for (std::size_t i = 0; i < n_; ++i) total += get(i, partition) ? 1 : 0;
  return total;
}

std::vector<std::uint32_t> AllocationMatrix::row(std::size_t node) const {
  std::vector<std::uint32_t> out;
  for (std::size_t j = 0; j < n_; ++j)
    if (get(node, j)) out.push_back(static_cast<std::uint32_t>(j));
  return out;
}

std::vector<std::uint32_t> AllocationMatrix::column(std::size_t partition) const {
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0; i < n_; ++i)
    if (get(i, partition)) out.push_back(static_cast<std::uint32_t>(i));
  return out;
}

std::uint64_t AllocationMatrix::row_mask(std::size_t node) const {
  BALLOT_ENFORCE_LE(n_, std::size_t{64});
  BALLOT_ENFORCE_LT(node, n_);
  return bits_[node];
}

bool operator==(const AllocationMatrix& a, const AllocationMatrix& b) noexcept {
  return a.n_ == b.n_ && a.bits_ == b.bits_;
}

Result<AllocationMatrix> make_allocation_matrix(const Spec& spec, std::size_t n, std::uint64_t seed) {
  const std::string& name = spec.name();
  const auto check_n = [&]() -> Status {
    if (n == 0 || n > AllocationMatrix::kMaxNodes)
      return make_error(ErrorCode::kInvalidArgument, "code '" + spec.to_string() + "': n = " + std::to_string(n) +
                                                         " is not in [1, " +
                                                         std::to_string(AllocationMatrix::kMaxNodes) + "]");
    return {};
  };
  if (name == "identity") {
    BALLOT_TRY(spec.check_known({}));
    BALLOT_TRY(check_n());
    return AllocationMatrix::identity(n);
  }
  if (name == "bernoulli") {
    BALLOT_TRY(spec.check_known({"r", "seed"}));
    BALLOT_ASSIGN_OR_RETURN(const double r, spec.get_double("r", 2.0));
    BALLOT_ASSIGN_OR_RETURN(const std::int64_t s, spec.get_int("seed", static_cast<std::int64_t>(seed)));
    return AllocationMatrix::bernoulli(n, r, static_cast<std::uint64_t>(s));
  }
  if (name == "paper5") {
    BALLOT_TRY(spec.check_known({}));
    if (n != 5)
      return make_error(ErrorCode::kInvalidArgument,
                        "code 'paper5' is the n = 5 code, asked for n = " + std::to_string(n));
    return AllocationMatrix::paper_n5();
  }
  if (name == "deterministic") {
    BALLOT_TRY(spec.check_known({"b"}));
    BALLOT_ASSIGN_OR_RETURN(const std::int64_t b, spec.get_int("b", 1));
    if (b < 0) return make_error(ErrorCode::kInvalidArgument, "code 'deterministic': b must be >= 0");
    return AllocationMatrix::deterministic(n, static_cast<std::size_t>(b));
  }
  if (name == "file") {
    BALLOT_TRY(spec.check_known({"path"}));
    const std::string path = spec.get_string("path", "");
    if (path.empty()) return make_error(ErrorCode::kInvalidArgument, "code 'file' needs path=");
    BALLOT_ASSIGN_OR_RETURN(auto g, AllocationMatrix::load(path));
    if (n != 0 && g.n() != n)
      return make_error(ErrorCode::kInvalidArgument, "code file '" + path + "' has n = " + std::to_string(g.n()) +
                                                         ", expected " + std::to_string(n));
    if (g.ones() == 0)  // every vote would be the empty majority (+1 everywhere): no training at all
      return make_error(ErrorCode::kInvalidArgument,
                        "code file '" + path + "' has no 1: no node would compute any partition");
    return g;
  }
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown code '" + name + "' (known: identity, bernoulli, paper5, deterministic, file)");
}

}  // namespace ballot::coding
