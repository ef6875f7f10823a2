#include "output.h"

#include <cstdio>

#include "vramd/ledger/quantity.h"

namespace vramctl {

int Fail(const std::string& msg, int code) {
  std::fprintf(stderr, "vramctl: %s\n", msg.c_str());
  return code;
}

std::string Bytes(const nlohmann::json& v) {
  if (!v.is_number()) return "-";
  return vramd::ledger::FormatBytes(v.get<int64_t>());
}

std::string RatioText(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v.get<double>());
  return buf;
}

}  // namespace vramctl
