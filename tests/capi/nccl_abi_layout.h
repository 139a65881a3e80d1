/* The numbers of the NCCL ABI, as compile-time checks on whichever nccl.h was included before:
 * weft's (nccl_abi_test.c) or NVIDIA's where one is installed (nccl_abi_nvidia_test.c), so the
 * expectations themselves are checked against NVIDIA's header.
 *
 * NCCL_ABI_VERSION: the NCCL version whose ABI the header has (default NCCL_VERSION_CODE);
 * fields and codes newer than it are not checked. ncclConfig_t's offsets are those of NCCL's field
 * order on LP64 (x86_64): size_t and pointers 8 bytes aligned to 8, ints 4. */
#ifndef WEFT_TESTS_NCCL_ABI_LAYOUT_H_
#define WEFT_TESTS_NCCL_ABI_LAYOUT_H_

#include <limits.h>
#include <stddef.h>

#ifndef NCCL_ABI_VERSION
#define NCCL_ABI_VERSION NCCL_VERSION_CODE
#endif

_Static_assert(ncclSuccess == 0 && ncclUnhandledCudaError == 1 && ncclSystemError == 2 && ncclInternalError == 3 &&
                   ncclInvalidArgument == 4 && ncclInvalidUsage == 5 && ncclRemoteError == 6 && ncclInProgress == 7,
               "ncclResult_t");
#if NCCL_ABI_VERSION >= NCCL_VERSION(2, 30, 3)
_Static_assert(ncclTimeout == 8 && ncclNumResults == 9, "ncclResult_t: ncclTimeout (2.30.3)");
#endif
_Static_assert(ncclInt8 == 0 && ncclChar == 0 && ncclUint8 == 1 && ncclInt32 == 2 && ncclInt == 2 && ncclUint32 == 3 &&
                   ncclInt64 == 4 && ncclUint64 == 5 && ncclFloat16 == 6 && ncclHalf == 6 && ncclFloat32 == 7 &&
                   ncclFloat == 7 && ncclFloat64 == 8 && ncclDouble == 8 && ncclBfloat16 == 9 &&
                   ncclFloat8e4m3 == 10 && ncclFloat8e5m2 == 11 && ncclNumTypes == 12,
               "ncclDataType_t");
_Static_assert(ncclSum == 0 && ncclProd == 1 && ncclMax == 2 && ncclMin == 3 && ncclAvg == 4 && ncclNumOps == 5,
               "ncclRedOp_t");
_Static_assert(ncclScalarDevice == 0 && ncclScalarHostImmediate == 1, "ncclScalarResidence_t");
_Static_assert(sizeof(ncclResult_t) == 4 && sizeof(ncclDataType_t) == 4 && sizeof(ncclRedOp_t) == 4, "enum sizes");
_Static_assert(NCCL_UNIQUE_ID_BYTES == 128 && sizeof(ncclUniqueId) == 128, "ncclUniqueId");
_Static_assert(NCCL_SPLIT_NOCOLOR == -1 && NCCL_CONFIG_UNDEF_INT == INT_MIN, "NCCL_SPLIT_NOCOLOR, NCCL_CONFIG_UNDEF_INT");
_Static_assert(NCCL_VERSION(2, 27, 3) == 22703 && NCCL_VERSION(2, 30, 5) == 23005 && NCCL_VERSION(2, 9, 6) == 20906 &&
                   NCCL_VERSION(2, 8, 4) == 2804,
               "NCCL_VERSION: X*10000+Y*100+Z from 2.9, X*1000+Y*100+Z before");

#define NCCL_ABI_AT(field, offset) _Static_assert(offsetof(ncclConfig_t, field) == (offset), "offsetof " #field)
NCCL_ABI_AT(size, 0);
NCCL_ABI_AT(magic, 8);
NCCL_ABI_AT(version, 12);
NCCL_ABI_AT(blocking, 16);
NCCL_ABI_AT(cgaClusterSize, 20);
NCCL_ABI_AT(minCTAs, 24);
NCCL_ABI_AT(maxCTAs, 28);
NCCL_ABI_AT(netName, 32);
NCCL_ABI_AT(splitShare, 40);
NCCL_ABI_AT(trafficClass, 44);
NCCL_ABI_AT(commName, 48);
NCCL_ABI_AT(collnetEnable, 56);
NCCL_ABI_AT(CTAPolicy, 60);
NCCL_ABI_AT(shrinkShare, 64);
NCCL_ABI_AT(nvlsCTAs, 68);
#if NCCL_ABI_VERSION >= NCCL_VERSION(2, 28, 0)
NCCL_ABI_AT(nChannelsPerNetPeer, 72);
NCCL_ABI_AT(nvlinkCentricSched, 76);
#endif
#if NCCL_ABI_VERSION >= NCCL_VERSION(2, 29, 0)
NCCL_ABI_AT(graphUsageMode, 80);
NCCL_ABI_AT(numRmaCtx, 84);
#endif
#if NCCL_ABI_VERSION >= NCCL_VERSION(2, 30, 0)
NCCL_ABI_AT(maxP2pPeers, 88);
#endif
#if NCCL_ABI_VERSION >= NCCL_VERSION(2, 30, 5)
NCCL_ABI_AT(graphStreamOrdering, 92);
_Static_assert(sizeof(ncclConfig_t) == 96, "sizeof(ncclConfig_t) with graphStreamOrdering (2.30.5)");
#endif

#endif /* WEFT_TESTS_NCCL_ABI_LAYOUT_H_ */
