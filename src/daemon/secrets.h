// The daemon's secrets: read from files named in the config (mounted
// Secrets), or, for the Valkey passwords, from the environment — never from a
// flag, which any user can read in the process list.
#pragma once

#include <string>

#include "vramd/config/config.h"
#include "vramd/status.h"

namespace vramd::daemon {

struct Secrets {
  std::string valkey_password;           // valkey.password_file, else $VRAMD_VALKEY_PASSWORD
  std::string valkey_sentinel_password;  // valkey.sentinel_password_file, else $VRAMD_VALKEY_SENTINEL_PASSWORD
  std::string api_token;                 // api_token_file (empty: the API needs no token)
};

// Reads the secrets `cfg` names. A file that cannot be read, or an empty
// api_token_file, is an error whose message starts with the config key
// ("valkey.password_file: cannot read /path"); the daemon does not start.
// Trailing newlines, carriage returns and spaces of a file are dropped.
Result<Secrets> ReadSecrets(const config::Config& cfg);

}  // namespace vramd::daemon
