// Checkpoint files. See checkpoint.h.
#include "training/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>
#include <vector>

#include "training/file_io.h"

namespace weft::training {

namespace {

constexpr char kMagic[8] = {'W', 'E', 'F', 'T', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxRngBytes = 1 << 20;

// 64-bit FNV-1a over 8-byte words (and the trailing bytes one at a time), carried across calls so
// the write and the read can checksum piece by piece.
class Checksum {
 public:
  void add(const void* data, size_t n) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    // Finish a word begun by an earlier call, then whole words, then keep the tail.
    while (n > 0 && pending_ > 0) take(bytes, n);
    while (n >= 8) {
      uint64_t word;
      std::memcpy(&word, bytes, 8);
      mix(word);
      bytes += 8;
      n -= 8;
    }
    while (n > 0) take(bytes, n);
  }
  uint64_t value() const {
    uint64_t h = hash_;
    for (size_t i = 0; i < pending_; i++) h = (h ^ tail_[i]) * kPrime;
    return h;
  }

 private:
  static constexpr uint64_t kPrime = 0x100000001b3ull;
  void mix(uint64_t word) { hash_ = (hash_ ^ word) * kPrime; }
  void take(const unsigned char*& bytes, size_t& n) {
    tail_[pending_ & 7] = *bytes++;  // pending_ < 8 here; the mask tells the compiler
    pending_++;
    n--;
    if (pending_ == 8) {
      uint64_t word;
      std::memcpy(&word, tail_, 8);
      mix(word);
      pending_ = 0;
    }
  }
  uint64_t hash_ = 0xcbf29ce484222325ull;
  unsigned char tail_[8] = {};
  size_t pending_ = 0;
};

// The fixed-size part of the header, as it lies in the file.
struct FixedHeader {
  char magic[8];
  uint32_t version;
  int32_t model[5];
  int32_t batch_size;
  int32_t seq_len;
  uint32_t param_dtype;
  uint32_t rng_bytes;
  int64_t step;
  int64_t skipped_steps;
  int64_t adam_steps;
  int64_t loader_epoch;
  int64_t loader_cursor;
};
static_assert(sizeof(FixedHeader) == 88, "no padding: the struct is the file's byte layout");

class Writer {
 public:
  Writer(std::FILE* f, const std::string& path) : f_(f), path_(path) {}
  Status put(const void* data, size_t n) {
    sum_.add(data, n);
    return write_bytes(f_, data, n, path_);
  }
  Status put_checksum() {
    const uint64_t value = sum_.value();
    return write_bytes(f_, &value, sizeof(value), path_);
  }

 private:
  std::FILE* f_;
  const std::string& path_;
  Checksum sum_;
};

class Reader {
 public:
  Reader(std::FILE* f, const std::string& path) : f_(f), path_(path) {}
  Status get(void* data, size_t n) {
    if (std::fread(data, 1, n, f_) != n) {
      return invalid_argument("checkpoint " + path_ + " is truncated");
    }
    sum_.add(data, n);
    return Status();
  }
  uint64_t checksum() const { return sum_.value(); }

