// Fuzzes the decoding of Kubernetes objects as the API server (or a watch
// stream) sends them: kube::DecodePod, then the pod's VRAM request as bind and
// reconcile compute it, its placement annotations (reconcile::GpusFromAnnotations)
// and a reconcile plan with the pod bound to a one-GPU node; kube::DecodeNode,
// then the node's GPU capacities from its annotation and GPU Feature Discovery
// labels. Properties: decoders and the plan return errors or reports instead
// of throwing (an exception aborts the target); a decoded pod has a name; a
// request, when valid, is consistent; accepted placement annotations name
// 1..64 distinct GPUs 0..4096 with 1..2^50 bytes each; the plan re-adds at
// most the pod, never with more than 2^50 bytes per GPU and always with an
// entry the store accepts (store::EntryFieldProblem), and reports the pod
// as malformed exactly when its request or its annotations are invalid;
// capacities are 0..2^50 per GPU. The pod watch's fast decoder
// (kube::FastPodDecoder) decodes a pod only when the reference decodes it
// too, to the same PodInfo, and the same holds for the text as a watch event.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "kube/pod_simdjson.h"
#include "kube/watch_stream.h"
#include "store/entry_codec.h"
#include "vramd/kube/decode.h"
#include "vramd/ledger/capacity.h"
#include "vramd/ledger/pod_request.h"
#include "vramd/reconcile/plan.h"

using namespace vramd;

// The reference watch path logs every object it skips: not per input here.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<kube::PodInfo> pod = kube::DecodePod(text, "vramd.io/vram");
  static kube::FastPodDecoder fast;
  if (kube::PodInfo quick; fast.DecodePod(text, "vramd.io/vram", &quick)) {
    FUZZ_CHECK(pod.ok() && quick == *pod);
  }
  {
    const std::string line = R"({"type":"MODIFIED","object":)" + std::string(text) + "}";
    std::vector<kube::PodInfo> a, b;
    Status sa = kube::HandlePodWatchLine(line, "vramd.io/vram",
                                         [&](const kube::WatchEvent<kube::PodInfo>& e) { a.push_back(e.object); });
    Status sb = kube::HandlePodWatchLineReference(
        line, "vramd.io/vram", [&](const kube::WatchEvent<kube::PodInfo>& e) { b.push_back(e.object); });
    FUZZ_CHECK(sa.code() == sb.code() && a == b);
  }
  if (pod.ok()) {
    FUZZ_CHECK(!pod->name.empty());
    Result<ledger::VramRequest> req = ledger::ComputeVramRequest(pod->spec);
    if (req.ok()) {
      FUZZ_CHECK(req->total >= 0 && req->per_gpu >= 0 && req->peak_per_gpu >= req->per_gpu);
      FUZZ_CHECK(static_cast<__int128>(req->per_gpu) * req->gpu_count >= req->total);
    }
    Result<std::optional<reconcile::AnnotatedGpus>> ann = reconcile::GpusFromAnnotations(pod->annotations);
    if (ann.ok() && ann->has_value()) {
      const reconcile::AnnotatedGpus& a = **ann;
      FUZZ_CHECK(!a.gpus.empty() && static_cast<int>(a.gpus.size()) <= reconcile::kMaxAnnotatedGpus);
      for (size_t i = 0; i < a.gpus.size(); ++i) {
        FUZZ_CHECK(a.gpus[i] >= 0 && a.gpus[i] <= reconcile::kMaxGpuIndex);
        FUZZ_CHECK(i == 0 || a.gpus[i - 1] < a.gpus[i]);
      }
      FUZZ_CHECK(a.per_gpu > 0 && a.per_gpu <= ledger::kMaxBytesPerGpu);
    } else if (!ann.ok()) {
      FUZZ_CHECK(!ann.status().message().empty());
    }
    // The pod bound to a node with one 80Gi GPU, in any phase it says.
    kube::PodInfo bound = *pod;
    bound.node_name = "n1";
    ledger::Snapshot snap;
    snap.nodes["n1"].name = "n1";
    snap.nodes["n1"].gpus = {ledger::Gpu{0, "", int64_t{80} << 30}};
    reconcile::PlanResult plan = reconcile::Plan(snap, {bound}, {}, reconcile::PlanOptions{1'000'000, 60'000});
    FUZZ_CHECK(plan.actions.size() <= 1 && plan.malformed.size() <= 1);
    for (const reconcile::Action& a : plan.actions) {
      FUZZ_CHECK(a.kind == reconcile::ActionKind::kReadd && a.entry.pod_uid == bound.uid);
      FUZZ_CHECK(a.entry.per_gpu > 0 && a.entry.per_gpu <= ledger::kMaxBytesPerGpu);
      FUZZ_CHECK(a.entry.gpus == std::vector<int>{0});
      FUZZ_CHECK(store::EntryFieldProblem(a.entry).empty());
    }
    const bool terminal = bound.phase == "Succeeded" || bound.phase == "Failed";
    const bool bad_request =
        !req.ok() || std::max(req->per_gpu, req->peak_per_gpu) > ledger::kMaxBytesPerGpu;
    const bool wants = !bad_request && req->wants_vram();
    // Well-formed placement annotations that claim other bytes or another GPU
    // count than the request are reported too (issue 30), and never accounted.
    const bool foreign = wants && ann.ok() && ann->has_value() &&
                         ((*ann)->per_gpu != req->per_gpu || static_cast<int>((*ann)->gpus.size()) != req->gpu_count);
    FUZZ_CHECK(plan.malformed.size() ==
               (!terminal && (bad_request || (wants && (!ann.ok() || foreign))) ? 1u : 0u));
    for (const reconcile::Action& a : plan.actions) FUZZ_CHECK(a.entry.per_gpu == req->per_gpu);
    for (const reconcile::MalformedPod& m : plan.malformed) FUZZ_CHECK(!m.reason.empty() && m.uid == bound.uid);
  } else {
    FUZZ_CHECK(!pod.status().message().empty());
  }
  Result<kube::NodeInfo> node = kube::DecodeNode(text);
  if (node.ok()) {
    FUZZ_CHECK(!node->name.empty());
    Result<ledger::PhysicalGpus> gpus = ledger::GpusFromNodeMetadata(node->labels, node->annotations);
    if (gpus.ok()) {
      for (int64_t b : gpus->bytes) FUZZ_CHECK(b >= 0 && b <= ledger::kMaxBytesPerGpu);
    }
  }
  return 0;
}
