#include "src/refused_init.h"

#include "src/deadline.h"
#include "src/log.h"
#include "src/net/bootstrap.h"
#include "weft/config.h"

namespace weft {

Status tell_init_refused(const UniqueId& id, int rank, int nranks, bool serve_root, const Status& why,
                         const Config& settings, UniqueId::Listen listen) {
  // One rank alone has nobody to tell.
  if (why.ok() || !id.valid() || nranks < 2 || rank < 0 || rank >= nranks) return why;
  const Logger log(settings, rank);
  if (serve_root) {
    const Status served = id.serve(settings, listen);
    if (!served.ok()) {
      log.warn("could not start the rendezvous root to tell the other ranks why this rank's init failed: " +
               served.message());
      return why;
    }
  }
  // The settings may be what was refused (a program's Config whose timeout is out of bounds):
  // then the default timeout bounds the telling.
  const auto wait = settings.check_bounds().ok() ? settings.timeout : Config().timeout;
  const Status told = Bootstrap::report_failure(id, rank, nranks, why.message(), Deadline::after(wait));
  if (!told.ok()) log.warn("could not tell the other ranks why this rank's init failed: " + told.message());
  return why;
}

}  // namespace weft
