// The KubeClient that speaks REST to a kube-apiserver (cpp-httplib + OpenSSL).

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include "kube/api_status.h"
#include "kube/api_url.h"
#include "kube/client_stream.h"
#include "kube/json_decode.h"
#include "kube/token_source.h"
#include "kube/watch_stream.h"
#include "vramd/json_string.h"
#include "vramd/kube/kube_client.h"
#include "vramd/kube/secret_reader.h"
#include "vramd/kube/secrets.h"
#include "vramd/kube/webhooks.h"
#include "vramd/mutex.h"

#ifndef VRAMD_VERSION
#define VRAMD_VERSION "dev"
#endif

namespace vramd::kube {
namespace {

using nlohmann::json;
using Params = std::vector<std::pair<std::string, std::string>>;

constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";
constexpr size_t kMaxEventMessageBytes = 1024;
constexpr size_t kMaxErrorBodyBytes = 64 * 1024;
constexpr int kWatchReadSlackSeconds = 30;
constexpr std::chrono::milliseconds kStopPollInterval{50};

// JSON text of `j`; invalid UTF-8 in strings is replaced rather than thrown on.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string Rfc3339Now() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Cuts `s` to at most `max` bytes without splitting a UTF-8 sequence.
std::string TruncateUtf8(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut);
}

Status CheckCaFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("kube CA file " + path + ": cannot be opened");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (buf.str().find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return InvalidArgument("kube CA file " + path + ": no PEM certificate in it");
  }
  return Status::Ok();
}

// OpenSSL writes to sockets with plain write(): a TLS close_notify sent on a
// connection the peer (or Watch's stop) already shut down raises SIGPIPE,
// which by default kills the process. Ignore it unless someone installed a
// handler; the write then fails with EPIPE and the call reports the error.
void IgnoreSigpipeUnlessHandled() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, nullptr);
  }
}

void SetTimeout(std::chrono::milliseconds ms, const std::function<void(time_t, time_t)>& set) {
  set(static_cast<time_t>(ms.count() / 1000), static_cast<time_t>((ms.count() % 1000) * 1000));
}

// A bounded set of keep-alive clients. httplib's client serializes the
// requests made on one instance, so each call borrows a client of its own:
// at most `max` calls (binds, patches, lists) are on the wire at once.
class ClientPool {
 public:
  using Factory = std::function<std::unique_ptr<httplib::ClientImpl>()>;

  ClientPool(Factory factory, size_t max, std::chrono::milliseconds wait)
      : factory_(std::move(factory)), max_(max), wait_(wait) {}

  // An idle client, a new one while fewer than `max` exist, or one released
  // within `wait`; nullptr when none became free in time.
  std::unique_ptr<httplib::ClientImpl> Acquire() {
    {
      MutexLock lock(&mu_);
      auto available = [this]() EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !idle_.empty() || open_ < max_; };
      if (!available()) {
        ++waiting_;
        const bool got = cv_.WaitFor(&lock, wait_, available);
        --waiting_;
        if (!got) return nullptr;
      }
      if (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
      ++open_;
    }
    return factory_();
  }

  // Gives a borrowed client back; one that saw a transport error is dropped.
  void Release(std::unique_ptr<httplib::ClientImpl> client, bool reusable) {
    std::unique_ptr<httplib::ClientImpl> drop;
    bool wake = false;
    {
      MutexLock lock(&mu_);
      if (reusable) {
        idle_.push_back(std::move(client));
      } else {
        drop = std::move(client);
        --open_;
      }
      wake = waiting_ > 0;
    }
    // A notify with no one waiting is a futex call for nothing (most calls:
    // the pool is rarely exhausted once it is sized for the bind rate).
    if (wake) cv_.NotifyOne();
  }

