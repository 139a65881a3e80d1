// Microbenchmarks for src/kernels: reduce per dtype/op, divide_by, the small-float conversions,
// copy() (copy.h), and memcpy of the same bytes as the yardstick (memread, a plain read of the
// bytes, is the yardstick of kernels that mostly read, such as fp32 -> fp8). Sizes 64 KiB (L2),
// 1 MiB (L2/L3), 32 MiB (DRAM, or partly a large L3's); memread also 128 MiB.
//
// The size argument is the bytes of one array: for reduce, each of a, b and dst (so memory
// traffic is 3x, reported as the "traffic" counter); for divide_by, src and dst; for conversions,
// the narrow (16/8-bit) side; for memcpy, src and dst. bytes_per_second counts that size once per
// iteration, so "fp32 sum at X GB/s" and "memcpy at Y GB/s" compare elements per second directly.
// (Google Benchmark's G/s are GiB/s, from the thread's CPU time: the ratios are what to read.)
// Buffers are allocated and filled once per benchmark run, outside the timed loop.
//
// Run: build/bench/weft-kernels-bench [--benchmark_filter=sum]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "src/kernels/convert.h"
#include "src/kernels/copy.h"
#include "src/kernels/dispatch.h"
#include "src/kernels/reduce.h"
#include "weft/types.h"

namespace weft::kernels {
namespace {

constexpr int64_t kSizes[] = {64 << 10, 1 << 20, 32 << 20};

// A page-aligned buffer of `bytes`, filled with `pattern` repeated (touches every page up front).
struct Buffer {
  explicit Buffer(size_t bytes, const void* pattern = nullptr, size_t pattern_size = 0)
      : data(static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)), &std::free) {
    if (pattern == nullptr) {
      std::memset(data.get(), 0, bytes);
      return;
    }
    for (size_t i = 0; i + pattern_size <= bytes; i += pattern_size)
      std::memcpy(data.get() + i, pattern, pattern_size);
  }
  uint8_t* get() const { return data.get(); }
  std::unique_ptr<uint8_t, decltype(&std::free)> data;
};

// One element equal to x (1.0-ish values keep floats finite and normal however often they combine).
Buffer filled(DataType type, size_t bytes, double x) {
  uint8_t e[8] = {};
  switch (type) {
    case DataType::kFloat16: {
      const uint16_t v = float_to_half(static_cast<float>(x));
      std::memcpy(e, &v, 2);
      break;
    }
    case DataType::kBfloat16: {
      const uint16_t v = float_to_bf16(static_cast<float>(x));
      std::memcpy(e, &v, 2);
      break;
    }
    case DataType::kFloat8e4m3:
      e[0] = float_to_e4m3(static_cast<float>(x));
      break;
    case DataType::kFloat8e5m2:
      e[0] = float_to_e5m2(static_cast<float>(x));
      break;
    case DataType::kFloat32: {
      const float v = static_cast<float>(x);
      std::memcpy(e, &v, 4);
      break;
    }
    case DataType::kFloat64:
      std::memcpy(e, &x, 8);
      break;
    default:
      e[0] = static_cast<uint8_t>(x);
      break;  // little-endian small integer
  }
  return Buffer(bytes, e, dtype_size(type));
}

