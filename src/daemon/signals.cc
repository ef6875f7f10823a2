#include "daemon/signals.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

namespace vramd::daemon {

sigset_t BlockSignals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return sigs;
}

void WaitForStop(const sigset_t& sigs, Listeners& listeners) {
  for (;;) {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (sig == SIGHUP) {
      Status s = listeners.ReloadTls();
      if (s.ok()) spdlog::info("SIGHUP: TLS certificate reloaded");
      else spdlog::error("SIGHUP: {}", s.message());
      continue;
    }
    spdlog::info("signal {}: stopping", sig);
    return;
  }
}

}  // namespace vramd::daemon
