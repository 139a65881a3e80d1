// The GPU's reduce kernels against the CPU's (label "gpu"), with no communicator in between:
// for every type x op, a (op) b on the device must be the same bits as b (op) a on the device
// (recursive doubling and the tree rely on it: both ranks of a pair combine their own value with
// the other's and must end bitwise equal) and as a (op) b on the CPU (src/kernels/reduce.h), on
// inputs full of the values where kernels disagree: every NaN payload and sign, infinities,
// signed zeros, subnormals, the largest finite values, integer extremes. The 8-bit types run
// every pair of bit patterns; wider types every pair of their special values and random bits.
// Also kAvg's last step (divide) against the CPU's divide_by, and dst aliasing an operand.
//
// Exits 77 (CTest: skipped) with a message when no CUDA device is usable.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "src/cuda/device.h"
#include "src/kernels/reduce.h"
#include "weft/types.h"

namespace {

using weft::DataType;
using weft::RedOp;
namespace cuda = weft::cuda;
using Bytes = std::vector<uint8_t>;

long checked = 0;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  std::exit(1);
}
void ok(const weft::Status& s, const char* what) {
  if (!s.ok()) fail(std::string(what) + ": " + s.message());
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Bit patterns worth crossing with each other, per element width and kind.
std::vector<uint64_t> specials(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF,
              0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFD23, 0x7FFF, 0x3555, 0x4248};
    case DataType::kBfloat16:
      return {0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x3F80, 0xBF80, 0x7F7F, 0xFF7F,
              0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFFA5, 0x7FFF, 0x3EAB, 0x4049};
    case DataType::kFloat32:
      return {0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x3F800000, 0xBF800000,
              0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFC01234,
              0x7FFFFFFF, 0x3EAAAAAB, 0x4B800001, 0x33800000};
    case DataType::kFloat64:
      return {0x0ULL, 0x8000000000000000ULL, 0x1ULL, 0x8000000000000001ULL, 0x000FFFFFFFFFFFFFULL,
              0x0010000000000000ULL, 0x3FF0000000000000ULL, 0xBFF0000000000000ULL, 0x7FEFFFFFFFFFFFFFULL,
              0xFFEFFFFFFFFFFFFFULL, 0x7FF0000000000000ULL, 0xFFF0000000000000ULL, 0x7FF8000000000000ULL,
              0xFFF8000000000000ULL, 0x7FF0000000000001ULL, 0xFFF8000000001234ULL, 0x3FD5555555555555ULL,
              0x4340000000000001ULL};
    default:  // integers: zero, one, minus one, the extremes of every signedness
      return {0x0ULL, 0x1ULL, ~0x0ULL, 0x7FULL, 0x80ULL, 0xFFULL, 0x7FFFFFFFULL, 0x80000000ULL, 0xFFFFFFFFULL,
              0x7FFFFFFFFFFFFFFFULL, 0x8000000000000000ULL, 0x2ULL, 0x3ULL, 0xFFFFFFFEULL};
  }
}

// Pairs (a[i], b[i]): every pair of 8-bit patterns, or every pair of specials plus random bits.
void inputs(DataType t, Bytes& a, Bytes& b, size_t& count) {
  const size_t w = weft::dtype_size(t);
  std::vector<uint64_t> x, y;
  if (w == 1) {
    for (uint64_t i = 0; i < 256; ++i)
      for (uint64_t j = 0; j < 256; ++j) x.push_back(i), y.push_back(j);
  } else {
    const std::vector<uint64_t> s = specials(t);
    for (uint64_t i : s)
      for (uint64_t j : s) x.push_back(i), y.push_back(j);
    for (uint64_t k = 0; k < 100000; ++k) {
      x.push_back(mix(k * 2 + static_cast<uint64_t>(t) * 1000003));
      y.push_back(k % 7 == 0 ? s[k % s.size()] : mix(k * 2 + 1 + static_cast<uint64_t>(t) * 1000003));
    }
  }
  count = x.size();
  a.assign(count * w, 0);
  b.assign(count * w, 0);
  for (size_t i = 0; i < count; ++i) {
    std::memcpy(a.data() + i * w, &x[i], w);  // little-endian: the low bytes
    std::memcpy(b.data() + i * w, &y[i], w);
  }
}

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    auto r = cuda::device_alloc(bytes);
    ok(r.status(), "device_alloc");
    p = *r;
  }
  ~DeviceBuffer() { cuda::device_free(p); }
};

