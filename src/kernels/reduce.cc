// The public entry points of reduce.h and copy.h: pick the best kernel table once, then index it.
#include "src/kernels/reduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "src/kernels/copy.h"
#include "src/kernels/dispatch.h"

namespace weft::kernels {

std::vector<const KernelTable*> supported_kernels() {
  std::vector<const KernelTable*> tables = {&scalar_kernels()};
  for (const KernelTable* t : {avx2_kernels(), avx512_kernels(), avx512bf16_kernels(), avx512fp16_kernels()})
    if (t != nullptr) tables.push_back(t);
  return tables;
}

const KernelTable& active_kernels() {
  // Chosen on first use and never changed; C++ guarantees the initialisation runs once.
  static const KernelTable* const table = supported_kernels().back();
  return *table;
}

ReduceFn reduce_fn(DataType type, RedOp op) {
  return active_kernels().reduce[static_cast<int>(type)][kernel_op_index(op)];
}

void divide_by(void* dst, const void* src, size_t count, DataType type, int divisor) {
  active_kernels().divide[static_cast<int>(type)](dst, src, count, divisor);
}

void scale(void* dst, const void* src, size_t count, DataType type, const void* scalar) {
  // The prod kernel against a block of copies of the scalar, so every dtype gets its arithmetic.
  // The block lives on the stack: every PreMulSum call scales, so no allocation per call.
  constexpr size_t kBlockBytes = 4096;
  const size_t elem = dtype_size(type);
  const size_t block = kBlockBytes / elem;  // elements
  alignas(64) char scalars[kBlockBytes];
  for (size_t i = 0; i < std::min(count, block) * elem; i += elem) std::memcpy(scalars + i, scalar, elem);
  const ReduceFn mul = reduce_fn(type, RedOp::kProd);
  for (size_t done = 0; done < count; done += block) {
    const size_t n = std::min(block, count - done);
    mul(static_cast<char*>(dst) + done * elem, static_cast<const char*>(src) + done * elem, scalars, n);
  }
}

void copy(void* dst, const void* src, size_t bytes) { active_kernels().copy(dst, src, bytes); }

const char* reduce_isa() { return active_kernels().isa; }

thread_local bool t_stream_every_store = false;

StreamStores::StreamStores(bool on) : was_(t_stream_every_store) { t_stream_every_store = was_ || on; }
StreamStores::~StreamStores() { t_stream_every_store = was_; }

}  // namespace weft::kernels
