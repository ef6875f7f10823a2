// How much VRAM a pod asks for, counted exactly as kube-scheduler counts an
// extended resource (EXTENDER-PROTOCOL.md, "Counting a pod's request").
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vramd/ledger/model.h"
#include "vramd/status.h"

namespace vramd::ledger {

// Pod annotation that makes a pod a designated victim where no priority
// class says so (DESIGN.md §7); the value "true" (any case) does.
inline constexpr const char* kDisposableAnnotation = "vramd.io/disposable";
// Pod annotation giving the pod's idle TTL (ParseIdleTtl), read by idle eviction.
inline constexpr const char* kIdleTtlAnnotation = "vramd.io/idle-ttl";
// Pod annotation by which a pod without a controller opts in to vramd's own
// evictions (reclaim, idle eviction; EvictionExemption): "true" (any case).
inline constexpr const char* kEvictableAnnotation = "vramd.io/evictable";
// Longest owner kind / uid and gang key an entry records; longer ones are
// not recorded (the pod then counts as bare, or in no gang).
inline constexpr size_t kMaxOwnerField = 253;
inline constexpr size_t kMaxGangKey = 300;
// Priority classes whose pods are designated victims unless configured
// otherwise (DESIGN.md §7).
inline constexpr std::string_view kDefaultVictimClasses[] = {"vramd-disposable"};
// A priority class name is a DNS subdomain: at most 253 bytes. The pod
// decoders reject a longer spec.priorityClassName.
inline constexpr size_t kMaxPriorityClassName = 253;

// The resource amounts of one container for the configured resource name,
// as quantity strings exactly as found in the pod spec.
struct ContainerAmount {
  std::optional<std::string> request;
  std::optional<std::string> limit;
  bool sidecar = false;  // init container with restartPolicy: Always (1.28+)
  bool operator==(const ContainerAmount&) const = default;
};

// The parts of a pod that decide its VRAM request. Decoders (extender wire,
// Kubernetes watch) fill this; the functions below are pure.
struct PodSpecView {
  std::string uid;
  std::string ns;
  std::string name;
  std::vector<ContainerAmount> containers;
  std::vector<ContainerAmount> init_containers;
  std::optional<std::string> overhead;       // spec.overhead[resource]
  std::optional<std::string> gpu_count;      // annotation vramd.io/gpu-count
  std::optional<std::string> vram_peak;      // annotation vramd.io/vram-peak
  std::string model;                         // annotation vramd.io/model
  std::optional<std::string> disposable;     // annotation vramd.io/disposable
  std::optional<std::string> idle_ttl;       // annotation vramd.io/idle-ttl
  int32_t priority = 0;                      // spec.priority (0 when absent)
  std::string priority_class;                // spec.priorityClassName (<= kMaxPriorityClassName)
  // Read by the Kubernetes decoder only (bind and reconcile create entries
  // from it; the extender's requests leave them empty):
  std::string owner_kind, owner_uid;         // the controller ownerReference
  std::optional<std::string> evictable;      // annotation vramd.io/evictable
  std::string gang;                          // GangKey of its labels and annotations
  bool operator==(const PodSpecView&) const = default;
};

// The gang a pod belongs to: pods that are evicted together or not at all
// (issue 32). The first of these the pod carries, as "<kind>/<name>":
//   label scheduling.x-k8s.io/pod-group (coscheduling)        pod-group/<value>
//   label pod-group.scheduling.sigs.k8s.io (older coscheduling) pod-group/<value>
//   annotation scheduling.k8s.io/group-name (Volcano)          pod-group/<value>
//   labels leaderworkerset.sigs.k8s.io/name and /group-index   lws/<name>/<index>
//   label jobset.sigs.k8s.io/jobset-name                       jobset/<value>
//   label batch.kubernetes.io/job-name, else job-name          job/<value>
// "" when none, or when the key would be longer than kMaxGangKey. Gangs are
// per namespace (the entry's ns). Pure.
std::string GangKey(const std::map<std::string, std::string>& labels,
                    const std::map<std::string, std::string>& annotations);
// The labels and annotations GangKey reads (a decoder keeps only these).
inline constexpr std::string_view kGangLabels[] = {
    "scheduling.x-k8s.io/pod-group",   "pod-group.scheduling.sigs.k8s.io",
    "leaderworkerset.sigs.k8s.io/name", "leaderworkerset.sigs.k8s.io/group-index",
    "jobset.sigs.k8s.io/jobset-name",  "batch.kubernetes.io/job-name",
    "job-name"};
inline constexpr std::string_view kGangAnnotation = "scheduling.k8s.io/group-name";

// A pod's demand: what it asks of one node, and the facts about the pod that
// its ledger entry records (RecordDemand).
struct VramRequest {
  int64_t total = 0;         // R: bytes for the whole pod
  int gpu_count = 1;         // GPUs of one node it spreads over
  int64_t per_gpu = 0;       // ceil(total / gpu_count)
  int64_t peak_per_gpu = 0;  // ceil(peak / gpu_count), >= per_gpu
  std::string model;
  std::string ns;              // the pod's namespace
  std::string uid;             // the pod's metadata.uid (its own hold is not counted against it)
  int32_t priority = 0;        // spec.priority
  std::string priority_class;  // spec.priorityClassName, may be empty
  bool victim = false;         // IsDesignatedVictim with the default classes
  int64_t idle_ttl_ms = 0;     // vramd.io/idle-ttl (0: none)
  std::string owner_kind, owner_uid;  // PodSpecView's (empty from the extender's requests)
  bool evictable = false;      // vramd.io/evictable "true" (any case)
  std::string gang;            // PodSpecView::gang
  bool wants_vram() const { return total > 0; }
};
using Demand = VramRequest;

// Longest vramd.io/idle-ttl accepted: 30 days.
inline constexpr int64_t kMaxIdleTtlMs = 30LL * 24 * 3600 * 1000;

// Parses a vramd.io/idle-ttl value: a Go-style duration, one or more
// <number><unit> parts with the units h, m, s and ms ("90s", "10m", "1h30m",
// "1.5h", "500ms"); a number may have a decimal fraction. The result is in
// whole milliseconds (a fraction of a millisecond is dropped) and must be
// > 0 and <= kMaxIdleTtlMs. A sign, whitespace, another unit (ns, us, d),
// a missing unit or number, zero and anything longer than 30 days are errors
// whose message says why (without the annotation's name). Pure.
Result<int64_t> ParseIdleTtl(std::string_view text);

// Largest gpu-count accepted; more is an error, not a silent clamp.
inline constexpr int kMaxGpuCount = 64;

// R = max(sum of app containers and sidecars, each init container counted with
// the sidecars declared before it) + overhead. For each container, the request
// defaults to the limit when absent. Quantity errors name the container.
// The demand also carries the pod's namespace, priority, priority class,
// model, idle TTL and whether it is a designated victim (kDefaultVictimClasses).
// A malformed idle TTL is an error: annotation vramd.io/idle-ttl="<value>": <why>.
Result<VramRequest> ComputeVramRequest(const PodSpecView& pod);
// The same with designated victims decided by `victim_classes` (config
// burst.victim_classes) instead of kDefaultVictimClasses: every path that
// computes a demand for placement or the ledger (extender filter,
// prioritize, bind, preempt; reconcile's re-add; explain) uses this one.
Result<VramRequest> ComputeVramRequest(const PodSpecView& pod, const std::vector<std::string>& victim_classes);

// Whether the pod is a designated victim: its priority class is one of
// `victim_classes`, or it carries kDisposableAnnotation with the value "true"
// (ASCII case ignored; any other value, or none, says nothing).
bool IsDesignatedVictim(const PodSpecView& pod,
                        std::span<const std::string_view> victim_classes = kDefaultVictimClasses);
bool IsDesignatedVictim(const PodSpecView& pod, const std::vector<std::string>& victim_classes);

// Writes into `e` what the demand says about the pod: model, peak_per_gpu,
// priority, priority_class, victim, idle_ttl_ms, owner_kind, owner_uid,
// evictable and gang (and ns when `e` has none). Every path
// that creates an entry for a pod (bind, reconcile's re-add) goes through it,
// so an entry records what its demand said. Leaves uid, name, GPUs, amount,
// state and times to the caller.
void RecordDemand(const VramRequest& d, Entry* e);

// The part of RecordDemand that vramd's evictions decide on (issue 32):
// priority, priority class, victim flag, idle TTL, owner, evictable and gang.
// Reconcile refreshes an entry's copy of them from the pod (an entry written
// before vramd recorded them reads priority 0, no class, no owner).
void RecordEvictionFacts(const VramRequest& d, Entry* e);
// Whether RecordEvictionFacts(d, e) would change `e` (no copy made).
bool EvictionFactsDiffer(const VramRequest& d, const Entry& e);

}  // namespace vramd::ledger
