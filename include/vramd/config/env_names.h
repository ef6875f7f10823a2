// How vramd's configuration treats the VRAMD_* names in its environment.
//
// The prefix is not vramd's alone: the kubelet injects service-link variables
// for every Service in the pod's namespace (a Service `vramd-valkey` gives
// VRAMD_VALKEY_SERVICE_HOST, VRAMD_VALKEY_PORT=tcp://10.96.0.11:6379, ...),
// and scripts and tests set their own VRAMD_* names. So an unknown name is a
// warning, not an error; it is an error only when it looks like a key's
// variable (a typo) and its value would be invalid for that key, and the
// service-link shapes are ignored without a word. Load (config.h) applies
// these rules; the functions here are pure.
#pragma once

#include <string>
#include <string_view>

namespace vramd::config {

enum class EnvKind {
  kKey,          // a config key's own variable: applied; an invalid value is an error
  kIgnored,      // not VRAMD_*, or read elsewhere (VRAMD_CONFIG, the secrets main reads,
                 // the project's scripts and tests): ignored quietly
  kServiceLink,  // a kubelet service-link variable (IsServiceLinkVariable): ignored quietly
  kNearKey,      // unknown, within kNearKeyDistance of `closest`: a warning, or an error
                 // when `closest` is a config key and the value is invalid for it
  kUnknown,      // unknown and far from every known name: a warning naming `closest`
};

// Edit distance at or below which an unknown name is taken for a misspelt one.
inline constexpr int kNearKeyDistance = 2;

struct EnvClass {
  EnvKind kind = EnvKind::kIgnored;
  std::string closest;  // kNearKey, kUnknown: the nearest known variable
  int distance = 0;     // kNearKey, kUnknown: its edit distance from the name
};

// Classifies one environment variable. `value` is looked at only to tell the
// service-link shapes apart (`<SERVICE>_PORT` holds "tcp://host:port").
EnvClass ClassifyEnv(std::string_view name, std::string_view value);

// True for the variables the kubelet sets for a Service with a cluster IP when
// the pod's enableServiceLinks is true (k8s pkg/kubelet/envvars), SVC being the
// Service's name upper-cased with '-' as '_':
//   SVC_SERVICE_HOST=10.96.0.10       SVC_SERVICE_PORT=8080   SVC_SERVICE_PORT_<PORTNAME>=8080
//   SVC_PORT=tcp://10.96.0.10:8080    SVC_PORT_8080_TCP=tcp://10.96.0.10:8080
//   SVC_PORT_8080_TCP_PROTO=tcp       SVC_PORT_8080_TCP_PORT=8080   SVC_PORT_8080_TCP_ADDR=10.96.0.10
// (protocols TCP, UDP, SCTP). Both the name and the value must have the shape.
bool IsServiceLinkVariable(std::string_view name, std::string_view value);

// The nearest known VRAMD_* name (a key's variable, VRAMD_CONFIG or a secret
// variable main reads) and its edit distance; the first in table order on a tie.
EnvClass ClosestKnownVariable(std::string_view name);

// Optimal-string-alignment distance: insertions, deletions, substitutions and
// transpositions of adjacent characters each cost 1.
int EditDistance(std::string_view a, std::string_view b);

}  // namespace vramd::config
