#include "vramd/status.h"

namespace vramd {

const char* CodeName(Code c) {
  switch (c) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kNotFound: return "NotFound";
    case Code::kConflict: return "Conflict";
    case Code::kInsufficient: return "Insufficient";
    case Code::kUnauthenticated: return "Unauthenticated";
    case Code::kPayloadTooLarge: return "PayloadTooLarge";
    case Code::kUnavailable: return "Unavailable";
    case Code::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace vramd
