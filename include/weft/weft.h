/* weft C API. Semantics map one to one onto NCCL's (ncclX -> weftX), on host memory:
 *
 *   weftGetUniqueId / weftCommInitRank / weftCommInitAll / weftCommSplit / weftCommShrink /
 *   weftCommDestroy / weftCommAbort / weftCommGetAsyncError / weftCommCount / weftCommUserRank
 *   weftAllReduce, weftReduceScatter, weftAllGather, weftBroadcast, weftReduce, weftAlltoAll,
 *   weftGather, weftScatter, weftSend, weftRecv, weftBarrier, weftGroupStart / weftGroupEnd
 *
 * Where NCCL takes a cudaStream_t, weft takes a weftRequest_t*: pass NULL to block until the
 * operation completes, or a pointer to receive a request to weftWait/weftTest later (and free
 * with weftRequestFree). Inside weftGroupStart/End, calls with a NULL request complete by the
 * time weftGroupEnd returns; weftGroupEnd applies to every communicator the calling thread used
 * in the group, as in NCCL.
 *
 * Every function checks its arguments, never aborts the process, and returns a weftResult_t
 * whose values equal ncclResult_t's. weftGetLastError(comm) gives the last error's message
 * ("rank 2: broadcast: root 7 is out of range for 4 ranks"); comm may be NULL for errors with no
 * communicator. Thread-safety: as NCCL: one thread issues calls on a communicator at a time.
 */
#ifndef WEFT_WEFT_H_
#define WEFT_WEFT_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[WEFT_UNIQUE_ID_BYTES];
} weftUniqueId;

typedef struct weftComm* weftComm_t;
typedef struct weftRequest* weftRequest_t;

typedef enum {
  weftSuccess = 0,
  weftUnhandledCudaError = 1,
  weftSystemError = 2,
  weftInternalError = 3,
  weftInvalidArgument = 4,
  weftInvalidUsage = 5,
  weftRemoteError = 6,
  weftInProgress = 7,
  weftTimeout = 8,
  weftNumResults = 9
} weftResult_t;

typedef enum {
  weftInt8 = 0, weftChar = 0,
  weftUint8 = 1,
  weftInt32 = 2, weftInt = 2,
  weftUint32 = 3,
  weftInt64 = 4,
  weftUint64 = 5,
  weftFloat16 = 6, weftHalf = 6,
  weftFloat32 = 7, weftFloat = 7,
  weftFloat64 = 8, weftDouble = 8,
  weftBfloat16 = 9,
  weftFloat8e4m3 = 10,
  weftFloat8e5m2 = 11,
  weftNumTypes = 12,
  /* Not types: they give the enum the range of int, so a bad value passed from C is reported as
   * weftInvalidArgument rather than being undefined behaviour in the C++ library. */
  weftDataTypeMinInt_ = -2147483647 - 1,
  weftDataTypeMaxInt_ = 2147483647
} weftDataType_t;

typedef enum {
  weftSum = 0,
  weftProd = 1,
  weftMax = 2,
  weftMin = 3,
  weftAvg = 4,
  weftNumOps = 5,
  weftRedOpMinInt_ = -2147483647 - 1, /* the range of int; see weftDataType_t */
  weftRedOpMaxInt_ = 2147483647
} weftRedOp_t;

#define WEFT_SPLIT_NOCOLOR (-1)

int weftGetVersion(void); /* MAJOR*10000 + MINOR*100 + PATCH */
const char* weftGetErrorString(weftResult_t result);
const char* weftGetLastError(weftComm_t comm);

weftResult_t weftGetUniqueId(weftUniqueId* id);
/* A rank whose init fails, its WEFT_* variables refused included, tells the other ranks why: theirs
 * fail at once with weftRemoteError naming it (docs/API.md, kRemoteError). */
weftResult_t weftCommInitRank(weftComm_t* comm, int nranks, weftUniqueId id, int rank);
/* Joins from the launcher's environment (weft-run, mpirun, srun, torchrun); see docs/LAUNCH.md.
 * Its refused WEFT_* variables are told to the other ranks as weftCommInitRank's are; a launcher
 * environment it cannot read is not (docs/API.md, kRemoteError, says where this falls short). */
weftResult_t weftCommInitFromEnv(weftComm_t* comm);
/* ndev communicators in this process, one per rank (threads are started internally). */
weftResult_t weftCommInitAll(weftComm_t* comms, int ndev, const int* devlist);
/* Runs at once, in a group too (one thread cannot split several ranks in one group). A rank that
 * passes a NULL newcomm or a color below WEFT_SPLIT_NOCOLOR tells the others, whose split fails at
 * once; the communicator stays usable. */
weftResult_t weftCommSplit(weftComm_t comm, int color, int key, weftComm_t* newcomm);
/* The ranks not in exclude[0..nexclude) form a new communicator in their old order; the excluded
 * ranks do not call and may be dead (Communicator::shrink, docs/API.md). */
weftResult_t weftCommShrink(weftComm_t comm, const int* exclude, int nexclude, weftComm_t* newcomm);
/* Inside weftGroupStart/End both free comm when the group ends, after its calls (an abort fails
 * pending work at once); until then a call on comm fails (weftInvalidUsage). */
weftResult_t weftCommDestroy(weftComm_t comm);
weftResult_t weftCommAbort(weftComm_t comm);
weftResult_t weftCommGetAsyncError(weftComm_t comm, weftResult_t* async_error);
weftResult_t weftCommCount(weftComm_t comm, int* count);
weftResult_t weftCommUserRank(weftComm_t comm, int* rank);

weftResult_t weftAllReduce(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                           weftRedOp_t op, weftComm_t comm, weftRequest_t* request);
weftResult_t weftReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, weftDataType_t datatype,
                               weftRedOp_t op, weftComm_t comm, weftRequest_t* request);
weftResult_t weftAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, weftDataType_t datatype,
                           weftComm_t comm, weftRequest_t* request);
weftResult_t weftBroadcast(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype, int root,
                           weftComm_t comm, weftRequest_t* request);
weftResult_t weftReduce(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype, weftRedOp_t op,
                        int root, weftComm_t comm, weftRequest_t* request);
weftResult_t weftAlltoAll(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                          weftComm_t comm, weftRequest_t* request);
weftResult_t weftGather(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype, int root,
                        weftComm_t comm, weftRequest_t* request);
weftResult_t weftScatter(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype, int root,
                         weftComm_t comm, weftRequest_t* request);
weftResult_t weftBarrier(weftComm_t comm, weftRequest_t* request);
weftResult_t weftSend(const void* sendbuff, size_t count, weftDataType_t datatype, int peer, weftComm_t comm,
                      weftRequest_t* request);
weftResult_t weftRecv(void* recvbuff, size_t count, weftDataType_t datatype, int peer, weftComm_t comm,
                      weftRequest_t* request);
weftResult_t weftGroupStart(void);
weftResult_t weftGroupEnd(void);

/* Blocks until the request completes; returns its outcome. The request stays valid. A failure is
 * recorded as the thread's last error (weftGetLastError(NULL)), not the communicator's: a request
 * may outlive its communicator. */
weftResult_t weftWait(weftRequest_t request);
/* Sets *done to 1 (and returns the outcome) once complete; never blocks. */
weftResult_t weftTest(weftRequest_t request, int* done);
weftResult_t weftRequestFree(weftRequest_t request);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_WEFT_H_ */