 private:
  const Factory factory_;
  const size_t max_;
  const std::chrono::milliseconds wait_;
  Mutex mu_;
  CondVar cv_;
  std::vector<std::unique_ptr<httplib::ClientImpl>> idle_ GUARDED_BY(mu_);
  size_t open_ GUARDED_BY(mu_) = 0;  // idle + borrowed
  size_t waiting_ GUARDED_BY(mu_) = 0;  // callers in Acquire's wait
};

enum class Method { kGet, kPost, kPatch };

struct HttpReply {
  int status = 0;
  std::string body;
};

class RestClient final : public KubeClient, public SecretClient, public SecretReader, public WebhookClient {
 public:
  RestClient(Options opts, ApiEndpoint endpoint, std::string ca_file, std::unique_ptr<TokenSource> token)
      : opts_(std::move(opts)),
        endpoint_(std::move(endpoint)),
        ca_file_(std::move(ca_file)),
        token_(std::move(token)),
        pool_([this] { return NewHttpClient(std::chrono::milliseconds(opts_.timeout_ms)); },
              static_cast<size_t>(opts_.max_connections), std::chrono::milliseconds(opts_.timeout_ms)) {}

  Result<PodInfo> GetPod(const std::string& ns, const std::string& name) override {
    const std::string what = "get pod " + ns + "/" + name;
    Result<HttpReply> r = Send(Method::kGet, PodPath(ns, name), "", "", what);
    if (!r.ok()) return r.status();
    if (!Is2xx(r->status)) return StatusFromHttp(r->status, what, ApiMessage(r->body));
    json j = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return Internal(what + ": the answer is not JSON");
    Result<PodInfo> pod = PodFromJson(j, opts_.resource_name);
    if (!pod.ok()) return Internal(what + ": " + pod.status().message());
    return pod;
  }

  Status PatchPodAnnotations(const std::string& ns, const std::string& name,
                             const std::map<std::string, std::optional<std::string>>& annotations) override {
    return PatchAnnotations(PodPath(ns, name), annotations, "patch pod " + ns + "/" + name + " annotations");
  }

  Status PatchNodeAnnotations(const std::string& name,
                              const std::map<std::string, std::optional<std::string>>& annotations) override {
    return PatchAnnotations(Api("/api/v1/nodes/" + PercentEncode(name)), annotations,
                            "patch node " + name + " annotations");
  }

  Status PatchNodeLabels(const std::string& name,
                         const std::map<std::string, std::optional<std::string>>& labels) override {
    return PatchMetadata(Api("/api/v1/nodes/" + PercentEncode(name)), "labels", labels,
                         "patch node " + name + " labels");
  }

  Status Bind(const std::string& ns, const std::string& name, const std::string& uid, const std::string& node,
              const std::map<std::string, std::string>& annotations) override {
    const std::string what = "bind " + ns + "/" + name + " to " + node;
    // Written directly (one per scheduled pod; a json tree cost ~30 allocations).
    std::string body = R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":)";
    AppendJsonString(name, &body);
    body += R"(,"namespace":)";
    AppendJsonString(ns, &body);
    body += R"(,"uid":)";
    AppendJsonString(uid, &body);
    if (!annotations.empty()) {
      body += R"(,"annotations":{)";
      for (bool first = true; const auto& [k, v] : annotations) {
        if (!std::exchange(first, false)) body += ',';
        AppendJsonString(k, &body);
        body += ':';
        AppendJsonString(v, &body);
      }
      body += '}';
    }
    body += R"(},"target":{"apiVersion":"v1","kind":"Node","name":)";
    AppendJsonString(node, &body);
    body += "}}";
    Result<HttpReply> r = Send(Method::kPost, PodPath(ns, name) + "/binding", std::move(body), "application/json", what);
    if (!r.ok()) return r.status();
    if (!Is2xx(r->status)) return StatusFromHttp(r->status, what, ApiMessage(r->body));
    return Status::Ok();
  }

  Result<List<NodeInfo>> ListNodes() override {
    return ListAll<NodeInfo>(Api("/api/v1/nodes"), {}, "list nodes", [](const json& o) { return NodeFromJson(o); });
  }

