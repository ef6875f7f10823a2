#include "store/ledger_decode.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "vramd/ledger/enforcement.h"

namespace vramd::store {
namespace {

using ledger::Entry;

// Hash replies alternate field, value.
bool IsHash(const Reply& r) {
  return r.type == Reply::Type::kArray && r.elements.size() % 2 == 0;
}

ledger::Gpu* FindGpu(ledger::Node* node, int index) {
  auto it = std::lower_bound(node->gpus.begin(), node->gpus.end(), index,
                             [](const ledger::Gpu& g, int i) { return g.index < i; });
  return it != node->gpus.end() && it->index == index ? &*it : nullptr;
}


}  // namespace

namespace {

// The reason text of "!u=" travels percent-encoded: ',', '=' and '%' (and
// anything outside printable ASCII, which CheckUsageReport refuses anyway).
std::string EscapeReason(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c == ',' || c == '=' || c == '%' || c < 0x20 || c >= 0x7f) {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

bool UnescapeReason(std::string_view s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out->push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return false;  // '%' needs two hex digits after it
    int v = 0;
    for (size_t k = i + 1; k <= i + 2; ++k) {
      const char c = s[k];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      v = v * 16 + d;
    }
    out->push_back(static_cast<char>(v));
    i += 2;
  }
  return true;
}

}  // namespace

std::string PackGpuUsage(const ledger::GpuUsage& g) {
  std::string out;
  out.reserve(48 + g.uuid.size() + g.pods.size() * 50);
  out.append(std::to_string(g.total)).append(",").append(std::to_string(g.outside_pods)).append(",").append(g.uuid);
  for (const ledger::PodUsage& p : g.pods) {
    out.append(",").append(p.uid).append("=").append(std::to_string(p.used));
    if (p.active) out.append(";a");
  }
  if (g.invalid_process_lists > 0) out.append(",!n=").append(std::to_string(g.invalid_process_lists));
  if (!g.processes_unavailable.empty()) out.append(",!u=").append(EscapeReason(g.processes_unavailable));
  return out;
}

bool UnpackGpuUsage(std::string_view text, ledger::GpuUsage* g) {
  g->pods.clear();
  g->processes_unavailable.clear();
  g->invalid_process_lists = 0;
  for (int part = 0;; ++part) {
    const size_t comma = text.find(',');
    const std::string_view p = text.substr(0, comma);
    if (part == 0 || part == 1) {
      int64_t* out = part == 0 ? &g->total : &g->outside_pods;
      if (!ParseInt64(p, out) || *out < 0) return false;
    } else if (part == 2) {
      if (p.find('=') != std::string_view::npos) return false;
      g->uuid = std::string(p);
    } else if (p.starts_with("!n=")) {
      if (!ParseInt64(p.substr(3), &g->invalid_process_lists) || g->invalid_process_lists < 0) return false;
    } else if (p.starts_with("!u=")) {
      if (!UnescapeReason(p.substr(3), &g->processes_unavailable)) return false;
    } else if (p.starts_with('!')) {
      return false;  // a kind this vramd does not know
    } else {
      const size_t eq = p.find('=');
      if (eq == 0 || eq == std::string_view::npos) return false;
      ledger::PodUsage u{std::string(p.substr(0, eq)), 0};
      std::string_view figure = p.substr(eq + 1);
      if (figure.ends_with(";a")) {
        u.active = true;
        figure.remove_suffix(2);
      }
      if (!ParseInt64(figure, &u.used) || u.used < 0) return false;
      g->pods.push_back(std::move(u));
    }
    if (comma == std::string_view::npos) return part >= 2;
    text.remove_prefix(comma + 1);
  }
}

std::string PackEnforcement(const ledger::GpuEnforcement& e) {
  std::string out = e.backend + "," + EscapeReason(e.reason);
  for (const ledger::PodEnforcement& p : e.pods) {
    out.append(",").append(p.uid).append("=").append(ledger::EnforceStateName(p.state));
    if (!p.reason.empty()) out.append(":").append(EscapeReason(p.reason));
  }
  return out;
}

bool UnpackEnforcement(std::string_view text, ledger::GpuEnforcement* e) {
  e->pods.clear();
  for (int part = 0;; ++part) {
    const size_t comma = text.find(',');
    const std::string_view p = text.substr(0, comma);
    if (part == 0) {
      if (p != "dmem" && p != "nvml" && p != "none") return false;
      e->backend = std::string(p);
    } else if (part == 1) {
      if (!UnescapeReason(p, &e->reason)) return false;
    } else {
      const size_t eq = p.find('=');
      if (eq == 0 || eq == std::string_view::npos) return false;
      ledger::PodEnforcement pe;
      pe.uid = std::string(p.substr(0, eq));
      std::string_view rest = p.substr(eq + 1);
      const size_t colon = rest.find(':');
      if (!ledger::ParseEnforceState(rest.substr(0, colon), &pe.state)) return false;
      if (colon != std::string_view::npos && !UnescapeReason(rest.substr(colon + 1), &pe.reason)) return false;
      e->pods.push_back(std::move(pe));
    }
    if (comma == std::string_view::npos) return part >= 1;
    text.remove_prefix(comma + 1);
  }
}

bool DecodeReportedGpus(std::string_view text, std::vector<ReportedGpu>* out) {
  out->clear();
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t eq1 = item.find('=');
    const size_t eq2 = eq1 == std::string_view::npos ? eq1 : item.find('=', eq1 + 1);
    if (eq2 == std::string_view::npos) return false;
    ReportedGpu g;
    if (!ParseIndex(item.substr(0, eq1), &g.index) || !ParseInt64(item.substr(eq1 + 1, eq2 - eq1 - 1), &g.total) ||
        g.total < 0) {
      return false;
    }
    g.uuid = std::string(item.substr(eq2 + 1));
    out->push_back(std::move(g));
  }
  return !out->empty();
}

