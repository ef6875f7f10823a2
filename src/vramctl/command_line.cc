#include "command_line.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "commands.h"

namespace vramctl {
namespace {

const GlobalFlag* FindGlobal(const std::string& name) {
  for (const GlobalFlag& f : GlobalFlags()) {
    if (name == f.name || (f.short_name != nullptr && name == f.short_name)) return &f;
  }
  return nullptr;
}

std::optional<bool> ParseBool(const std::string& s) {
  if (s == "true" || s == "1" || s == "yes") return true;
  if (s == "false" || s == "0" || s == "no" || s.empty()) return false;
  return std::nullopt;
}

// Sets the option `f` names from `value`; returns "" or the error.
std::string Apply(const GlobalFlag& f, const std::string& value, const char* from, GlobalOptions* g) {
  const std::string name = f.name;
  if (name == "--server") {
    g->server = value;
  } else if (name == "--token-file") {
    g->token_file = value;
  } else if (name == "--cacert") {
    g->tls.ca_file = value;
  } else if (name == "--cert") {
    g->tls.cert_file = value;
  } else if (name == "--key") {
    g->tls.key_file = value;
  } else if (name == "--tls-server-name") {
    g->tls.server_name = value;
  } else if (name == "--insecure-plaintext-token") {
    std::optional<bool> b = ParseBool(value);
    if (!b) return std::string(from) + ": \"" + value + "\" is not true or false";
    g->plaintext_token = *b;
  } else if (name == "--insecure-skip-tls-verify") {
    std::optional<bool> b = ParseBool(value);
    if (!b) return std::string(from) + ": \"" + value + "\" is not true or false";
    g->tls.skip_verify = *b;
  } else if (name == "--output") {
    std::optional<Format> fmt = ParseFormat(value);
    if (!fmt) return "unknown output format \"" + value + "\" (use -o table, -o wide or -o json)";
    g->output = *fmt;
  }
  return "";
}

// Whether HOST[:PORT] (or [V6]:PORT) names this machine's loopback:
// localhost, 127.0.0.0/8, ::1.
bool IsLoopbackHost(std::string_view host_port) {
  std::string_view host = host_port;
  if (host.starts_with('[')) {
    host = host.substr(1, host.find(']') == std::string_view::npos ? host.npos : host.find(']') - 1);
    return host == "::1";
  }
  host = host.substr(0, host.find(':'));
  if (host == "localhost") return true;
  if (!host.starts_with("127.")) return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.') ++dots;
    else if (c < '0' || c > '9') return false;
  }
  return dots == 3;
}

// "http://h:p" for "h:p"; the URL without trailing '/'; "" when it is not
// http(s)://HOST[:PORT].
std::string NormalizeServer(std::string url) {
  if (url.find("://") == std::string::npos) url = "http://" + url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  const size_t scheme_end = url.find("://");
  const std::string scheme = url.substr(0, scheme_end), rest = url.substr(scheme_end + 3);
  if (scheme != "http" && scheme != "https") return "";
  if (rest.empty() || rest.find_first_of("/?#@ ") != std::string::npos) return "";
  return url;
}

}  // namespace

const std::vector<GlobalFlag>& GlobalFlags() {
  static const std::vector<GlobalFlag> flags = {
      {"--server", "-s", "URL", "VRAMD_SERVER", "vramd's address, http:// or https:// (default http://127.0.0.1:8080)"},
      {"--token-file", nullptr, "FILE", "VRAMD_TOKEN_FILE",
       "bearer token: the API token, or with identities a Kubernetes token for the audience vramd (reads need one too)"},
      {"--cacert", nullptr, "FILE", "VRAMD_CACERT", "https: trust this CA (PEM) instead of the system's CAs"},
      {"--cert", nullptr, "FILE", "VRAMD_CERT", "https: client certificate (PEM), for a vramd that requires one"},
      {"--key", nullptr, "FILE", "VRAMD_KEY", "https: the client certificate's key (PEM)"},
      {"--tls-server-name", nullptr, "NAME", "VRAMD_TLS_SERVER_NAME",
       "https: the name vramd's certificate must hold, when --server is another (a port-forward)"},
      {"--insecure-skip-tls-verify", nullptr, nullptr, "VRAMD_INSECURE_SKIP_TLS_VERIFY",
       "https: do not check vramd's certificate (testing only)"},
      {"--insecure-plaintext-token", nullptr, nullptr, "VRAMD_INSECURE_PLAINTEXT_TOKEN",
       "send the token over http:// to a host other than loopback (anyone on the path reads it)"},
      {"--output", "-o", "FORMAT", nullptr, "table (default), wide (more columns) or json (the API's JSON)"},
      {"--help", "-h", nullptr, nullptr, "this text; after a command, that command's usage"},
  };
  return flags;
}