  Result<List<PodInfo>> ListPods(const std::string& field_selector) override {
    Params params;
    if (!field_selector.empty()) params.emplace_back("fieldSelector", field_selector);
    return ListAll<PodInfo>(Api("/api/v1/pods"), std::move(params), "list pods",
                            [this](const json& o) { return PodFromJson(o, opts_.resource_name); });
  }

  Status PostPodEvent(const PodInfo& pod, const std::string& type, const std::string& reason,
                      const std::string& message) override {
    json involved = {
        {"apiVersion", "v1"}, {"kind", "Pod"}, {"name", pod.name}, {"namespace", pod.ns}, {"uid", pod.uid}};
    return PostEvent(pod.ns, pod.name, std::move(involved), type, reason, message, "pod " + pod.ns + "/" + pod.name);
  }

  Status PostNodeEvent(const NodeInfo& node, const std::string& type, const std::string& reason,
                       const std::string& message) override {
    json involved = {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node.name}, {"uid", node.uid}};
    return PostEvent("default", node.name, std::move(involved), type, reason, message, "node " + node.name);
  }

  Result<EvictOutcome> EvictPod(const std::string& ns, const std::string& name, const std::string& uid,
                                std::string* api_message, bool dry_run) override {
    if (api_message != nullptr) api_message->clear();
    const std::string what = std::string(dry_run ? "dry-run evict" : "evict") + " pod " + ns + "/" + name;
    bool v1beta1 = eviction_v1beta1_.load();
    Result<HttpReply> r = PostEviction(ns, name, uid, v1beta1, dry_run, what);
    if (!r.ok()) return r.status();
    if (EvictionVersionUnserved(*r, v1beta1)) {
      v1beta1 = !v1beta1;
      r = PostEviction(ns, name, uid, v1beta1, dry_run, what);
      if (!r.ok()) return r.status();
      if (!EvictionVersionUnserved(*r, v1beta1)) {
        spdlog::info("kube client: the API server does not accept {} Evictions; using {}",
                     EvictionApiVersion(!v1beta1), EvictionApiVersion(v1beta1));
        eviction_v1beta1_.store(v1beta1);
      }
    }
    if (Is2xx(r->status)) return EvictOutcome::kEvicted;
    const bool gone = r->status == 404 || (r->status == 409 && IsUidPreconditionConflict(ApiMessage(r->body)));
    if (r->status == 429 || gone) {
      if (api_message != nullptr) *api_message = ApiMessageWithCauses(r->body);
      return gone ? EvictOutcome::kGone : EvictOutcome::kBlocked;
    }
    return StatusFromHttp(r->status, what + " (" + EvictionApiVersion(v1beta1) + ")", ApiMessage(r->body));
  }

  Status WatchPods(const std::string& resource_version, const std::atomic<bool>& stop,
                   const std::function<void(const WatchEvent<PodInfo>&)>& on_event) override {
    return Watch(Api("/api/v1/pods"), resource_version, stop, "watch pods", [&](std::string_view line) {
      return HandlePodWatchLine(line, opts_.resource_name, on_event);
    });
  }

  Status WatchNodes(const std::string& resource_version, const std::atomic<bool>& stop,
                    const std::function<void(const WatchEvent<NodeInfo>&)>& on_event) override {
    return Watch(Api("/api/v1/nodes"), resource_version, stop, "watch nodes",
                 [&](std::string_view line) { return HandleNodeWatchLine(line, on_event); });
  }

  Result<List<ledger::QueueSpec>> ListQueues() override {
    return ListAll<ledger::QueueSpec>(QueuesPath(), {}, "list vramqueues",
                                      [](const json& o) { return QueueWithName(o); });
  }

  Status WatchQueues(const std::string& resource_version, const std::atomic<bool>& stop,
                     const std::function<void(const WatchEvent<ledger::QueueSpec>&)>& on_event) override {
    return Watch(QueuesPath(), resource_version, stop, "watch vramqueues",
                 [&](std::string_view line) { return HandleQueueWatchLine(line, on_event); });
  }

  Result<std::string> GetWebhookConfiguration(WebhookKind kind, const std::string& name) override {
    const std::string what = std::string("get ") + WebhookResource(kind) + "/" + name;
    Result<HttpReply> r = Send(Method::kGet, WebhookPath(kind, name), "", "", what);
    if (!r.ok()) return r.status();
    if (!Is2xx(r->status)) return StatusFromHttp(r->status, what, ApiMessage(r->body));
    return std::move(r->body);
  }

  Status PatchWebhookConfiguration(WebhookKind kind, const std::string& name, const std::string& json_patch) override {
    const std::string what = std::string("patch ") + WebhookResource(kind) + "/" + name;
    Result<HttpReply> r = Send(Method::kPatch, WebhookPath(kind, name), json_patch, "application/json-patch+json", what);
    if (!r.ok()) return r.status();
    if (!Is2xx(r->status)) return StatusFromHttp(r->status, what, ApiMessage(r->body));
    return Status::Ok();
  }

  Status PatchQueueStatus(const std::string& name, const std::string& patch_json) override {
    const std::string what = "patch vramqueue " + name + " status";
    Result<HttpReply> r = Send(Method::kPatch, QueuesPath() + "/" + PercentEncode(name) + "/status", patch_json,
                               "application/merge-patch+json", what);
    if (!r.ok()) return r.status();
    if (!Is2xx(r->status)) return StatusFromHttp(r->status, what, ApiMessage(r->body));
    return Status::Ok();
  }

  Result<TokenUser> ReviewToken(const std::string& token, const std::string& audience) override {
    const std::string what = "TokenReview";
    Result<HttpReply> r = Send(Method::kPost, Api("/apis/authentication.k8s.io/v1/tokenreviews"),
                               TokenReviewBody(token, audience), "application/json", what);
    if (!r.ok()) return r.status();
    if (!Is2xx(r->status)) return StatusFromHttp(r->status, what, ApiMessage(r->body));
    return DecodeTokenReview(r->body, audience);
  }

  Result<bool> MayAccess(const TokenUser& user, const std::string& verb, const std::string& resource,
                         const std::string& ns, const std::string& name) override {
    const std::string what = "SubjectAccessReview";
    Result<HttpReply> r = Send(Method::kPost, Api("/apis/authorization.k8s.io/v1/subjectaccessreviews"),
                               SubjectAccessReviewBody(user, verb, resource, ns, name), "application/json", what);
    if (!r.ok()) return r.status();
    if (!Is2xx(r->status)) return StatusFromHttp(r->status, what, ApiMessage(r->body));
    return DecodeSubjectAccessReview(r->body);
  }

  Result<Secret> GetSecret(const std::string& ns, const std::string& name) override {
    const std::string what = "get secret " + ns + "/" + name;
    const std::string path = Api("/api/v1/namespaces/" + PercentEncode(ns) + "/secrets/" + PercentEncode(name));
    Result<HttpReply> r = Send(Method::kGet, path, "", "", what);
    if (!r.ok()) return r.status();
    if (!Is2xx(r->status)) return StatusFromHttp(r->status, what, ApiMessage(r->body));
    Result<Secret> secret = SecretFromJson(r->body);
    if (!secret.ok()) return Internal(what + ": " + secret.status().message());
    return secret;
  }

  Status CreateSecret(const Secret& secret) override {
    const std::string what = "create secret " + secret.ns + "/" + secret.name;
    const std::string path = Api("/api/v1/namespaces/" + PercentEncode(secret.ns) + "/secrets");
    Result<HttpReply> r = Send(Method::kPost, path, SecretJson(secret), "application/json", what);
    if (!r.ok()) return r.status();
    if (!Is2xx(r->status)) return StatusFromHttp(r->status, what, ApiMessage(r->body));
    return Status::Ok();
  }

 private:
  static bool Is2xx(int status) { return status >= 200 && status <= 299; }

  // Creates a core/v1 Event in `ns` about `involved` (an involvedObject).
  Status PostEvent(const std::string& ns, const std::string& name, json involved, const std::string& type,
                   const std::string& reason, const std::string& message, const std::string& about) {
    if (type != "Normal" && type != "Warning") {
      return InvalidArgument(about + " event type \"" + type + "\": must be Normal or Warning");
    }
    const std::string what = "post event " + reason + " for " + about;
    const std::string now = Rfc3339Now();
    json body = {
        {"apiVersion", "v1"},
        {"kind", "Event"},
        {"metadata", {{"generateName", name + ".vramd-"}, {"namespace", ns}}},
        {"involvedObject", std::move(involved)},
        {"reason", reason},
        {"message", TruncateUtf8(message, kMaxEventMessageBytes)},
        {"type", type},
        {"source", {{"component", "vramd"}}},
        {"firstTimestamp", now},
        {"lastTimestamp", now},
        {"count", 1},
    };
    const std::string path = Api("/api/v1/namespaces/" + PercentEncode(ns) + "/events");
    Result<HttpReply> r = Send(Method::kPost, path, Dump(body), "application/json", what);
    if (!r.ok()) return r.status();
    if (!Is2xx(r->status)) return StatusFromHttp(r->status, what, ApiMessage(r->body));
    return Status::Ok();
  }

  static const char* EvictionApiVersion(bool v1beta1) { return v1beta1 ? "policy/v1beta1" : "policy/v1"; }

  // POSTs one Eviction of `ns/name` in the given policy version.
  Result<HttpReply> PostEviction(const std::string& ns, const std::string& name, const std::string& uid,
                                 bool v1beta1, bool dry_run, const std::string& what) {
    json body = {
        {"apiVersion", EvictionApiVersion(v1beta1)},
        {"kind", "Eviction"},
        {"metadata", {{"name", name}, {"namespace", ns}}},
    };
    if (!uid.empty()) body["deleteOptions"]["preconditions"] = {{"uid", uid}};
    if (dry_run) body["deleteOptions"]["dryRun"] = json::array({"All"});
    return Send(Method::kPost, PodPath(ns, name) + "/eviction", Dump(body), "application/json", what);
  }

  // Whether the API server refused the Eviction because it does not know
  // that version of the kind: HTTP 400 "Eviction in version \"v1\" cannot be
  // handled as a Eviction: no kind \"Eviction\" is registered for version
  // \"policy/v1\" in scheme ..." (kube-apiserver before 1.22; a server
  // without policy/v1beta1 would say the same of that).
  static bool EvictionVersionUnserved(const HttpReply& r, bool v1beta1) {
    if (r.status != 400) return false;
    const std::string msg = ApiMessage(r.body);
    const std::string quoted = std::string("\"") + EvictionApiVersion(v1beta1) + "\"";
    return msg.find("Eviction") != std::string::npos && msg.find(quoted) != std::string::npos;
  }

  // A 409 because deleteOptions.preconditions.uid names another pod:
  // "Operation cannot be fulfilled on Pod \"p\": the UID in the precondition
  // (X) does not match the UID in record (Y). ..." (kube-apiserver 1.20, as
  // measured), or the generic store's "Precondition failed: UID in
  // precondition: X, UID in object meta: Y".
  static bool IsUidPreconditionConflict(const std::string& msg) {
    return msg.find("UID in precondition") != std::string::npos ||
           msg.find("UID in the precondition") != std::string::npos;
  }

  std::string Api(const std::string& path) const { return endpoint_.base_path + path; }

  // /apis/vramd.io/v1alpha1/vramqueues (cluster-scoped).
  std::string QueuesPath() const {
    return Api(std::string("/apis/") + ledger::kQueueGroup + "/" + ledger::kQueueVersion + "/" + ledger::kQueuePlural);
  }

  std::string WebhookPath(WebhookKind kind, const std::string& name) const {
    return Api(std::string("/apis/admissionregistration.k8s.io/v1/") + WebhookResource(kind) + "/" +
               PercentEncode(name));
  }

  std::string PodPath(const std::string& ns, const std::string& name) const {
    return Api("/api/v1/namespaces/" + PercentEncode(ns) + "/pods/" + PercentEncode(name));
  }

  std::unique_ptr<httplib::ClientImpl> NewHttpClient(std::chrono::milliseconds read_timeout) const {
    std::unique_ptr<httplib::ClientImpl> c;
    if (endpoint_.tls) {
      auto ssl = std::make_unique<CoalescingClient<httplib::SSLClient>>(endpoint_.host, endpoint_.port);
      if (!ca_file_.empty()) ssl->set_ca_cert_path(ca_file_);
      ssl->enable_server_certificate_verification(true);
      c = std::move(ssl);
    } else {
      c = std::make_unique<CoalescingClient<httplib::ClientImpl>>(endpoint_.host, endpoint_.port);
    }
    const std::chrono::milliseconds timeout(opts_.timeout_ms);
    SetTimeout(timeout, [&](time_t s, time_t us) { c->set_connection_timeout(s, us); });
    SetTimeout(timeout, [&](time_t s, time_t us) { c->set_write_timeout(s, us); });
    SetTimeout(read_timeout, [&](time_t s, time_t us) { c->set_read_timeout(s, us); });
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
    c->set_url_encode(false);  // paths and queries are percent-encoded here
    return c;
  }

  httplib::Headers RequestHeaders() const {
    httplib::Headers h{{"Accept", "application/json"}, {"User-Agent", "vramd/" VRAMD_VERSION}};
    std::string token = token_->Get();
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    return h;
  }

  // One request on a pooled connection. Transport failures are kUnavailable;
  // any HTTP status is a reply for the caller to judge.
  Result<HttpReply> Send(Method method, const std::string& path, const std::string& body,
                         const std::string& content_type, const std::string& what) {
    std::unique_ptr<httplib::ClientImpl> cli = pool_.Acquire();
    if (!cli) {
      return Unavailable(what + ": all " + std::to_string(opts_.max_connections) +
                         " API connections stayed busy for " + std::to_string(opts_.timeout_ms) + " ms");
    }
    httplib::Headers headers = RequestHeaders();
    httplib::Result res = method == Method::kGet    ? cli->Get(path, headers)
                          : method == Method::kPost ? cli->Post(path, headers, body, content_type)
                                                    : cli->Patch(path, headers, body, content_type);
    if (!res) {
      httplib::Error err = res.error();
      pool_.Release(std::move(cli), /*reusable=*/false);
      return Unavailable(what + ": " + endpoint_.Origin() + ": transport error: " + httplib::to_string(err));
    }
    HttpReply reply{res->status, std::move(res->body)};
    pool_.Release(std::move(cli), /*reusable=*/true);
    return reply;
  }

  Status PatchAnnotations(const std::string& path, const std::map<std::string, std::optional<std::string>>& annotations,
                          const std::string& what) {
    return PatchMetadata(path, "annotations", annotations, what);
  }

  // Merge-patches metadata.<field> (annotations or labels).
  Status PatchMetadata(const std::string& path, const char* field,
                       const std::map<std::string, std::optional<std::string>>& values, const std::string& what) {
    if (values.empty()) return Status::Ok();
    json a = json::object();
    for (const auto& [k, v] : values) a[k] = v ? json(*v) : json(nullptr);
    json body = {{"metadata", {{field, std::move(a)}}}};
    Result<HttpReply> r = Send(Method::kPatch, path, Dump(body), "application/merge-patch+json", what);
    if (!r.ok()) return r.status();
    if (!Is2xx(r->status)) return StatusFromHttp(r->status, what, ApiMessage(r->body));
    return Status::Ok();
  }

  // GETs every page of a list (limit/continue) and decodes its items.
  template <typename T, typename Decode>
  Result<List<T>> ListAll(const std::string& path, const Params& params, const std::string& what,
                          const Decode& decode) {
    List<T> out;
    std::string cont;
    do {
      Params q = params;
      q.emplace_back("limit", std::to_string(opts_.list_page_size));
      if (!cont.empty()) q.emplace_back("continue", cont);
      Result<HttpReply> r = Send(Method::kGet, path + QueryString(q), "", "", what);
      if (!r.ok()) return r.status();
      if (!Is2xx(r->status)) return StatusFromHttp(r->status, what, ApiMessage(r->body));
      json page = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
      if (page.is_discarded() || !page.is_object()) return Internal(what + ": the answer is not a JSON object");
      auto items = page.find("items");
      if (items != page.end() && !items->is_null()) {
        if (!items->is_array()) return Internal(what + ": items is not an array");
        out.items.reserve(out.items.size() + items->size());
        for (const json& item : *items) {
          Result<T> decoded = decode(item);
          if (decoded.ok()) {
            out.items.push_back(std::move(*decoded));
          } else {
            spdlog::warn("{}: skipping {}: {}", what, ObjectRef(item), decoded.status().message());
          }
        }
      }
      out.resource_version = ResourceVersionOf(page);
      cont.clear();
      auto md = page.find("metadata");
      if (md != page.end() && md->is_object()) {
        auto c = md->find("continue");
        if (c != md->end() && c->is_string()) cont = c->get<std::string>();
      }
    } while (!cont.empty());
    return out;
  }

  // One watch request on a dedicated connection (a watch lasts minutes and
  // must not hold a pooled one). A helper thread shuts the connection down
  // once `stop` is set, so a silent stream ends promptly too.
  Status Watch(const std::string& path, const std::string& resource_version, const std::atomic<bool>& stop,
               const std::string& what, const std::function<Status(std::string_view)>& handle_line) {
    if (stop.load()) return Status::Ok();
    Params q{{"watch", "1"}};
    if (!resource_version.empty()) q.emplace_back("resourceVersion", resource_version);
    q.emplace_back("allowWatchBookmarks", "true");
    q.emplace_back("timeoutSeconds", std::to_string(opts_.watch_timeout_s));
    std::unique_ptr<httplib::ClientImpl> cli =
        NewHttpClient(std::chrono::seconds(opts_.watch_timeout_s + kWatchReadSlackSeconds));

    int http_status = 0;
    std::string error_body;
    Status line_status;
    LineSplitter splitter;
    auto on_line = [&](std::string_view line) {
      line_status = handle_line(line);
      return line_status.ok() && !stop.load();
    };

    httplib::Result res = [&] {
      std::jthread stopper([&](std::stop_token done) {
        Mutex mu;
        CondVar cv;
        MutexLock lock(&mu);
        while (!done.stop_requested()) {
          // Repeated: a stop() that lands before the socket is open is a no-op.
          if (stop.load()) cli->stop();
          cv.WaitFor(&lock, done, kStopPollInterval);
        }
      });
      return cli->Get(
          path + QueryString(q), RequestHeaders(),
          [&](const httplib::Response& r) {
            http_status = r.status;
            return !stop.load();
          },
          [&](const char* data, size_t n) {
            if (stop.load()) return false;
            if (!Is2xx(http_status)) {
              if (error_body.size() < kMaxErrorBodyBytes) error_body.append(data, n);
              return true;
            }
            return splitter.Feed(std::string_view(data, n), on_line);
          });
    }();  // the stopper thread is joined here, before `cli` can go away

    if (stop.load()) return Status::Ok();
    if (!line_status.ok()) return line_status;
    if (splitter.overflowed()) return Internal(what + ": an event line is larger than 64 MiB");
    if (!res) {
      return Unavailable(what + ": " + endpoint_.Origin() + ": stream ended: " + httplib::to_string(res.error()));
    }
    if (!Is2xx(http_status)) return StatusFromHttp(http_status, what, ApiMessage(error_body));
    splitter.Finish(on_line);
    return line_status;
  }

  const Options opts_;
  const ApiEndpoint endpoint_;
  const std::string ca_file_;
  const std::unique_ptr<TokenSource> token_;
  ClientPool pool_;
  std::atomic<bool> eviction_v1beta1_{false};  // the server took only policy/v1beta1 Evictions last time
};

