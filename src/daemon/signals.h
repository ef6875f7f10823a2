// Signals are taken synchronously by the main thread only: SIGTERM and
// SIGINT stop the daemon, SIGHUP reloads the TLS certificate; SIGPIPE is
// ignored.
#pragma once

#include <signal.h>

#include "daemon/listeners.h"

namespace vramd::daemon {

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (call it before any
// thread starts, so every thread inherits the mask) and ignores SIGPIPE.
// Returns the blocked set for WaitForStop.
sigset_t BlockSignals();

// Waits for SIGTERM or SIGINT (logged); on SIGHUP reloads the listeners' TLS
// certificate and key (logged) and goes on waiting.
void WaitForStop(const sigset_t& sigs, Listeners& listeners);

}  // namespace vramd::daemon
