// The NCCL ABI, part 3: entry points of NCCL 2.27/2.28 that weft does not provide (symmetric
// windows, device communicators, simulated groups). They exist so programs linked against those
// versions load (PyTorch references each of them), and they refuse with ncclInvalidUsage and a
// message that says what to use instead. docs/NCCL.md lists them.
#include <string>

#include "src/nccl/internal.h"
#include "src/nccl/visibility.h"

using namespace weft::nccl;  // NOLINT: the entry points below are the namespace's whole purpose

namespace {
weft::Status not_supported(const char* fn, const char* instead) {
  return weft::invalid_usage(std::string(fn) + " is not supported by weft's libnccl.so.2" + instead);
}

ncclResult_t unsupported(const char* fn, const char* instead) { return fail(not_supported(fn, instead)); }
}  // namespace

extern "C" {

WEFT_NCCL_API(ncclResult_t, CommWindowRegister, ncclComm_t, void*, size_t, ncclWindow_t* win, int) {
  if (win != nullptr) *win = nullptr;
  return unsupported("ncclCommWindowRegister", " (no symmetric memory windows); use ncclCommRegister");
}

WEFT_NCCL_API(ncclResult_t, CommWindowDeregister, ncclComm_t, ncclWindow_t) {
  return unsupported("ncclCommWindowDeregister", " (no symmetric memory windows)");
}

WEFT_NCCL_API(ncclResult_t, DevCommCreate, ncclComm_t, ncclDevCommRequirements_t const*, ncclDevComm_t*) {
  return unsupported("ncclDevCommCreate", " (no device-side communicators)");
}

WEFT_NCCL_API(ncclResult_t, DevCommDestroy, ncclComm_t, ncclDevComm_t const*) {
  return unsupported("ncclDevCommDestroy", " (no device-side communicators)");
}

// As NCCL's, it ends the group (NCCL's runs the group's end with a simulation), here failed: its
// queued calls are dropped. Its own error is the last one (the group's end records the drops).
WEFT_NCCL_API(ncclResult_t, GroupSimulateEnd, ncclSimInfo_t*) {
  const weft::Status why = not_supported("ncclGroupSimulateEnd", "; weft-sim predicts collective times (docs/SIMULATOR.md)");
  if (weft::capi::in_group()) {
    weft::capi::fail_open_group(why);
    (void)weft::capi::group_end();
  }
  return fail(why);
}

}  // extern "C"
