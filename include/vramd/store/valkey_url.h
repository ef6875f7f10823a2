// Valkey URLs (redis://... and, see ValkeyOptions::url, redis+sentinel://...):
// parsing, checking and redaction. Pure functions: no connection is made.
#pragma once

#include <string>
#include <string_view>

#include "vramd/status.h"

namespace vramd::store {

// Where a URL points. password/username come from the URL's userinfo
// (percent-decoded); a lone userinfo ("redis://secret@host") is the password.
struct ValkeyEndpoint {
  std::string host;
  int port = 6379;
  std::string username;
  std::string password;
  int db = 0;

  std::string Display() const;  // "host:port" ("[::1]:6379"); never the password
};

// Parses redis://[user:password@]host[:port][/db] (the scheme may be omitted;
// valkey:// is accepted too). kInvalidArgument, with the password redacted,
// when malformed. Lets configuration reject a bad URL at startup.
Result<ValkeyEndpoint> ParseValkeyUrl(std::string_view url);

// The URL with its password replaced by "***", for logs and messages.
std::string RedactValkeyUrl(std::string_view url);

// Checks either URL form (redis://... or redis+sentinel://..., see
// ValkeyOptions::url) as NewValkeyClient will read it, so that configuration
// can reject a bad one at startup. The message never holds the password.
Status ValidateValkeyUrl(std::string_view url);

}  // namespace vramd::store
