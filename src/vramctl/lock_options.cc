#include "lock_options.h"

#include <limits.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "vramd/parse.h"

namespace vramctl::lock {
namespace {

// Keeps the characters an owner part may hold; others become '-'.
std::string OwnerPart(std::string s, const char* punct) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::strchr(punct, c) == nullptr) c = '-';
  }
  if (s.size() > 120) s.resize(120);
  return s.empty() ? "unknown" : s;
}

}  // namespace

std::optional<int64_t> ParseDurationMs(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return std::nullopt;
  std::string num = s.substr(0, i), unit = s.substr(i);
  std::optional<double> parsed = vramd::ParseDouble(num, 0, 1e15);
  if (!parsed) return std::nullopt;
  const double v = *parsed;
  double mult;
  if (unit.empty() || unit == "s") mult = 1000;
  else if (unit == "ms") mult = 1;
  else if (unit == "m") mult = 60'000;
  else if (unit == "h") mult = 3'600'000;
  else return std::nullopt;
  double ms = v * mult;
  if (ms > 1e12) return std::nullopt;
  return static_cast<int64_t>(std::llround(ms));
}

std::string DurationText(int64_t ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

std::string DefaultOwner(bool with_pid) {
  const char* uid = std::getenv("POD_UID");
  std::string host;
  if (const char* h = std::getenv("HOSTNAME"); h != nullptr && *h != '\0') {
    host = h;
  } else {
    char buf[HOST_NAME_MAX + 1] = {};
    if (gethostname(buf, sizeof buf - 1) == 0) host = buf;
  }
  std::string inst = OwnerPart(host, "._:@+-");
  if (with_pid) inst += "-" + std::to_string(getpid());
  return OwnerPart(uid != nullptr && *uid != '\0' ? uid : "local", "._-") + "/" + inst;
}

std::string ParseOptions(const std::vector<std::string>& args, size_t from, Options* o) {
  for (size_t i = from; i < args.size(); ++i) {
    std::string a = args[i], value;
    if (a == "--") {
      o->command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      return "";
    }
    if (a == "--stop-on-loss") {
      o->stop_on_loss = true;
      continue;
    }
    size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (a.rfind("--", 0) == 0) {
      if (i + 1 >= args.size()) return a + " needs a value";
      value = args[++i];
    } else {
      return "unexpected argument \"" + a + "\"";
    }
    auto duration = [&](std::optional<int64_t>* out) -> std::string {
      std::optional<int64_t> d = ParseDurationMs(value);
      if (!d) return a + ": \"" + value + "\" is not a duration (e.g. 500ms, 30s, 2m)";
      *out = d;
      return "";
    };
    std::string err;
    if (a == "--node") o->node = value;
    else if (a == "--gpu") o->gpu = value;
    else if (a == "--owner") o->owner = value;
    else if (a == "--ttl") err = duration(&o->ttl_ms);
    else if (a == "--wait") err = duration(&o->wait_ms);
    else if (a == "--heartbeat") err = duration(&o->heartbeat_ms);
    else err = "unknown option " + a;
    if (!err.empty()) return err;
  }
  return "";
}

std::string LockPath(const Options& o, const char* op) { return "/v1/locks/" + o.node + "/" + o.gpu + "/" + op; }

std::string Check(const Options& o, bool need_target) {
  if (need_target && (o.node.empty() || o.gpu.empty())) return "--node and --gpu are required";
  if (o.ttl_ms && (*o.ttl_ms < 100 || *o.ttl_ms > 86'400'000)) return "--ttl must be from 100ms to 24h";
  return "";
}

}  // namespace vramctl::lock