Result<std::unique_ptr<RestClient>> NewRestClientImpl(const Options& opts) {
  if (opts.timeout_ms <= 0 || opts.max_connections <= 0 || opts.watch_timeout_s <= 0 || opts.list_page_size <= 0) {
    return InvalidArgument("kube client: timeout_ms, max_connections, watch_timeout_s and list_page_size must be > 0");
  }
  std::string url = opts.api_url;
  std::string token_file = opts.token_file;
  std::string ca_file = opts.ca_file;
  if (url.empty()) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    if (host == nullptr || *host == '\0') {
      return InvalidArgument("kube client: no API URL configured and not running in a cluster "
                             "(KUBERNETES_SERVICE_HOST is unset)");
    }
    std::string h = host;
    if (h.find(':') != std::string::npos) h = "[" + h + "]";
    url = "https://" + h + ":" + (port != nullptr && *port != '\0' ? port : "443");
    if (token_file.empty()) token_file = std::string(kServiceAccountDir) + "/token";
    if (ca_file.empty()) ca_file = std::string(kServiceAccountDir) + "/ca.crt";
  }
  Result<ApiEndpoint> ep = ParseApiUrl(url);
  if (!ep.ok()) return ep.status();

  if (ep->tls) {
    IgnoreSigpipeUnlessHandled();
    if (!ca_file.empty()) {
      if (Status s = CheckCaFile(ca_file); !s.ok()) return s;
    } else {
      spdlog::info("kube client: no CA file given; verifying {} against the system trust store", ep->Origin());
    }
  } else {
    spdlog::warn("kube client: plain http to {} (for tests only; use https in production)", ep->Origin());
    ca_file.clear();
  }

  auto token = std::make_unique<TokenSource>(token_file, std::chrono::milliseconds(std::max(0, opts.token_check_ms)));
  if (Status s = token->Load(); !s.ok()) return InvalidArgument("kube client: " + s.message());
  spdlog::info("kube client: API server {}{} (token file: {}, CA file: {})", ep->Origin(), ep->base_path,
               token_file.empty() ? "none" : token_file, ca_file.empty() ? "system trust store" : ca_file);

  return std::make_unique<RestClient>(opts, std::move(ep).value(), ca_file, std::move(token));
}

}  // namespace

Result<std::unique_ptr<KubeClient>> NewRestClient(const Options& opts) {
  Result<std::unique_ptr<RestClient>> c = NewRestClientImpl(opts);
  if (!c.ok()) return c.status();
  return std::unique_ptr<KubeClient>(std::move(c).value());
}

Result<std::unique_ptr<SecretReader>> NewSecretReader(const Options& opts) {
  Result<std::unique_ptr<RestClient>> c = NewRestClientImpl(opts);
  if (!c.ok()) return c.status();
  return std::unique_ptr<SecretReader>(std::move(c).value());
}

Result<std::unique_ptr<WebhookClient>> NewWebhookClient(const Options& opts) {
  Result<std::unique_ptr<RestClient>> c = NewRestClientImpl(opts);
  if (!c.ok()) return c.status();
  return std::unique_ptr<WebhookClient>(std::move(c).value());
}

Result<std::unique_ptr<SecretClient>> NewSecretClient(const Options& opts) {
  Result<std::unique_ptr<RestClient>> c = NewRestClientImpl(opts);
  if (!c.ok()) return c.status();
  return std::unique_ptr<SecretClient>(std::move(c).value());
}

}  // namespace vramd::kube
