// The communicator a multirank test binary runs on: made once in main() from the launcher's
// environment (weft-run), shared by every TEST of the binary. All ranks run the same tests in the
// same order, so each TEST is one collective conversation.
#pragma once

#include "weft/communicator.h"

namespace weft::testing {

Communicator& world();

}  // namespace weft::testing