Bytes fetch(const void* d, size_t bytes, cuda::Stream s) {
  Bytes h(bytes);
  ok(cuda::copy_async(h.data(), d, bytes, s), "copy to host");
  ok(cuda::stream_sync(s), "stream_sync");
  return h;
}

void same(const Bytes& got, const Bytes& want, size_t w, const Bytes& a, const Bytes& b, const std::string& what) {
  ++checked;
  if (got == want) return;
  for (size_t i = 0; i < got.size(); i += w) {
    if (std::memcmp(got.data() + i, want.data() + i, w) == 0) continue;
    auto hex = [&](const Bytes& v) {
      uint64_t x = 0;
      std::memcpy(&x, v.data() + i, w);
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(x));
      return std::string(buf);
    };
    fail(what + ": element " + std::to_string(i / w) + " (a=" + hex(a) + ", b=" + hex(b) + ") is " + hex(got) +
         ", want " + hex(want));
  }
}

}  // namespace

int main() {
  if (!cuda::available()) {
    std::printf("SKIP: no usable CUDA device; the GPU tests run on a machine with one (tools/gpu-check)\n");
    return 77;
  }
  ok(cuda::set_device(0), "set_device");
  auto stream = cuda::stream_create();
  ok(stream.status(), "stream_create");
  const cuda::Stream s = *stream;
  for (int ti = 0; ti < weft::kNumDataTypes; ++ti) {
    const DataType t = static_cast<DataType>(ti);
    const size_t w = weft::dtype_size(t);
    Bytes a, b;
    size_t n = 0;
    inputs(t, a, b, n);
    const size_t bytes = n * w;
    DeviceBuffer da(bytes), db(bytes), dd(bytes);
    ok(cuda::copy_async(da.p, a.data(), bytes, s), "copy a");
    ok(cuda::copy_async(db.p, b.data(), bytes, s), "copy b");
    ok(cuda::stream_sync(s), "stream_sync");
    for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin}) {
      const std::string what = std::string(weft::dtype_name(t)) + " " + std::string(weft::op_name(op));
      Bytes want(bytes);
      weft::kernels::reduce(want.data(), a.data(), b.data(), n, t, op);
      ok(cuda::reduce(dd.p, da.p, db.p, n, t, op, s), "reduce a,b");
      same(fetch(dd.p, bytes, s), want, w, a, b, what + ": device a (op) b against the CPU");
      ok(cuda::reduce(dd.p, db.p, da.p, n, t, op, s), "reduce b,a");
      same(fetch(dd.p, bytes, s), want, w, a, b, what + ": device b (op) a against a (op) b");
      // dst aliasing an operand (the executor reduces in place).
      ok(cuda::copy_async(dd.p, db.p, bytes, s), "copy");
      ok(cuda::reduce(dd.p, da.p, dd.p, n, t, op, s), "reduce in place");
      same(fetch(dd.p, bytes, s), want, w, a, b, what + ": device, dst aliasing b");
    }
    for (int divisor : {1, 3, 7, 1000}) {
      Bytes want(bytes);
      weft::kernels::divide_by(want.data(), a.data(), n, t, divisor);
      ok(cuda::divide(dd.p, da.p, n, t, divisor, s), "divide");
      same(fetch(dd.p, bytes, s), want, w, a, a, std::string(weft::dtype_name(t)) + " divide by " +
                                                     std::to_string(divisor) + " against the CPU");
    }
    std::fprintf(stderr, "%s: %zu pairs\n", std::string(weft::dtype_name(t)).c_str(), n);
  }
  cuda::stream_destroy(s);
  std::printf("PASS: %ld device results bitwise equal to the CPU kernels (operands both ways, in place, divide)\n",
              checked);
  return 0;
}