void set_rates(benchmark::State& state, int64_t bytes, int arrays) {
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["traffic"] = benchmark::Counter(static_cast<double>(state.iterations() * bytes * arrays),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}

// table: nullptr uses reduce_fn() (what the library runs); otherwise that table's kernel.
void BM_Reduce(benchmark::State& state, DataType type, RedOp op, const KernelTable* table) {
  const int64_t bytes = state.range(0);
  const size_t n = static_cast<size_t>(bytes) / dtype_size(type);
  const Buffer a = filled(type, static_cast<size_t>(bytes), 1.0),
               b = filled(type, static_cast<size_t>(bytes), 0.5);
  const Buffer d(static_cast<size_t>(bytes));
  const ReduceFn fn =
      table != nullptr ? table->reduce[static_cast<int>(type)][kernel_op_index(op)] : reduce_fn(type, op);
  for (auto _ : state) {
    fn(d.get(), a.get(), b.get(), n);
    benchmark::DoNotOptimize(d.get());
    benchmark::ClobberMemory();
  }
  set_rates(state, bytes, 3);
  state.SetLabel(table != nullptr ? table->isa : reduce_isa());
}

// table: nullptr uses divide_by() (what the library runs); otherwise that table's kernel.
void BM_DivideBy(benchmark::State& state, DataType type, const KernelTable* table) {
  const int64_t bytes = state.range(0);
  const size_t n = static_cast<size_t>(bytes) / dtype_size(type);
  const Buffer src = filled(type, static_cast<size_t>(bytes), 3.0);
  const Buffer d(static_cast<size_t>(bytes));
  for (auto _ : state) {
    if (table != nullptr)
      table->divide[static_cast<int>(type)](d.get(), src.get(), n, 8);
    else
      divide_by(d.get(), src.get(), n, type, 8);
    benchmark::DoNotOptimize(d.get());
    benchmark::ClobberMemory();
  }
  set_rates(state, bytes, 2);
  state.SetLabel(table != nullptr ? table->isa : reduce_isa());
}

void BM_ToFloat(benchmark::State& state, DataType type) {
  const int64_t bytes = state.range(0);
  const size_t n = static_cast<size_t>(bytes) / dtype_size(type);
  const Buffer src = filled(type, static_cast<size_t>(bytes), 1.5);
  const Buffer d(n * sizeof(float));
  for (auto _ : state) {
    to_float(reinterpret_cast<float*>(d.get()), src.get(), n, type);
    benchmark::DoNotOptimize(d.get());
    benchmark::ClobberMemory();
  }
  set_rates(state, bytes, 1 + static_cast<int>(sizeof(float) / dtype_size(type)));
  state.SetLabel(reduce_isa());
}

void BM_FromFloat(benchmark::State& state, DataType type) {
  const int64_t bytes = state.range(0);
  const size_t n = static_cast<size_t>(bytes) / dtype_size(type);
  const Buffer src = filled(DataType::kFloat32, n * sizeof(float), 1.2345);  // inexact: rounding work
  const Buffer d(static_cast<size_t>(bytes));
  for (auto _ : state) {
    from_float(d.get(), reinterpret_cast<const float*>(src.get()), n, type);
    benchmark::DoNotOptimize(d.get());
    benchmark::ClobberMemory();
  }
  set_rates(state, bytes, 1 + static_cast<int>(sizeof(float) / dtype_size(type)));
  state.SetLabel(reduce_isa());
}

// memcpy (the yardstick) or copy.h's copy() (the data path's copy): fn copies `bytes`.
void BM_Copy(benchmark::State& state, CopyFn fn, const char* label) {
  const int64_t bytes = state.range(0);
  const Buffer src = filled(DataType::kUint8, static_cast<size_t>(bytes), 7);
  const Buffer d(static_cast<size_t>(bytes));
  for (auto _ : state) {
    fn(d.get(), src.get(), static_cast<size_t>(bytes));
    benchmark::DoNotOptimize(d.get());
    benchmark::ClobberMemory();
  }
  set_rates(state, bytes, 2);
  if (label != nullptr) state.SetLabel(label);
}

// A plain read of `bytes` (an XOR of its 64-bit words, which the compiler vectorises): the rate
// at which one core reads memory, the ceiling of a kernel that reads far more than it writes.
void BM_Read(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const Buffer src = filled(DataType::kUint8, static_cast<size_t>(bytes), 7);
  const size_t words = static_cast<size_t>(bytes) / sizeof(uint64_t);
  for (auto _ : state) {
    uint64_t x = 0;
    const uint64_t* p = reinterpret_cast<const uint64_t*>(src.get());
    for (size_t i = 0; i < words; ++i) x ^= p[i];
    benchmark::DoNotOptimize(x);
  }
  set_rates(state, bytes, 1);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t s : kSizes) b->Arg(s);
  b->MinTime(0.2);
}

void register_all() {
  // Every type and op of the active table (avg is sum's kernel and then divide_by's).
  for (int t = 0; t < kNumDataTypes; ++t)
    for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin}) {
      const DataType type = static_cast<DataType>(t);
      benchmark::RegisterBenchmark(("reduce/" + std::string(dtype_name(type)) + "/" + std::string(op_name(op))).c_str(),
                                   BM_Reduce, type, op, nullptr)
          ->Apply(sizes);
    }
  // The tables this CPU supports besides the active one (the last), side by side with it.
  const std::vector<const KernelTable*> tables = supported_kernels();
  for (size_t i = 0; i + 1 < tables.size(); ++i) {
    for (DataType type : {DataType::kFloat32, DataType::kFloat16, DataType::kBfloat16, DataType::kFloat8e4m3})
      benchmark::RegisterBenchmark(
          ("reduce_" + std::string(tables[i]->isa) + "/" + std::string(dtype_name(type)) + "/sum").c_str(),
          BM_Reduce, type, RedOp::kSum, tables[i])
          ->Apply(sizes);
    benchmark::RegisterBenchmark(("reduce_" + std::string(tables[i]->isa) + "/f8e4m3/prod").c_str(), BM_Reduce,
                                 DataType::kFloat8e4m3, RedOp::kProd, tables[i])
        ->Apply(sizes);
    for (DataType type : {DataType::kFloat16, DataType::kFloat8e4m3, DataType::kInt8, DataType::kInt32})
      benchmark::RegisterBenchmark(
          ("divide_by_" + std::string(tables[i]->isa) + "/" + std::string(dtype_name(type))).c_str(), BM_DivideBy,
          type, tables[i])
          ->Apply(sizes);
  }
  for (DataType type : {DataType::kFloat32, DataType::kFloat16, DataType::kBfloat16, DataType::kFloat8e4m3,
                        DataType::kInt8, DataType::kInt32, DataType::kInt64})
    benchmark::RegisterBenchmark(("divide_by/" + std::string(dtype_name(type))).c_str(), BM_DivideBy, type,
                                 nullptr)
        ->Apply(sizes);
  for (DataType type :
       {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat8e4m3, DataType::kFloat8e5m2}) {
    benchmark::RegisterBenchmark(("to_float/" + std::string(dtype_name(type))).c_str(), BM_ToFloat, type)
        ->Apply(sizes);
    benchmark::RegisterBenchmark(("from_float/" + std::string(dtype_name(type))).c_str(), BM_FromFloat, type)
        ->Apply(sizes);
  }
  const CopyFn plain_memcpy = [](void* d, const void* s, size_t n) { std::memcpy(d, s, n); };
  benchmark::RegisterBenchmark("memcpy", BM_Copy, plain_memcpy, nullptr)->Apply(sizes);
  benchmark::RegisterBenchmark("copy", BM_Copy, &copy, reduce_isa())->Apply(sizes);
  // 128 MiB: the fp32 side of a 32 MiB fp8 conversion.
  benchmark::RegisterBenchmark("memread", BM_Read)->Apply(sizes)->Arg(int64_t{128} << 20);
}

}  // namespace
}  // namespace weft::kernels

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  weft::kernels::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
