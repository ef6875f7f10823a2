// Fuzzes the extender's request decoding and the placement decisions behind
// filter and prioritize: ArgsDecoder::Decode, ComputeVramRequest, Filter and
// Prioritize over a small fixed snapshot, and the response writers; then the
// same body through the Extender's filter, prioritize and preempt verbs over
// an in-memory store. Properties:
//  - every response is valid JSON (when the request was valid JSON; the
//    on-demand decoder does not validate values it skips, and non-cache mode
//    returns Node objects verbatim);
//  - filter reports each distinct candidate exactly once (kept, failed or
//    unresolvable) and never a name that was not a candidate;
//  - prioritize scores only candidates, each from 0 to 10;
//  - a node is kept only if DecideNode says the pod fits there.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fakes/fake_ledger_store.h"
#include "fuzz_check.h"
#include "vramd/extender/extender.h"
#include "vramd/extender/wire.h"
#include "vramd/ledger/placement.h"
#include "vramd/ledger/pod_request.h"

namespace {

using nlohmann::json;
using namespace vramd;

constexpr int64_t kGi = int64_t{1} << 30;
constexpr int64_t kNow = 1'000'000;

ledger::Snapshot MakeSnapshot() {
  ledger::Snapshot s;
  s.epoch = 7;
  ledger::Node a;  // two 80Gi GPUs, 30Gi taken on GPU 0, warm for model "llama"
  a.name = "gpu-a";
  a.gpus = {{0, "GPU-aaaa", 80 * kGi, 0, 0}, {1, "GPU-bbbb", 80 * kGi, 50 * kGi, kNow - 1000}};
  ledger::Entry e;
  e.pod_uid = "uid-1";
  e.ns = "default";
  e.name = "p1";
  e.gpus = {0};
  e.per_gpu = 30 * kGi;
  e.model = "llama";
  e.state = ledger::EntryState::kBound;
  a.entries.push_back(e);
  a.models["llama"] = kNow - 5000;
  s.nodes[a.name] = a;
  ledger::Node b;  // one 24Gi GPU, phantom usage above allocation
  b.name = "gpu-b";
  b.gpus = {{0, "", 24 * kGi, 20 * kGi, kNow - 10}};
  s.nodes[b.name] = b;
  ledger::Node c;  // known, no GPUs
  c.name = "cpu-c";
  s.nodes[c.name] = c;
  ledger::Node d;  // over-committed: capacity shrank below allocation
  d.name = "gpu-d";
  d.gpus = {{0, "", 8 * kGi, 0, 0}};
  e.pod_uid = "uid-2";
  e.per_gpu = 16 * kGi;
  d.entries.push_back(e);
  s.nodes[d.name] = d;
  return s;
}

const ledger::Snapshot& Snap() {
  static const ledger::Snapshot s = MakeSnapshot();
  return s;
}

struct Verbs {
  testing::FakeLedgerStore store;
  metrics::Registry registry;
  struct FixedClock : Clock {
    int64_t NowMs() const override { return kNow; }
  } clock;
  extender::Extender ext{extender::Options{}, &store, nullptr, &clock, &registry};
  Verbs() {
    store.now_ms = kNow;
    store.AddNode("gpu-a", {80 * kGi, 80 * kGi});
    store.AddNode("gpu-b", {24 * kGi});
    store.AddNode("cpu-c", {});
  }
};

json ParseOrDie(const std::string& text, const char* what, bool must) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (must) FUZZ_CHECK_MSG(!j.is_discarded(), std::string(what) + " is not JSON: " + text.substr(0, 512));
  return j;
}

