// KubeClient: the few Kubernetes API calls vramd makes. The real client talks
// REST over HTTPS (cpp-httplib + OpenSSL); tests use fakes or a real apiserver.
// Thread-safe: methods may be called concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vramd/ledger/pod_request.h"
#include "vramd/ledger/queues.h"
#include "vramd/kube/token_review.h"
#include "vramd/status.h"

namespace vramd::kube {

// What vramd needs of a Node object.
struct NodeInfo {
  std::string name;
  std::string uid;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::string resource_version;
};

// What vramd needs of a Pod object.
struct PodInfo {
  std::string name;
  std::string ns;
  std::string uid;
  std::string node_name;                 // spec.nodeName, empty when unassigned
  std::string phase;                     // status.phase
  std::string scheduler_name;
  bool deleting = false;                 // metadata.deletionTimestamp is set
  int64_t deletion_ms = 0;               // metadata.deletionTimestamp: when the kubelet kills it at the
                                         // latest (deletion + grace period); 0 when absent or unreadable
  std::map<std::string, std::string> annotations;
  ledger::PodSpecView spec;              // resource amounts for the configured resource
  std::string resource_version;
  bool operator==(const PodInfo&) const = default;
};

struct Options {
  // https://host[:port][/path-prefix]; empty = in-cluster. `http://` is accepted
  // for tests against a local fake API server only; production uses https.
  std::string api_url;
  std::string token_file;       // bearer token file (re-read when it changes);
                                // empty with an explicit api_url = no auth header
  std::string ca_file;          // CA bundle to verify the API server; empty with
                                // an explicit https api_url = the system trust store
  std::string resource_name = "vramd.io/vram";
  int timeout_ms = 4000;        // per request (must stay below the scheduler's 5 s)
  // In-cluster defaults (used when api_url is empty): KUBERNETES_SERVICE_HOST/PORT,
  // /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt} (token_file and
  // ca_file, when set, override the paths).

  // Added by the REST client (defaults suit production):
  int max_connections = 8;      // pooled keep-alive connections for non-watch calls;
                                // a call waits at most timeout_ms for a free one
  int watch_timeout_s = 300;    // server-side timeoutSeconds of one watch request;
                                // the stream read timeout is this + 30 s
  int list_page_size = 500;     // `limit` of each page of a list
  int token_check_ms = 1000;    // how often the token file is checked for a rotated token
                                // (0: before every call)
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark };

template <typename T>
struct WatchEvent {
  WatchEventType type;
  T object;
};

template <typename T>
struct List {
  std::vector<T> items;
  std::string resource_version;
};

// What became of a request to evict a pod (KubeClient::EvictPod).
enum class EvictOutcome {
  kEvicted,  // the API server accepted it: the pod is being deleted gracefully
  kBlocked,  // 429: refused, normally by a PodDisruptionBudget; try again later
  kGone,     // the pod no longer exists, or the name now belongs to another pod (UID differs)
};

class KubeClient {
 public:
  virtual ~KubeClient() = default;

  virtual Result<PodInfo> GetPod(const std::string& ns, const std::string& name) = 0;

  // Merge-patches metadata.annotations of a pod (null value = remove). An empty
  // map sends nothing and returns OK.
  virtual Status PatchPodAnnotations(const std::string& ns, const std::string& name,
                                     const std::map<std::string, std::optional<std::string>>& annotations) = 0;

  // POST .../pods/{name}/binding with metadata.uid = uid (the API server's
  // precondition: a replaced pod is not bound) and `annotations` in the
  // Binding's metadata, which the API server copies onto the pod in the same
  // update that sets spec.nodeName: one call, no window in which the pod is
  // bound without them. kConflict when the pod is already bound or its UID
  // differs (409) — the caller checks which; kNotFound when the pod is gone.
  virtual Status Bind(const std::string& ns, const std::string& name, const std::string& uid,
                      const std::string& node, const std::map<std::string, std::string>& annotations = {}) = 0;

  virtual Result<List<NodeInfo>> ListNodes() = 0;
  // All pods in all namespaces (optionally a fieldSelector such as spec.nodeName!=).
  // Lists are fetched in pages of Options::list_page_size; resource_version is
  // the list's (use it to start a watch). A page whose continue token expired
  // gives kConflict ("410 Gone"): list again. Items that cannot be decoded are
  // skipped with a warning.
  virtual Result<List<PodInfo>> ListPods(const std::string& field_selector = "") = 0;

  // Merge-patches a node's annotations (used to nudge kube-scheduler's
  // unschedulable queue with a node update event).
  virtual Status PatchNodeAnnotations(const std::string& name,
                                      const std::map<std::string, std::optional<std::string>>& annotations) = 0;

  // Merge-patches a node's labels (null value = remove). vramd changes one
  // label to make kube-scheduler retry pods it parked as unschedulable: 1.20
  // requeues on node label changes, not on annotation changes.
  virtual Status PatchNodeLabels(const std::string& name,
                                 const std::map<std::string, std::optional<std::string>>& labels) = 0;

  // Posts a core/v1 Event about a pod (reason, message, type Normal|Warning;
  // another type is kInvalidArgument). The message is cut to 1 KiB.
  virtual Status PostPodEvent(const PodInfo& pod, const std::string& type, const std::string& reason,
                              const std::string& message) = 0;

