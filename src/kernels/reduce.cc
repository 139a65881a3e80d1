// The public entry points of reduce.h: pick the best kernel table once, then index it.
#include "src/kernels/reduce.h"

#include "src/kernels/dispatch.h"

namespace weft::kernels {

const KernelTable& active_kernels() {
  // Chosen on first use and never changed; C++ guarantees the initialisation runs once.
  static const KernelTable* const table = [] {
    const KernelTable* avx2 = avx2_kernels();
    return avx2 != nullptr ? avx2 : &scalar_kernels();
  }();
  return *table;
}

ReduceFn reduce_fn(DataType type, RedOp op) {
  return active_kernels().reduce[static_cast<int>(type)][kernel_op_index(op)];
}

void divide_by(void* dst, const void* src, size_t count, DataType type, int divisor) {
  active_kernels().divide[static_cast<int>(type)](dst, src, count, divisor);
}

const char* reduce_isa() { return active_kernels().isa; }

}  // namespace weft::kernels