bool ParseInt64(std::string_view s, int64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool ParseIndex(std::string_view s, int* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && *out >= 0;
}

bool ParseScore(std::string_view s, uint64_t* out) {
  double d = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (ec != std::errc() || p != s.data() + s.size()) return false;
  if (!(d >= 0 && d < 9007199254740992.0) || d != static_cast<double>(static_cast<uint64_t>(d))) {
    return false;
  }
  *out = static_cast<uint64_t>(d);
  return true;
}

Result<uint64_t> ParseEpoch(const Reply& r, const std::string& key) {
  if (r.is_nil()) return uint64_t{0};
  int64_t v = 0;
  if (r.type == Reply::Type::kString && ParseInt64(r.str, &v) && v >= 0) {
    return static_cast<uint64_t>(v);
  }
  return Internal("valkey key " + key + " is not a counter" + (r.is_error() ? ": " + r.str : std::string()));
}

namespace {

// BuildNode's parts, in the order it runs them.
void BuildGpus(ledger::Node* node, Reply& cap, Problems* problems) {
  const std::string& name = node->name;
  if (!IsHash(cap)) {
    problems->Add("node " + name + ": capacity key is not a hash");
  } else {
    node->gpus.reserve(cap.elements.size() / 2);
    std::vector<std::pair<int, std::string*>> uuids;
    for (size_t i = 0; i < cap.elements.size(); i += 2) {
      const std::string& f = cap.elements[i].str;
      std::string& v = cap.elements[i + 1].str;
      ledger::Gpu g;
      if (f.starts_with("uuid:")) {
        int idx = 0;
        if (ParseIndex(std::string_view(f).substr(5), &idx)) {
          uuids.emplace_back(idx, &v);
        } else {
          problems->Add("node " + name + ": capacity field '" + f + "' is not uuid:<index>");
        }
        continue;
      }
      if (!ParseIndex(f, &g.index)) {
        problems->Add("node " + name + ": capacity field '" + f + "' is not a GPU index");
        continue;
      }
      if (!ParseInt64(v, &g.capacity) || g.capacity < 0) {
        problems->Add("node " + name + ": capacity of GPU " + f + " is not a byte count: '" +
                      v + "'");
        continue;
      }
      node->gpus.push_back(std::move(g));
    }
    std::sort(node->gpus.begin(), node->gpus.end(),
              [](const ledger::Gpu& a, const ledger::Gpu& b) { return a.index < b.index; });
    for (auto& [idx, uuid] : uuids) {
      if (ledger::Gpu* g = FindGpu(node, idx)) g->uuid = std::move(*uuid);
    }
  }
}

// The usage hash onto node->gpus (from BuildGpus); whether it is a
// version-2 report (per-pod figures complete) and, in *ts, its time.
bool ApplyUsage(ledger::Node* node, const Reply& used, Problems* problems, int64_t* ts) {
  const std::string& name = node->name;
  bool per_pod = false;  // a version-2 report: per-pod figures are complete
  int64_t& report_ts = *ts;
  report_ts = 0;
  if (!IsHash(used)) {
    problems->Add("node " + name + ": usage key is not a hash");
  } else if (!used.elements.empty()) {
    for (size_t i = 0; i < used.elements.size(); i += 2) {
      if (used.elements[i].str == "ts" && !ParseInt64(used.elements[i + 1].str, &report_ts)) {
        problems->Add("node " + name + ": usage time is not a number");
      }
      if (used.elements[i].str == "v") per_pod = used.elements[i + 1].str == "2" || used.elements[i + 1].str == "3";
    }
    bool any_pods = false;
    for (size_t i = 0; i < used.elements.size(); i += 2) {
      std::string_view f = used.elements[i].str;
      const std::string& v = used.elements[i + 1].str;
      if (f == "ts" || f == "v") continue;
      std::string_view kind;  // "" (used), "g" (the rest, packed), or before it "total", "outside", "uuid", "pod"
      if (const size_t colon = f.find(':'); colon != std::string_view::npos) {
        kind = f.substr(0, colon);
        f.remove_prefix(colon + 1);
      }
      std::string_view uid;
      if (kind == "pod") {
        const size_t colon = f.find(':');
        if (colon == std::string_view::npos) f = {};  // malformed below
        else {
          uid = f.substr(colon + 1);
          f = f.substr(0, colon);
        }
      }
      int idx = 0;
      int64_t bytes = 0;
      const bool known_kind = kind.empty() || kind == "g" || kind == "e" || kind == "total" || kind == "outside" ||
                              kind == "uuid" || (kind == "pod" && !uid.empty());
      if (!known_kind || !ParseIndex(f, &idx) ||
          (kind != "uuid" && kind != "g" && kind != "e" && (!ParseInt64(v, &bytes) || bytes < 0))) {
        problems->Add("node " + name + ": usage field '" + used.elements[i].str + "' is malformed");
        continue;
      }
      if (kind == "e") {
        // Issue 34: the agent's enforcement of the pods' limits on this GPU.
        ledger::GpuEnforcement e;
        if (!UnpackEnforcement(v, &e)) {
          problems->Add("node " + name + ": usage field '" + used.elements[i].str + "' is malformed");
          continue;
        }
        if (ledger::Gpu* g = FindGpu(node, idx)) {
          std::sort(e.pods.begin(), e.pods.end(), [](const auto& a, const auto& b) { return a.uid < b.uid; });
          g->enforcement = std::move(e);
        }
        continue;
      }
      if (kind == "g") {
        // The fields a version-2 report is written as today; the per-field
        // kinds below are what vramd wrote before (still read, so that a
        // ledger written by an older replica loads whole).
        ledger::GpuUsage packed;
        if (!UnpackGpuUsage(v, &packed)) {
          problems->Add("node " + name + ": usage field '" + used.elements[i].str + "' is malformed");
          // Its pods' figures are lost: the report's per-pod figures are
          // not complete, so entries keep "unknown" rather than 0.
          per_pod = false;
          continue;
        }
        ledger::Gpu* g = FindGpu(node, idx);
        if (g == nullptr) continue;
        g->total = packed.total;
        g->outside_pods = packed.outside_pods;
        g->processes_unavailable = std::move(packed.processes_unavailable);
        g->invalid_process_lists = packed.invalid_process_lists;
        if (g->uuid.empty()) g->uuid = std::move(packed.uuid);
        for (ledger::PodUsage& p : packed.pods) g->pods.push_back(std::move(p));
        any_pods = any_pods || !packed.pods.empty();
        continue;
      }
      ledger::Gpu* g = FindGpu(node, idx);
      if (g == nullptr) continue;
      if (kind.empty()) {
        g->used = bytes;
        g->used_ts_ms = report_ts;
      } else if (kind == "total") {
        g->total = bytes;
      } else if (kind == "outside") {
        g->outside_pods = bytes;
      } else if (kind == "uuid") {
        if (g->uuid.empty()) g->uuid = v;
      } else {
        g->pods.push_back({std::string(uid), bytes});
        any_pods = true;
      }
    }
    if (any_pods) {
      for (ledger::Gpu& g : node->gpus) {
        std::sort(g.pods.begin(), g.pods.end(), [](const auto& a, const auto& b) { return a.uid < b.uid; });
      }
    }
  }
  return per_pod;
}

void BuildEntries(ledger::Node* node, Reply& alloc, EntryDecoder* decoder, Problems* problems) {
  const std::string& name = node->name;
  if (!IsHash(alloc)) {
    problems->Add("node " + name + ": allocation key is not a hash");
  } else {
    node->entries.reserve(alloc.elements.size() / 2);
    std::string why;
    for (size_t i = 0; i < alloc.elements.size(); i += 2) {
      Entry e;
      if (!decoder->Decode(alloc.elements[i + 1].str, &e, &why)) {
        problems->Add("node " + name + ": entry of pod " + alloc.elements[i].str + " skipped: " +
                      why);
        continue;
      }
      e.pod_uid = std::move(alloc.elements[i].str);
      node->entries.push_back(std::move(e));
    }
    SortEntriesOldestFirst(node);  // so that snapshots are deterministic
  }
}

void BuildModels(ledger::Node* node, const Reply& models, Problems* problems) {
  const std::string& name = node->name;
  if (!IsHash(models)) {
    problems->Add("node " + name + ": models key is not a hash");
  } else {
    for (size_t i = 0; i < models.elements.size(); i += 2) {
      int64_t ms = 0;
      if (!ParseInt64(models.elements[i + 1].str, &ms)) {
        problems->Add("node " + name + ": time of model '" + models.elements[i].str +
                      "' is not a number");
        continue;
      }
      node->models.emplace(models.elements[i].str, ms);
    }
  }
}

}  // namespace

void BuildNode(ledger::Node* node, Reply& cap, Reply& alloc, const Reply& used, const Reply& models,
               EntryDecoder* decoder, Problems* problems) {
  BuildGpus(node, cap, problems);
  int64_t report_ts = 0;
  const bool per_pod = ApplyUsage(node, used, problems, &report_ts);
  BuildEntries(node, alloc, decoder, problems);
  if (per_pod) FillPodUsage(node, report_ts);
  BuildModels(node, models, problems);
}

bool RebuildUsage(ledger::Node* node, const ledger::Node& base, Reply& cap, const Reply& used, Problems* problems) {
  node->gpus.clear();
  BuildGpus(node, cap, problems);
  int64_t report_ts = 0;
  if (!ApplyUsage(node, used, problems, &report_ts)) return false;
  node->entries = base.entries;
  node->models = base.models;
  FillPodUsage(node, report_ts);
  return true;
}

void FillPodUsage(ledger::Node* node, int64_t ts) {
  const auto figure = [](const ledger::Gpu& g, std::string_view uid) -> const ledger::PodUsage* {
    auto it = std::lower_bound(g.pods.begin(), g.pods.end(), uid,
                               [](const ledger::PodUsage& p, std::string_view u) { return p.uid < u; });
    return it != g.pods.end() && it->uid == uid ? &*it : nullptr;
  };
  std::vector<std::string_view> uids;
  uids.reserve(node->entries.size());
  for (Entry& e : node->entries) {
    uids.push_back(e.pod_uid);
    // On a GPU the agent has no per-process figures for, the pod's usage is
    // unknown, not 0 (an idle or a watchdog decision must not read it as 0).
    const bool known = std::none_of(e.gpus.begin(), e.gpus.end(), [&](int idx) {
      const ledger::Gpu* g = FindGpu(node, idx);
      return g != nullptr && !g->processes_unavailable.empty();
    });
    if (!known) continue;
    e.used = 0;
    e.used_ts_ms = ts;
    e.busy = false;
    for (int idx : e.gpus) {
      const ledger::Gpu* g = FindGpu(node, idx);
      const ledger::PodUsage* p = g != nullptr ? figure(*g, e.pod_uid) : nullptr;
      if (p != nullptr) {
        e.used = std::max(e.used, p->used);
        e.busy = e.busy || p->active;
      }
    }
  }
  std::sort(uids.begin(), uids.end());
  for (ledger::Gpu& g : node->gpus) {
    g.untracked = 0;
    for (const ledger::PodUsage& p : g.pods) {
      if (!std::binary_search(uids.begin(), uids.end(), std::string_view(p.uid))) g.untracked += p.used;
    }
  }
}

void SortEntriesOldestFirst(ledger::Node* node) {
  const auto older = [](const Entry& a, const Entry& b) {
    return a.created_ms != b.created_ms ? a.created_ms < b.created_ms : a.pod_uid < b.pod_uid;
  };
  // Fields mostly come back in insertion order, already sorted.
  if (!std::is_sorted(node->entries.begin(), node->entries.end(), older)) {
    std::sort(node->entries.begin(), node->entries.end(), older);
  }
}

}  // namespace vramd::store
