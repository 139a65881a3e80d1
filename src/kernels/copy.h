// copy(): the data path's bulk byte copy (the shm and self transports' copies into and out of
// their FIFOs, the executor's COPY steps), instead of std::memcpy.
//
// Why: glibc 2.36 (Debian 12's) copies blocks from 2 KiB up to the L2 size with
// `rep movsb` on CPUs that advertise ERMS/FSRM, and on AMD Zen 3/4 that instruction runs many
// times slower than a vector loop for some source/destination alignments (glibc bug 30994). On
// the AMD EPYC VM this was measured on it made the shm transport's 512 KiB copies the bottleneck
// of every large collective (docs/PERFORMANCE.md, "Copies"). With AVX2, copy() runs 256-bit loads
// and stores (non-temporal stores from kStreamReduceBytes up or under StreamStores, as the reduce
// kernels); without it, and below 256 bytes, it is std::memcpy.
//
// REQUIRES: the two ranges do not overlap; bytes may be 0 (the pointers are then not touched).
// Thread-safety: a pure function; the instruction set is chosen once, as for reduce.h.
#pragma once

#include <cstddef>

namespace weft::kernels {

void copy(void* dst, const void* src, size_t bytes);

}  // namespace weft::kernels
