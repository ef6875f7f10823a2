// Fuzzes the decoding of Kubernetes objects as the API server (or a watch
// stream) sends them: kube::DecodePod, then the pod's VRAM request as bind and
// reconcile compute it; kube::DecodeNode, then the node's GPU capacities from
// its annotation and GPU Feature Discovery labels. Properties: decoders return
// an error instead of throwing; a decoded pod has a name; a request, when
// valid, is consistent; capacities are non-negative.
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "vramd/kube/decode.h"
#include "vramd/ledger/capacity.h"
#include "vramd/ledger/pod_request.h"

using namespace vramd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<kube::PodInfo> pod = kube::DecodePod(text, "vramd.io/vram");
  if (pod.ok()) {
    FUZZ_CHECK(!pod->name.empty());
    Result<ledger::VramRequest> req = ledger::ComputeVramRequest(pod->spec);
    if (req.ok()) {
      FUZZ_CHECK(req->total >= 0 && req->per_gpu >= 0 && req->peak_per_gpu >= req->per_gpu);
      FUZZ_CHECK(static_cast<__int128>(req->per_gpu) * req->gpu_count >= req->total);
    }
  } else {
    FUZZ_CHECK(!pod.status().message().empty());
  }
  Result<kube::NodeInfo> node = kube::DecodeNode(text);
  if (node.ok()) {
    FUZZ_CHECK(!node->name.empty());
    Result<ledger::PhysicalGpus> gpus = ledger::GpusFromNodeMetadata(node->labels, node->annotations);
    if (gpus.ok()) {
      for (int64_t b : gpus->bytes) FUZZ_CHECK(b >= 0);
    }
  }
  return 0;
}
