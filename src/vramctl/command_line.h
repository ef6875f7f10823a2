// vramctl's command line: the global flags (server, token, TLS, output
// format), read wherever they stand, before or after the command, and from
// the environment; the command and its own arguments. Pure: the environment
// comes in as a function, nothing is read or printed here.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "output.h"
#include "target.h"

namespace vramctl {

// One global flag: `--name VALUE` / `--name=VALUE` (or `--name` alone when it
// takes no value), its short form, the variable that sets its default.
struct GlobalFlag {
  const char* name;        // "--server"
  const char* short_name;  // "-s", or nullptr
  const char* value;       // "URL" for usage; nullptr: a switch
  const char* env;         // "VRAMD_SERVER", or nullptr
  const char* help;
};
const std::vector<GlobalFlag>& GlobalFlags();

struct GlobalOptions {
  std::string server = "http://127.0.0.1:8080";  // normalized: a scheme, no trailing '/'
  std::string token_file;
  Tls tls;
  Format output = Format::kTable;
  bool help = false;  // -h/--help before the command
  bool plaintext_token = false;  // --insecure-plaintext-token: the token over http:// to any host
};

struct Invocation {
  GlobalOptions global;
  std::string command;            // "" when none was given
  std::vector<std::string> args;  // the command's own arguments, global flags taken out
};

// Reads an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// Parses argv[1..] into *out; returns "" or the error to print (exit 2).
// Global flags are taken out wherever they stand, except after "--" (lock
// run's command keeps its arguments) and as the value of one of the
// command's own flags (`lock acquire --owner -o` keeps "-o" as the owner).
// -h/--help before the command asks for the global usage; after it, it is
// the command's. The environment (VRAMD_SERVER, VRAMD_TOKEN_FILE,
// VRAMD_CACERT, VRAMD_CERT, VRAMD_KEY, VRAMD_TLS_SERVER_NAME,
// VRAMD_INSECURE_SKIP_TLS_VERIFY) gives
// the defaults. Refused: an unknown -o, a flag without its value, --cert
// without --key (or the reverse), TLS options with an http:// server, a
// server URL that is not http(s)://HOST[:PORT], a token file with an
// http:// server other than loopback (localhost, 127.0.0.0/8, [::1]) unless
// --insecure-plaintext-token (VRAMD_INSECURE_PLAINTEXT_TOKEN) says so.
std::string ParseCommandLine(const std::vector<std::string>& args, const EnvLookup& env, Invocation* out);

// The name usage lines show: "kubectl vram" when argv[0]'s base name is
// kubectl-vram (kubectl runs plugins by that name), else "vramctl".
std::string ProgramName(const std::string& argv0);

}  // namespace vramctl
