#include "vramd/kube/token_review.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace vramd::kube {
namespace {

using nlohmann::json;

constexpr std::string_view kServiceAccountPrefix = "system:serviceaccount:";

std::string Shorten(std::string s) {
  if (s.size() > 200) s = s.substr(0, 200) + "…";
  return s;
}

// The single value of an extra key ("" when absent); kInvalidArgument when it holds several.
Result<std::string> OneExtra(const std::map<std::string, std::vector<std::string>>& extra, std::string_view key) {
  auto it = extra.find(std::string(key));
  if (it == extra.end() || it->second.empty()) return std::string();
  if (it->second.size() != 1) return InvalidArgument("the token's user has several " + std::string(key));
  return it->second.front();
}

}  // namespace

std::string TokenReviewBody(const std::string& token, const std::string& audience) {
  json body = {{"apiVersion", "authentication.k8s.io/v1"},
               {"kind", "TokenReview"},
               {"spec", {{"token", token}, {"audiences", json::array({audience})}}}};
  return body.dump();
}

Result<TokenUser> DecodeTokenReview(std::string_view body, const std::string& audience) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Internal("the TokenReview answer is not a JSON object");
  auto status = j.find("status");
  if (status == j.end() || !status->is_object()) return Internal("the TokenReview answer has no status");
  auto authenticated = status->find("authenticated");
  if (authenticated == status->end() || !authenticated->is_boolean() || !authenticated->get<bool>()) {
    std::string why = "the API server did not authenticate the token";
    auto err = status->find("error");
    if (err != status->end() && err->is_string() && !err->get<std::string>().empty()) {
      why += ": " + Shorten(err->get<std::string>());
    }
    return Unauthenticated(why);
  }
  // A client that asks for audiences must see one of them confirmed.
  bool confirmed = false;
  if (auto aud = status->find("audiences"); aud != status->end() && aud->is_array()) {
    confirmed = std::any_of(aud->begin(), aud->end(),
                            [&](const json& a) { return a.is_string() && a.get<std::string>() == audience; });
  }
  if (!confirmed) {
    return Unauthenticated("the API server authenticated the token but did not confirm the audience \"" + audience +
                           "\"");
  }
  auto user = status->find("user");
  if (user == status->end() || !user->is_object()) return Internal("the TokenReview answer has no user");
  TokenUser u;
  auto str = [&](const char* key, std::string* out) -> Status {
    auto it = user->find(key);
    if (it == user->end() || it->is_null()) return Status::Ok();
    if (!it->is_string()) return Internal(std::string("the TokenReview user's ") + key + " is not a string");
    *out = it->get<std::string>();
    return Status::Ok();
  };
  if (Status s = str("username", &u.username); !s.ok()) return s;
  if (Status s = str("uid", &u.uid); !s.ok()) return s;
  if (u.username.empty()) return Internal("the TokenReview user has no username");
  if (auto g = user->find("groups"); g != user->end() && !g->is_null()) {
    if (!g->is_array()) return Internal("the TokenReview user's groups are not a list");
    for (const json& x : *g) {
      if (!x.is_string()) return Internal("the TokenReview user's groups are not strings");
      u.groups.push_back(x.get<std::string>());
    }
  }
  if (auto e = user->find("extra"); e != user->end() && !e->is_null()) {
    if (!e->is_object()) return Internal("the TokenReview user's extra is not an object");
    for (auto it = e->begin(); it != e->end(); ++it) {
      if (!it.value().is_array()) return Internal("the TokenReview user's extra " + Shorten(it.key()) + " is not a list");
      std::vector<std::string>& values = u.extra[it.key()];
      for (const json& x : it.value()) {
        if (!x.is_string()) return Internal("the TokenReview user's extra " + Shorten(it.key()) + " holds a non-string");
        values.push_back(x.get<std::string>());
      }
    }
  }
  if (u.username.compare(0, kServiceAccountPrefix.size(), kServiceAccountPrefix) == 0) {
    std::string rest = u.username.substr(kServiceAccountPrefix.size());
    size_t colon = rest.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size() ||
        rest.find(':', colon + 1) != std::string::npos) {
      return InvalidArgument("malformed ServiceAccount username " + Shorten(u.username));
    }
    u.sa_namespace = rest.substr(0, colon);
    u.sa_name = rest.substr(colon + 1);
    Result<std::string> pod = OneExtra(u.extra, kExtraPodName);
    Result<std::string> pod_uid = OneExtra(u.extra, kExtraPodUid);
    Result<std::string> node = OneExtra(u.extra, kExtraNodeName);
    for (const auto* r : {&pod, &pod_uid, &node}) {
      if (!r->ok()) return r->status();
    }
    if (pod->empty() != pod_uid->empty()) return InvalidArgument("the token names a pod without its UID, or a UID without a pod");
    u.pod_name = *pod;
    u.pod_uid = *pod_uid;
    u.node_name = *node;
  }
  return u;
}

std::string SubjectAccessReviewBody(const TokenUser& user, const std::string& verb, const std::string& resource,
                                    const std::string& ns, const std::string& name) {
  json attrs = {{"verb", verb}, {"group", ""}, {"resource", resource}, {"namespace", ns}};
  if (!name.empty()) attrs["name"] = name;
  json spec = {{"user", user.username}, {"resourceAttributes", std::move(attrs)}};
  if (!user.uid.empty()) spec["uid"] = user.uid;
  if (!user.groups.empty()) spec["groups"] = user.groups;
  if (!user.extra.empty()) spec["extra"] = user.extra;
  json body = {{"apiVersion", "authorization.k8s.io/v1"}, {"kind", "SubjectAccessReview"}, {"spec", std::move(spec)}};
  return body.dump();
}

Result<bool> DecodeSubjectAccessReview(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Internal("the SubjectAccessReview answer is not a JSON object");
  auto status = j.find("status");
  if (status == j.end() || !status->is_object()) return false;
  auto allowed = status->find("allowed");
  auto denied = status->find("denied");
  bool is_denied = denied != status->end() && denied->is_boolean() && denied->get<bool>();
  return !is_denied && allowed != status->end() && allowed->is_boolean() && allowed->get<bool>();
}

}  // namespace vramd::kube