 private:
  std::FILE* f_;
  const std::string& path_;
  Checksum sum_;
};

}  // namespace

Status write_checkpoint(const std::string& path, const CheckpointState& s,
                        const GPTParameters& params, const GPTParameters& m,
                        const GPTParameters& v) {
  FixedHeader h;
  std::memset(&h, 0, sizeof(h));
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  const GPTConfig& c = s.model;
  const int32_t model[5] = {c.max_seq_len, c.vocab_size, c.num_layers, c.num_heads, c.channels};
  std::memcpy(h.model, model, sizeof(model));
  h.batch_size = s.batch_size;
  h.seq_len = s.seq_len;
  h.param_dtype = s.param_dtype == ParamDtype::kBf16 ? 1u : 0u;
  h.step = s.step;
  h.skipped_steps = s.skipped_steps;
  h.adam_steps = s.adam_steps;
  h.loader_epoch = s.loader.epoch;
  h.loader_cursor = s.loader.cursor;
  h.rng_bytes = static_cast<uint32_t>(s.loader.epoch_rng.size());
  const uint64_t count = params.size();
  return write_file_atomically(path, [&](std::FILE* f) {
    Writer out(f, path);
    WEFT_TRY(out.put(&h, sizeof(h)));
    WEFT_TRY(out.put(s.loader.epoch_rng.data(), s.loader.epoch_rng.size()));
    WEFT_TRY(out.put(&count, sizeof(count)));
    for (const GPTParameters* tensor : {&params, &m, &v}) {
      WEFT_TRY(out.put(tensor->data(), tensor->size() * sizeof(float)));
    }
    return out.put_checksum();
  });
}

Result<Checkpoint> read_checkpoint(const std::string& path) {
  Result<UniqueFile> file = open_file(path, "rb", "reading a checkpoint");
  WEFT_TRY(file);
  const auto bad = [&](const std::string& why) {
    return invalid_argument("checkpoint " + path + ": " + why);
  };
  std::error_code ec;
  const uintmax_t file_bytes = std::filesystem::file_size(path, ec);
  if (ec) return bad("cannot get its size: " + ec.message());
  Reader in(file->get(), path);

  FixedHeader h;
  if (file_bytes < sizeof(h)) return bad("truncated: shorter than the header");
  WEFT_TRY(in.get(&h, sizeof(h)));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) {
    return bad("bad magic: not a weft checkpoint");
  }
  if (h.version != kVersion) {
    return bad("format version " + std::to_string(h.version) + ", this build reads version " +
               std::to_string(kVersion));
  }
  CheckpointState s;
  s.model = GPTConfig{h.model[0], h.model[1], h.model[2], h.model[3], h.model[4]};
  WEFT_TRY(validate(s.model).with_context("checkpoint " + path + ": model config"));
  if (h.batch_size <= 0 || h.seq_len <= 0 || h.param_dtype > 1 || h.step < 0 ||
      h.skipped_steps < 0 || h.adam_steps < 0 || h.rng_bytes > kMaxRngBytes) {
    return bad("corrupt header (batch, sequence length, dtype, step counts or sizes out of range)");
  }
  s.batch_size = h.batch_size;
  s.seq_len = h.seq_len;
  s.param_dtype = h.param_dtype == 1 ? ParamDtype::kBf16 : ParamDtype::kFp32;
  s.step = h.step;
  s.skipped_steps = h.skipped_steps;
  s.adam_steps = h.adam_steps;
  s.loader.epoch = h.loader_epoch;
  s.loader.cursor = h.loader_cursor;

  // The size the header implies, checked before the tensors are allocated.
  const uint64_t P = num_parameters(s.model);
  const uint64_t expected = sizeof(h) + h.rng_bytes + sizeof(uint64_t) + 3 * P * sizeof(float) +
                            sizeof(uint64_t);
  if (file_bytes != expected) {
    return bad((file_bytes < expected ? "truncated: " : "wrong size: ") +
               std::to_string(file_bytes) + " bytes, but its header (model " +
               describe(s.model) + ") implies " + std::to_string(expected));
  }
  s.loader.epoch_rng.resize(h.rng_bytes);
  WEFT_TRY(in.get(s.loader.epoch_rng.data(), h.rng_bytes));
  uint64_t count;
  WEFT_TRY(in.get(&count, sizeof(count)));
  if (count != P) {
    return bad("holds " + std::to_string(count) + " parameters but its config (" +
               describe(s.model) + ") has " + std::to_string(P));
  }
  Result<GPTParameters> params = GPTParameters::create(s.model);
  WEFT_TRY(params);
  Result<GPTParameters> m = GPTParameters::create(s.model);
  WEFT_TRY(m);
  Result<GPTParameters> v = GPTParameters::create(s.model);
  WEFT_TRY(v);
  for (GPTParameters* tensor : {&params.value(), &m.value(), &v.value()}) {
    WEFT_TRY(in.get(tensor->data(), tensor->size() * sizeof(float)));
  }
  const uint64_t computed = in.checksum();
  uint64_t stored;
  WEFT_TRY(in.get(&stored, sizeof(stored)));
  if (stored != computed) return bad("checksum mismatch: the file is corrupt");
  return Checkpoint{std::move(s), std::move(params).value(), std::move(m).value(),
                    std::move(v).value()};
}

}  // namespace weft::training
