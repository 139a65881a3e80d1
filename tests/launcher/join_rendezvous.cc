// join_rendezvous: one rank of a job that only meets the others. It reads the launcher's
// environment (read_launch_env), serves the root where it is the rank that must, joins the
// bootstrap rendezvous and ring, passes a barrier and exits 0; on any failure it prints why and
// exits 1. This is the part of Communicator::init_from_env() that involves the launcher and the
// root, without the transports, so that a test can start many ranks on a small machine
// (weft_run_test.sh's fd-limit case).
#include <cstdio>

#include "src/launch_env.h"
#include "src/net/bootstrap.h"
#include "weft/config.h"

int main() {
  auto config = weft::Config::from_env();
  if (!config.ok()) {
    std::printf("config: %s\n", config.status().to_string().c_str());
    return 1;
  }
  auto env = weft::read_launch_env(*config);
  weft::Status st = env.status();
  if (st.ok() && env->serve_root) st = env->id.serve(*config, env->root_listen);
  if (st.ok()) {
    auto boot = weft::Bootstrap::create(env->id, env->rank, env->nranks, *config,
                                        weft::Deadline::after(config->timeout));
    st = boot.ok() ? (*boot)->barrier(weft::Deadline::after(config->timeout)) : boot.status();
  }
  if (!st.ok()) {
    std::printf("%s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}