void CheckFilter(const extender::ExtenderArgs& args, const ledger::VramRequest& req, bool valid_input) {
  const std::set<std::string_view> candidates(args.node_names.begin(), args.node_names.end());
  ledger::Policy policy;
  for (ledger::ScorePolicy sp : {ledger::ScorePolicy::kHeadroom, ledger::ScorePolicy::kBinpack}) {
    policy.score = sp;
    ledger::FilterResult r = ledger::Filter(Snap(), args.node_names, req, policy, kNow);
    std::multiset<std::string_view> reported;
    for (std::string_view n : r.fits) {
      reported.insert(n);
      ledger::NodeDecision d = ledger::DecideNode(Snap().Find(n), n, req, policy, kNow);
      FUZZ_CHECK_MSG(d.verdict == ledger::Verdict::kFits, std::string(n) + ": " + d.reason);
      FUZZ_CHECK(static_cast<int>(d.choice.gpus.size()) == req.gpu_count);
    }
    for (const auto* m : {&r.failed, &r.unresolvable}) {
      for (const auto& [n, why] : *m) {
        reported.insert(n);
        FUZZ_CHECK(!why.empty());
      }
    }
    for (std::string_view n : reported) {
      FUZZ_CHECK_MSG(candidates.count(n) == 1, "not a candidate: " + std::string(n));
      FUZZ_CHECK_MSG(reported.count(n) == 1, "reported twice: " + std::string(n));
    }
    FUZZ_CHECK(reported.size() == candidates.size());

    std::string out;
    extender::WriteFilterResult(r, args, &out);
    json j = ParseOrDie(out, "filter result", valid_input);
    if (!j.is_discarded()) {
      if (args.cache_mode) {
        for (const json& n : j["NodeNames"]) FUZZ_CHECK(candidates.count(n.get<std::string>()) == 1);
      } else {
        // Kept Node objects are returned verbatim: each is one of the
        // request's. (Not compared by name: with a duplicate "metadata" key
        // vramd reads the first, nlohmann the last. kube-scheduler's Go
        // encoder never writes duplicate keys.)
        FUZZ_CHECK(j["Nodes"]["items"].size() <= r.fits.size());
        for (const json& n : j["Nodes"]["items"]) {
          bool found = false;
          for (std::string_view raw : args.node_objects) found = found || json::parse(raw, nullptr, false) == n;
          FUZZ_CHECK_MSG(found, n.dump());
        }
      }
      for (auto it = j["FailedNodes"].begin(); it != j["FailedNodes"].end(); ++it) {
        FUZZ_CHECK(candidates.count(it.key()) == 1);
      }
    }

    std::vector<ledger::HostScore> scores = ledger::Prioritize(Snap(), args.node_names, req, policy, kNow);
    FUZZ_CHECK(scores.size() == args.node_names.size());
    for (const ledger::HostScore& s : scores) {
      FUZZ_CHECK(candidates.count(s.host) == 1);
      FUZZ_CHECK_MSG(s.score >= 0 && s.score <= 10, std::to_string(s.score));
    }
    out.clear();
    extender::WriteHostPriorities(scores, &out);
    ParseOrDie(out, "host priorities", true);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static extender::ArgsDecoder decoder;
  static Verbs* verbs = new Verbs();
  std::string_view body(reinterpret_cast<const char*>(data), size);
  const bool valid_input = json::accept(body);

  extender::ExtenderArgs args;
  Status s = decoder.Decode(body, "vramd.io/vram", &args);
  if (!s.ok()) {
    FUZZ_CHECK(!s.message().empty());
    std::string out;
    extender::WriteFilterError(s.message(), &out);
    ParseOrDie(out, "filter error", true);
  } else {
    Result<ledger::VramRequest> req = ledger::ComputeVramRequest(args.pod);
    if (req.ok()) {
      FUZZ_CHECK(req->total >= 0 && req->per_gpu >= 0 && req->peak_per_gpu >= req->per_gpu);
      FUZZ_CHECK(req->gpu_count >= 1 && req->gpu_count <= ledger::kMaxGpuCount);
      FUZZ_CHECK(static_cast<__int128>(req->per_gpu) * req->gpu_count >= req->total);
      CheckFilter(args, *req, valid_input);
    }
  }

  // The verbs end to end (decoding again, with the thread's own decoder).
  for (int verb = 0; verb < 3; ++verb) {
    extender::Response r = verb == 0   ? verbs->ext.Filter(body)
                           : verb == 1 ? verbs->ext.Prioritize(body)
                                       : verbs->ext.Preempt(body);
    FUZZ_CHECK_MSG(r.status == 200 || r.status == 400, std::to_string(r.status));
    if (!s.ok()) FUZZ_CHECK(r.status == 400);
    ParseOrDie(r.body, "verb response", valid_input || r.status == 400);
  }
  return 0;
}