std::string ParseCommandLine(const std::vector<std::string>& args, const EnvLookup& env, Invocation* out) {
  Invocation inv;
  GlobalOptions& g = inv.global;
  for (const GlobalFlag& f : GlobalFlags()) {
    if (f.env == nullptr) continue;
    std::optional<std::string> v = env(f.env);
    if (!v) continue;
    if (std::string err = Apply(f, *v, f.env, &g); !err.empty()) return err;
  }
  const Command* cmd = nullptr;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      if (cmd == nullptr && inv.command.empty()) return "\"--\" before a command";
      inv.args.insert(inv.args.end(), args.begin() + static_cast<long>(i), args.end());
      break;
    }
    // The flag's name and, when attached ("--server=URL", "-ojson"), its value.
    std::string name = a;
    std::optional<std::string> value;
    if (a.rfind("--", 0) == 0) {
      if (size_t eq = a.find('='); eq != std::string::npos) {
        name = a.substr(0, eq);
        value = a.substr(eq + 1);
      }
    } else if (a.size() > 2 && a[0] == '-' && a[1] != '-') {
      if (const GlobalFlag* f = FindGlobal(a.substr(0, 2)); f != nullptr && f->value != nullptr) {
        name = a.substr(0, 2);
        value = a.substr(a[2] == '=' ? 3 : 2);
      }
    }
    const GlobalFlag* f = FindGlobal(name);
    if (f != nullptr && std::strcmp(f->name, "--help") == 0) {
      if (!inv.command.empty()) {
        inv.args.push_back(a);  // the command's usage
      } else {
        g.help = true;
      }
      continue;
    }
    if (f != nullptr) {
      if (f->value == nullptr) {
        if (std::string err = Apply(*f, value.value_or("true"), f->name, &g); !err.empty()) return err;
        continue;
      }
      if (!value) {
        if (i + 1 >= args.size()) return std::string(f->name) + " needs a value (" + f->value + ")";
        value = args[++i];
      }
      if (std::string err = Apply(*f, *value, f->name, &g); !err.empty()) return err;
      continue;
    }
    if (inv.command.empty()) {
      if (a.size() > 1 && a[0] == '-') return "unknown flag " + a + " (see --help)";
      inv.command = a;
      cmd = FindCommand(a);
      continue;
    }
    inv.args.push_back(a);
    // One of the command's own flags that takes a value: the value is its,
    // even when it looks like a global flag.
    if (cmd != nullptr && a.find('=') == std::string::npos && i + 1 < args.size() &&
        std::find_if(cmd->value_flags.begin(), cmd->value_flags.end(),
                     [&](const char* v) { return a == v; }) != cmd->value_flags.end()) {
      inv.args.push_back(args[++i]);
    }
  }
  std::string server = NormalizeServer(g.server);
  if (server.empty()) return "server URL \"" + g.server + "\" is not http(s)://HOST[:PORT]";
  g.server = server;
  const Tls& t = g.tls;
  if (t.cert_file.empty() != t.key_file.empty()) return "--cert and --key go together (the client certificate and its key)";
  if (server.rfind("http://", 0) == 0 &&
      (!t.ca_file.empty() || !t.cert_file.empty() || !t.server_name.empty() || t.skip_verify)) {
    return "--cacert, --cert, --key, --tls-server-name and --insecure-skip-tls-verify need an https:// server (now " +
           server + ")";
  }
  if (t.server_name.find_first_of(":/[] ") != std::string::npos) {
    return "--tls-server-name \"" + t.server_name + "\" is not a host name";
  }
  // Issue 33: the token is a credential; in plain http anyone on the path
  // reads it. Only to this machine's loopback, or when told.
  if (!g.token_file.empty() && server.rfind("http://", 0) == 0 && !g.plaintext_token &&
      !IsLoopbackHost(std::string_view(server).substr(7))) {
    return "refusing to send the token (--token-file) over plain http to " + server +
           ": use an https:// server, or --insecure-plaintext-token to send it anyway";
  }
  *out = std::move(inv);
  return "";
}

std::string ProgramName(const std::string& argv0) {
  const size_t slash = argv0.rfind('/');
  const std::string base = slash == std::string::npos ? argv0 : argv0.substr(slash + 1);
  return base == "kubectl-vram" ? "kubectl vram" : "vramctl";
}

}  // namespace vramctl
