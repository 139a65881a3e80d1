// How an NCCL entry point is defined: the strong symbol is pnccl<Name> (the profiling interface,
// as MPI's PMPI) and nccl<Name> is a weak alias of it, so a tool can define its own nccl<Name>
// and call pnccl<Name>. exports.map.in (via CMake) exports these two names per function and
// nothing else.
//
//   extern "C" { WEFT_NCCL_API(ncclResult_t, CommCount, const ncclComm_t comm, int* count) { ... } }
#pragma once

#define WEFT_NCCL_API(ret, name, ...)                                              \
  ret nccl##name(__VA_ARGS__) __attribute__((weak, alias("pnccl" #name)));        \
  ret pnccl##name(__VA_ARGS__)