  // The same about a Node (name and uid): the Event lives in namespace
  // "default", as the kubelet's node events do (`kubectl describe node` shows it).
  virtual Status PostNodeEvent(const NodeInfo& node, const std::string& type, const std::string& reason,
                               const std::string& message) = 0;

  // Evicts a pod through the Eviction API: POST .../pods/{name}/eviction with
  // deleteOptions.preconditions.uid = uid (none when uid is empty), so
  // PodDisruptionBudgets are respected and a pod created again under the same
  // name is left alone. Sends a policy/v1 Eviction; a server without it (before
  // 1.22: HTTP 400 "no kind \"Eviction\" is registered for version
  // \"policy/v1\"") is asked again once with policy/v1beta1, and later calls
  // start with the version that worked (and switch back the same way when a
  // server no longer serves it). 200/201 -> kEvicted; 429 -> kBlocked (a
  // PodDisruptionBudget, or the API server's own throttling: the message
  // tells); 404, or 409 about the UID precondition -> kGone; anything else an
  // error as below. `api_message`, when not null, receives the API server's
  // message for kBlocked and kGone (with the causes it lists, e.g. which
  // budget), "" otherwise. `dry_run`: the same request with
  // deleteOptions.dryRun ["All"] (honoured by the eviction subresource since
  // Kubernetes 1.15): the API server checks it, PodDisruptionBudgets
  // included, and evicts nothing; kEvicted then means "would be evicted".
  virtual Result<EvictOutcome> EvictPod(const std::string& ns, const std::string& name, const std::string& uid,
                                        std::string* api_message = nullptr, bool dry_run = false) = 0;

  // Watches from resource_version (empty: from now, starting with synthetic
  // ADDED events for every existing object); calls `on_event` per event, on the
  // calling thread, until the server ends the stream (timeoutSeconds; returns
  // OK, the caller re-watches from the last resource_version it saw, bookmarks
  // included), `stop` becomes true (returns OK within ~100 ms, even on a silent
  // stream), or an error. Returns kConflict with a message starting "410 Gone"
  // when the version is too old (relist). BOOKMARK events carry only
  // object.resource_version. An object that cannot be decoded is skipped with
  // a warning; a line that is not a watch event ends the watch (kInternal).
  virtual Status WatchPods(const std::string& resource_version, const std::atomic<bool>& stop,
                           const std::function<void(const WatchEvent<PodInfo>&)>& on_event) = 0;
  virtual Status WatchNodes(const std::string& resource_version, const std::atomic<bool>& stop,
                            const std::function<void(const WatchEvent<NodeInfo>&)>& on_event) = 0;

  // VramQueue objects (cluster-scoped, /apis/vramd.io/v1alpha1/vramqueues),
  // decoded by DecodeQueue (decode.h): an object with a readable name is
  // kept even when decode_error is set (its queue is then invalid and its
  // status says why); one without a readable name is skipped with a warning.
  // kNotFound when the API server does not serve the resource (the CRD is
  // not installed). Paged like ListPods.
  virtual Result<List<ledger::QueueSpec>> ListQueues() = 0;
  // Watches VramQueue objects as WatchPods watches pods. A QueueSpec carries
  // no resourceVersion, so BOOKMARK events come with an empty object and a
  // caller starts every watch from a list's resource_version (after the
  // stream ends it lists again; the queues are few).
  virtual Status WatchQueues(const std::string& resource_version, const std::atomic<bool>& stop,
                             const std::function<void(const WatchEvent<ledger::QueueSpec>&)>& on_event) = 0;
  // PATCH .../vramqueues/{name}/status, application/merge-patch+json, with
  // `patch_json` (QueueStatusPatch). kNotFound when the object (or the CRD)
  // is gone.
  virtual Status PatchQueueStatus(const std::string& name, const std::string& patch_json) = 0;

  // Identities (issue 33). TokenReview: who `token` is, for `audience`
  // (kUnauthenticated when the API server does not accept it; see
  // DecodeTokenReview). SubjectAccessReview: whether `user` may `verb`
  // `resource` (core group) in `ns` (`name`: one object). Clients that
  // cannot ask answer kUnavailable.
  virtual Result<TokenUser> ReviewToken(const std::string& token, const std::string& audience) {
    (void)token;
    (void)audience;
    return Unavailable("this Kubernetes client cannot review tokens");
  }
  virtual Result<bool> MayAccess(const TokenUser& user, const std::string& verb, const std::string& resource,
                                 const std::string& ns, const std::string& name) {
    (void)user, (void)verb, (void)resource, (void)ns, (void)name;
    return Unavailable("this Kubernetes client cannot review access");
  }
};

// Errors of every call: HTTP 404 → kNotFound, 409 and 410 → kConflict,
// 400/422 → kInvalidArgument, 401/403 → kInternal (the message says to check
// RBAC / credentials), 429 and 5xx → kUnavailable, a transport failure or
// timeout → kUnavailable, an undecodable 2xx body → kInternal. Messages name
// the call, the HTTP status and the API server's `message`; never the token.

// The REST client. Fails with kInvalidArgument when the options cannot work
// (no URL and not in a cluster, a malformed URL, unreadable CA or token file).
// With https it sets SIGPIPE to SIG_IGN when it is still SIG_DFL (OpenSSL
// writes to sockets without MSG_NOSIGNAL; a write to a closed connection must
// fail with EPIPE, not kill the daemon).
Result<std::unique_ptr<KubeClient>> NewRestClient(const Options& opts);

}  // namespace vramd::kube
