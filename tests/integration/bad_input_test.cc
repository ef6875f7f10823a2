// The bad-input sweep (issue 7): the real vramd binary (standalone,
// --no-kube, two static nodes) over the test Valkey, sent malformed JSON,
// wrong types, missing fields, unknown nodes, duplicate names, absurd
// quantities, oversized bodies, slow, stalled and half-closed clients, wrong
// methods and paths, bad usage reports and lock calls, and calls without or
// with a wrong token — on raw sockets, so that anything can be sent. For each
// case: the status code, a clear message, the ledger and the locks untouched
// (GET /v1/nodes with its epoch and GET /v1/locks compare equal before and
// after) and /healthz still answering.
//
// The case list is also the table in docs/operations.md ("Bad input"): the
// test fails when the table there is not what the cases produce; rerun with
// VRAMD_TEST_UPDATE_DOCS=1 to rewrite it.
//
// Needs VRAMD_TEST_VALKEY_URL and the vramd binary in VRAMD_BIN_DIR.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "integration/clean_env.h"
#include "vramd/store/valkey_client.h"
#include "test_paths.h"  // VRAMD_TEST_DATA, VRAMD_BIN_DIR, VRAMD_FAKE_NVML

namespace vramd {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
namespace fs = std::filesystem;
using Steady = std::chrono::steady_clock;

constexpr const char* kToken = "bad-input-test-token";
constexpr int kReadTimeoutMs = 1000;
constexpr int kMaxBody = 65536;
constexpr int kHttpThreads = 4;

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double Seconds(Steady::duration d) { return std::chrono::duration<double>(d).count(); }

// How a case's bytes are sent.
enum class Send {
  kRequest,    // all of it, then read one answer
  kHalfClose,  // all of it, then shutdown(SHUT_WR), then read until the server closes
  kStall,      // all of it (an incomplete request, or nothing), then nothing: read
               // until the server cuts the connection off
};

// What came back on one connection.
struct Answer {
  int status = 0;  // 0: closed without a response
  std::string head;  // status line and headers
  std::string body;
  double answered_after_s = -1;  // from the last byte sent to the first byte of the answer
  double closed_after_s = -1;    // from the last byte sent to the server's close (-1: not seen)
  bool timed_out = false;        // no complete answer, or (stall, half-close) no close, in time
};

// The answer in `in` is complete (headers and Content-Length bytes of body).
bool Complete(const std::string& in) {
  size_t end = in.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  std::string head = in.substr(0, end);
  for (char& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  size_t cl = head.find("\r\ncontent-length:");
  size_t len = cl == std::string::npos ? 0 : std::strtoull(head.c_str() + cl + 17, nullptr, 10);
  return in.size() - end - 4 >= len;
}

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// Sends `raw` on a fresh connection (while reading, so that an early answer
// such as 413 is seen) and reads until the server closes or `timeout_ms`.
Answer Exchange(int port, const std::string& raw, Send mode, int timeout_ms) {
  Answer a;
  int fd = Connect(port);
  if (fd < 0) {
    a.timed_out = true;
    return a;
  }
  std::string in;
  size_t sent = 0;
  bool sending = !raw.empty(), shut = false, closed = false;
  auto deadline = Steady::now() + std::chrono::milliseconds(timeout_ms);
  auto last_sent = Steady::now();
  for (;;) {
    if (!sending && mode == Send::kHalfClose && !shut) {
      shutdown(fd, SHUT_WR);
      shut = true;
    }
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Steady::now()).count());
    if (left <= 0) {
      a.timed_out = true;
      break;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (sending ? POLLOUT : 0)), 0};
    if (poll(&p, 1, left) <= 0) continue;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[16384];
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        if (in.empty()) a.answered_after_s = Seconds(Steady::now() - last_sent);
        in.append(buf, static_cast<size_t>(n));
        if (mode == Send::kRequest && Complete(in)) break;
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {  // closed or reset
        closed = true;
        break;
      }
    }
    if (sending && (p.revents & POLLOUT)) {
      size_t chunk = std::min<size_t>(raw.size() - sent, 16384);
      ssize_t n = send(fd, raw.data() + sent, chunk, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
      else if (errno != EAGAIN && errno != EWOULDBLOCK) sending = false;  // the server stopped reading
      if (sent == raw.size()) sending = false;
      last_sent = Steady::now();
    }
  }
  if (closed) a.closed_after_s = Seconds(Steady::now() - last_sent);
  if (mode == Send::kRequest && in.empty() && !closed) a.timed_out = true;
  close(fd);
  if (in.rfind("HTTP/1.", 0) == 0 && in.size() >= 12) a.status = std::atoi(in.c_str() + 9);
  if (auto end = in.find("\r\n\r\n"); end != std::string::npos) {
    a.head = in.substr(0, end);
    a.body = in.substr(end + 4);
  }
  return a;
}

enum class Auth { kNone, kToken, kWrong };

// A complete HTTP/1.1 request that asks the server to close afterwards.
std::string Req(const std::string& method, const std::string& path, const std::string& body = "",
                Auth auth = Auth::kNone, const std::string& extra_headers = "") {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (auth == Auth::kToken) r += std::string("Authorization: Bearer ") + kToken + "\r\n";
  if (auth == Auth::kWrong) r += "Authorization: Bearer not-the-token\r\n";
  if (!body.empty() || method == "POST" || method == "PUT") {
    r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  r += extra_headers + "\r\n" + body;
  return r;
}

// The message an answer carries: {"error"} of the /v1 API and the HTTP
// layer, {"Error"} of the extender verbs, else the first node's reason of a
// filter result, else the body itself.
std::string Message(const Answer& a) {
  json j = json::parse(a.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return a.body;
  if (j.contains("error") && j["error"].is_string()) return j["error"];
  if (j.contains("Error") && j["Error"].is_string() && !j["Error"].get<std::string>().empty()) return j["Error"];
  for (const char* k : {"FailedAndUnresolvableNodes", "FailedNodes"}) {
    if (j.contains(k) && j[k].is_object() && !j[k].empty()) {
      return j[k].begin().key() + ": " + j[k].begin().value().get<std::string>();
    }
  }
  return a.body;
}

json Pod(const json& vram, const json& annotations = nullptr, const std::string& uid = "uid-bad") {
  json pod = {{"metadata", {{"name", "p-" + uid}, {"namespace", "default"}, {"uid", uid}}},
              {"spec", {{"containers", json::array({{{"name", "c"}, {"resources", {{"limits", {{"vramd.io/vram", vram}}}}}}})}}}};
  if (!annotations.is_null()) pod["metadata"]["annotations"] = annotations;
  return pod;
}

std::string FilterBody(const json& pod, const json& names = json::array({"n1", "n2"})) {
  return json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", names}}.dump();
}

struct Case {
  std::string endpoint;  // the row's group in the table
  std::string what;      // what is wrong with the request
  std::string raw;       // the bytes sent
  int status;            // expected status; 0 = the connection is closed without a response
  std::string says;      // expected in the answer's message
  Send send = Send::kRequest;
  std::function<void(const Answer&)> check = nullptr;  // more assertions
  int or_status = -1;  // another status that is right too (timing decides)
};

std::vector<Case> Cases() {
  const std::string F = "/scheduler/filter", P = "/scheduler/prioritize", B = "/scheduler/bind",
                    E = "/scheduler/preempt";
  const std::string quoted_min = "9223372036854775808";  // 2^63
  std::vector<Case> c;
  auto add = [&c](std::string endpoint, std::string what, std::string raw, int status, std::string says,
                  Send send = Send::kRequest, std::function<void(const Answer&)> check = nullptr) {
    c.push_back({std::move(endpoint), std::move(what), std::move(raw), status, std::move(says), send,
                 std::move(check)});
  };
  auto unresolvable_everywhere = [](const Answer& a) {
    json j = json::parse(a.body);
    EXPECT_TRUE(j["NodeNames"].empty()) << a.body;
    EXPECT_EQ(j["FailedAndUnresolvableNodes"].size(), 2u) << a.body;
  };

  // --- filter
  const std::string f = "POST " + F;
  add(f, "empty body", Req("POST", F, ""), 400, "invalid extender request");
  add(f, "malformed JSON", Req("POST", F, R"({"Pod": {"metadata": )"), 400, "invalid extender request");
  add(f, "not an object", Req("POST", F, "[1,2]"), 400, "body must be a JSON object");
  add(f, "trailing content", Req("POST", F, FilterBody(Pod("1Gi")) + " {}"), 400, "trailing content");
  add(f, "invalid UTF-8 in a string", Req("POST", F, "{\"Pod\":{\"metadata\":{\"name\":\"\xff\"}},\"NodeNames\":[]}"),
      400, "UTF-8");
  add(f, "nesting 20000 deep", Req("POST", F, std::string(20000, '[') + std::string(20000, ']')), 400,
      "invalid extender request");
  add(f, "missing Pod", Req("POST", F, R"({"NodeNames":["n1"]})"), 400, "missing Pod");
  add(f, "Pod is null", Req("POST", F, R"({"Pod":null,"NodeNames":["n1"]})"), 400, "Pod is null");
  add(f, "Pod is a string", Req("POST", F, R"({"Pod":"p","NodeNames":["n1"]})"), 400, "Pod must be an object");
  add(f, "no NodeNames and no Nodes", Req("POST", F, json{{"Pod", Pod("1Gi")}}.dump()), 400,
      "neither NodeNames nor Nodes.items");
  add(f, "NodeNames is a string", Req("POST", F, json{{"Pod", Pod("1Gi")}, {"NodeNames", "n1"}}.dump()), 400,
      "NodeNames must be an array");
  add(f, "NodeNames holds numbers", Req("POST", F, json{{"Pod", Pod("1Gi")}, {"NodeNames", {1, 2}}}.dump()), 400,
      "NodeNames[] must be a string");
  add(f, "containers is an object",
      Req("POST", F, R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":{}}},"NodeNames":["n1"]})"), 400,
      "Pod.spec.containers must be an array");
  add(f, "limits is an array",
      Req("POST", F, R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":[]}}]}},"NodeNames":["n1"]})"),
      400, "limits must be an object");
  add(f, "quantity is an object", Req("POST", F, FilterBody(Pod(json::object()))), 400, "must be a quantity string");
  add(f, "quantity is true", Req("POST", F, FilterBody(Pod(true))), 400, "must be a quantity string");
  add(f, "metadata.name is a number", Req("POST", F, R"({"Pod":{"metadata":{"name":5}},"NodeNames":["n1"]})"), 400,
      "Pod.metadata.name must be a string");
  add(f, "negative quantity", Req("POST", F, FilterBody(Pod("-1Gi"))), 200, "negative amounts", Send::kRequest,
      unresolvable_everywhere);
  add(f, "fractional bytes (0.5)", Req("POST", F, FilterBody(Pod("0.5"))), 200, "not a whole number of bytes");
  add(f, "fractional bytes (1500m)", Req("POST", F, FilterBody(Pod("1500m"))), 200, "not a whole number of bytes");
  add(f, "2^63 bytes", Req("POST", F, FilterBody(Pod(quoted_min))), 200, "larger than the maximum");
  add(f, "1e400 bytes (string)", Req("POST", F, FilterBody(Pod("1e400"))), 200, "larger than the maximum");
  add(f, "1e400 bytes (JSON number)",
      Req("POST", F, R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":{"vramd.io/vram":1e400}}}]}},"NodeNames":["n1","n2"]})"),
      200, "larger than the maximum");
  add(f, "2^64 bytes (JSON number)",
      Req("POST", F, R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":{"vramd.io/vram":18446744073709551616}}}]}},"NodeNames":["n1"]})"),
      200, "larger than the maximum");
  add(f, "quantity with unknown suffix", Req("POST", F, FilterBody(Pod("12GB"))), 200, "unknown suffix");
  add(f, "quantity of 100 digits", Req("POST", F, FilterBody(Pod(std::string(100, '7')))), 200, "too long");
  {
    json pod = Pod("4Ei");
    pod["spec"]["containers"].push_back(pod["spec"]["containers"][0]);
    pod["spec"]["containers"].push_back(pod["spec"]["containers"][0]);
    add(f, "containers sum above 2^63", Req("POST", F, FilterBody(pod)), 200, "overflows 64 bits");
  }
  add(f, "gpu-count 0", Req("POST", F, FilterBody(Pod("1Gi", {{"vramd.io/gpu-count", "0"}}))), 200,
      "must be a whole number from 1 to 64");
  add(f, "gpu-count 65", Req("POST", F, FilterBody(Pod("1Gi", {{"vramd.io/gpu-count", "65"}}))), 200,
      "must be a whole number from 1 to 64");
  add(f, "gpu-count not a number", Req("POST", F, FilterBody(Pod("1Gi", {{"vramd.io/gpu-count", "two"}}))), 200,
      "must be a whole number");
  add(f, "gpu-count is a JSON number", Req("POST", F, FilterBody(Pod("1Gi", {{"vramd.io/gpu-count", 2}}))), 400,
      "must be a string");
  add(f, "vram-peak below the request", Req("POST", F, FilterBody(Pod("8Gi", {{"vramd.io/vram-peak", "4Gi"}}))), 200,
      "below the pod's VRAM request");
  add(f, "unknown nodes", Req("POST", F, FilterBody(Pod("1Gi"), {"nope-1", "nope-2"})), 200, "nope-1: ",
      Send::kRequest, unresolvable_everywhere);
  add(f, "duplicate node names", Req("POST", F, FilterBody(Pod("1Gi"), {"n1", "n1", "n2", "n1"})), 200,
      "\"NodeNames\":[\"n1\",\"n2\"]", Send::kRequest, [](const Answer& a) {
        json j = json::parse(a.body);
        EXPECT_EQ(j["NodeNames"], json::array({"n1", "n2"})) << "each node once";
      });
  add(f, "request larger than any GPU", Req("POST", F, FilterBody(Pod("100Gi"))), 200, "GPU too small for 100Gi (largest: 80Gi)",
      Send::kRequest, unresolvable_everywhere);

  // --- prioritize, preempt, bind
  const std::string p = "POST " + P;
  add(p, "malformed JSON", Req("POST", P, "{"), 400, "invalid extender request");
  add(p, "missing Pod", Req("POST", P, R"({"NodeNames":["n1"]})"), 400, "missing Pod");
  add(p, "negative quantity", Req("POST", P, FilterBody(Pod("-1Gi"))), 200, R"([{"Host":"n1","Score":0},)");
  add(p, "unknown node", Req("POST", P, FilterBody(Pod("1Gi"), {"nope"})), 200, R"([{"Host":"nope","Score":0}])");
  const std::string e = "POST " + E;
  add(e, "malformed JSON", Req("POST", E, "{\"Pod\""), 400, "invalid extender request");
  add(e, "victims not an object", Req("POST", E, json{{"Pod", Pod("1Gi")}, {"NodeNameToMetaVictims", {1}}}.dump()),
      400, "NodeNameToMetaVictims must be an object");
  add(e, "negative quantity",
      Req("POST", E, json{{"Pod", Pod("-1")}, {"NodeNameToMetaVictims", {{"n1", {{"Pods", {{{"UID", "x"}}}}}}}}}.dump()),
      400, "negative amounts");
  add(e, "victims on an unknown node",
      Req("POST", E, json{{"Pod", Pod("1Gi")}, {"NodeNameToMetaVictims", {{"nope", {{"Pods", {{{"UID", "x"}}}}}}}}}.dump()),
      200, R"({"NodeNameToMetaVictims":{}})");
  const std::string b = "POST " + B;
  add(b, "malformed JSON", Req("POST", B, "PodName=p"), 400, "invalid bind request");
  add(b, "missing fields", Req("POST", B, R"({"PodName":"p","Node":"n1"})"), 400,
      "PodName, PodNamespace, PodUID and Node are required");
  add(b, "PodUID is a number", Req("POST", B, R"({"PodName":"p","PodNamespace":"d","PodUID":7,"Node":"n1"})"), 400,
      "PodUID must be a string");
  add(b, "a pod no filter saw", Req("POST", B, R"({"PodName":"p","PodNamespace":"d","PodUID":"u-never","Node":"n1"})"),
      200, "was not seen by filter");
  // The filter call below is valid (it only teaches this replica the pod's
  // request, as kube-scheduler's filter does); the binds after it are not.
  add(f, "(setup) valid filter of a 100Gi pod", Req("POST", F, FilterBody(Pod("100Gi", nullptr, "u-big"))), 200,
      "GPU too small for 100Gi (largest: 80Gi)");
  add(b, "unknown node", Req("POST", B, R"({"PodName":"p-u-big","PodNamespace":"default","PodUID":"u-big","Node":"nope"})"),
      200, "node nope: ");
  add(b, "pod larger than the node's GPUs",
      Req("POST", B, R"({"PodName":"p-u-big","PodNamespace":"default","PodUID":"u-big","Node":"n1"})"), 200,
      "largest GPU capacity is 80Gi");

  // --- the /v1 API
  const std::string u = "PUT /v1/nodes/{node}/usage";
  const std::string U1 = "/v1/nodes/n1/usage", U2 = "/v1/nodes/n2/usage";
  add(u, "no token", Req("PUT", U1, R"({"gpus":{"0":1}})"), 401, "bearer token is required");
  add(u, "wrong token", Req("PUT", U1, R"({"gpus":{"0":1}})", Auth::kWrong), 401, "bearer token is required");
  add(u, "token without \"Bearer \"", Req("PUT", U1, R"({"gpus":{"0":1}})", Auth::kNone,
      std::string("Authorization: ") + kToken + "\r\n"), 401, "bearer token is required");
  add(u, "malformed JSON", Req("PUT", U1, "{gpus:", Auth::kToken), 400, "not valid JSON");
  add(u, "not an object", Req("PUT", U1, "[]", Auth::kToken), 400, "body must be");
  add(u, "missing gpus", Req("PUT", U1, "{}", Auth::kToken), 400, "body must be");
  // (issue 14: an array is now the agent's report, so [1] is refused for its element)
  add(u, "gpus is an array of numbers", Req("PUT", U1, R"({"gpus":[1]})", Auth::kToken), 400,
      "gpus[0] must be an object");
  add(u, "gpus is empty", Req("PUT", U1, R"({"gpus":{}})", Auth::kToken), 400, "non-empty object");
  add(u, "GPU index -1", Req("PUT", U1, R"({"gpus":{"-1":1}})", Auth::kToken), 400, "GPU index \"-1\" is not a whole number");
  add(u, "GPU index \"x\"", Req("PUT", U1, R"({"gpus":{"x":1}})", Auth::kToken), 400, "is not a whole number");
  add(u, "GPU index 1.5", Req("PUT", U1, R"({"gpus":{"1.5":1}})", Auth::kToken), 400, "is not a whole number");
  add(u, "GPU index 99999", Req("PUT", U1, R"({"gpus":{"99999":1}})", Auth::kToken), 400, "is not a whole number");
  add(u, "GPU the node does not have", Req("PUT", U2, R"({"gpus":{"1":1}})", Auth::kToken), 400, "node n2 has no GPU 1");
  add(u, "GPU given twice (\"0\", \"00\")", Req("PUT", U1, R"({"gpus":{"0":1,"00":2}})", Auth::kToken), 400,
      "given more than once");
  add(u, "negative bytes", Req("PUT", U1, R"({"gpus":{"0":-1}})", Auth::kToken), 400, "is negative");
  add(u, "fractional bytes", Req("PUT", U1, R"({"gpus":{"0":1.5}})", Auth::kToken), 400,
      "must be a byte count or a quantity string");
  add(u, "2^63 bytes", Req("PUT", U1, R"({"gpus":{"0":9223372036854775808}})", Auth::kToken), 400,
      "larger than 2^63-1 bytes");
  add(u, "1e400 bytes", Req("PUT", U1, R"({"gpus":{"0":1e400}})", Auth::kToken), 400, "not valid JSON");
  add(u, "quantity \"0.5\"", Req("PUT", U1, R"({"gpus":{"0":"0.5"}})", Auth::kToken), 400, "not a whole number of bytes");
  add(u, "bytes is null", Req("PUT", U1, R"({"gpus":{"0":null}})", Auth::kToken), 400,
      "must be a byte count or a quantity string");
  // (issue 14: a report for a node vramd does not know is a 400, no longer a 404)
  add(u, "unknown node", Req("PUT", "/v1/nodes/nope/usage", R"({"gpus":{"0":1}})", Auth::kToken), 400,
      "node nope is not in the ledger");
  add(u, "v2: used > total", Req("PUT", U1, R"({"version":2,"gpus":[{"index":0,"total_bytes":10,"used_bytes":11}]})",
      Auth::kToken), 400, "GPU 0: used_bytes 11 is larger than total_bytes 10");
  add(u, "v2: GPU the node does not have", Req("PUT", U2, R"({"gpus":[{"index":1,"total_bytes":10,"used_bytes":1}]})",
      Auth::kToken), 400, "node n2 has no GPU 1");
  add(u, "v2: malformed pod uid", Req("PUT", U1,
      R"({"gpus":[{"index":0,"total_bytes":10,"used_bytes":1,"pods":[{"uid":"x y","used_bytes":1}]}]})", Auth::kToken),
      400, "is not a canonical UID");
  add(u, "v2: NaN", Req("PUT", U1, R"({"gpus":[{"index":0,"total_bytes":10,"used_bytes":NaN}]})", Auth::kToken), 400,
      "not valid JSON");
  add(u, "nesting 20000 deep", Req("PUT", U1, std::string(20000, '[') + std::string(20000, ']'), Auth::kToken), 400,
      "body must be");
  add("GET /v1/nodes/{node}", "unknown node", Req("GET", "/v1/nodes/nope"), 404, "node nope is not in the ledger");
  add("GET /v1/nodes/{node}", "invalid UTF-8 in the name", Req("GET", "/v1/nodes/%FF%FE"), 404, "is not in the ledger");

  const std::string l = "POST /v1/locks/{node}/{gpu}/...";
  const std::string A = "/v1/locks/n1/0/acquire", H = "/v1/locks/n1/0/heartbeat", R = "/v1/locks/n1/0/release";
  const std::string owner = R"({"owner":"pod-1/w0"})";
  add(l, "acquire without a token", Req("POST", A, owner), 401, "bearer token is required");
  add(l, "acquire with a wrong token", Req("POST", A, owner, Auth::kWrong), 401, "bearer token is required");
  add(l, "release without a token", Req("POST", R, owner), 401, "bearer token is required");
  add(l, "malformed JSON", Req("POST", A, "{owner", Auth::kToken), 400, "body is not valid JSON");
  add(l, "empty body", Req("POST", A, "", Auth::kToken), 400, "body is not valid JSON");
  add(l, "not an object", Req("POST", A, R"("pod-1/w0")", Auth::kToken), 400, "must be a JSON object");
  add(l, "missing owner", Req("POST", A, R"({"ttl_seconds":5})", Auth::kToken), 400, "owner is required");
  add(l, "owner is a number", Req("POST", A, R"({"owner":5})", Auth::kToken), 400, "owner must be a string");
  add(l, "owner without a slash", Req("POST", A, R"({"owner":"pod-1"})", Auth::kToken), 400, "POD_UID/INSTANCE");
  add(l, "owner of 300 characters", Req("POST", A, json{{"owner", "p/" + std::string(300, 'x')}}.dump(), Auth::kToken),
      400, "1 to 128 characters");
  add(l, "ttl_seconds negative", Req("POST", A, R"({"owner":"pod-1/w0","ttl_seconds":-5})", Auth::kToken), 400,
      "ttl_seconds must be from 0.1 to 86400 seconds");
  add(l, "ttl_seconds 1e400", Req("POST", A, R"({"owner":"pod-1/w0","ttl_seconds":1e400})", Auth::kToken), 400,
      "body is not valid JSON");
  add(l, "ttl_seconds is a string", Req("POST", A, R"({"owner":"pod-1/w0","ttl_seconds":"30"})", Auth::kToken), 400,
      "must be a number of seconds");
  add(l, "wait_seconds on heartbeat", Req("POST", H, R"({"owner":"pod-1/w0","wait_seconds":1})", Auth::kToken), 400,
      "unknown field \"wait_seconds\"");
  add(l, "misspelt field", Req("POST", A, R"({"owner":"pod-1/w0","tll_seconds":5})", Auth::kToken), 400,
      "unknown field \"tll_seconds\"");
  add(l, "unknown field of invalid UTF-8 cut at 64 bytes",
      Req("POST", A, "{\"owner\":\"pod-1/w0\",\"" + std::string(63, 'k') + "\xc3\xa9\":1}", Auth::kToken), 400,
      "unknown field");
  add(l, "GPU index \"x\"", Req("POST", "/v1/locks/n1/x/acquire", owner, Auth::kToken), 400, "is not a whole number");
  add(l, "GPU index 5000", Req("POST", "/v1/locks/n1/5000/acquire", owner, Auth::kToken), 400,
      "GPU index must be from 0 to 1023");
  add(l, "GPU index of invalid UTF-8", Req("POST", "/v1/locks/n1/%FF/acquire", owner, Auth::kToken), 400,
      "is not a whole number");
  add(l, "node name with braces", Req("POST", "/v1/locks/n%7B1%7D/0/acquire", owner, Auth::kToken), 400,
      "node name must be");
  add(l, "heartbeat of a lock not held", Req("POST", H, owner, Auth::kToken), 409, "");
  add(l, "release of a lock not held", Req("POST", R, owner, Auth::kToken), 409, "not the owner");

  // --- HTTP itself
  const std::string h = "HTTP";
  add(h, "unknown path", Req("GET", "/nope"), 404, "no such endpoint: GET /nope");
  add(h, "unknown path of invalid UTF-8 (aborted vramd before)", Req("GET", "/%FF%FE"), 404, "no such endpoint: GET /");
  add(h, "GET on a POST route", Req("GET", F), 404, "no such endpoint: GET /scheduler/filter");
  add(h, "POST on a PUT route", Req("POST", U1, R"({"gpus":{"0":1}})", Auth::kToken), 404,
      "no such endpoint: POST /v1/nodes/n1/usage");
  add(h, "DELETE /v1/nodes", Req("DELETE", "/v1/nodes"), 404, "no such endpoint: DELETE /v1/nodes");
  add(h, "unknown method", Req("BREW", "/healthz"), 400, "malformed HTTP request");
  add(h, "not HTTP", "hello\r\n\r\n", 400, "malformed HTTP request");
  add(h, "URI of 10000 bytes", Req("GET", "/v1/nodes/" + std::string(10000, 'a')), 414, "request URI longer than the limit");
  add(h, "header line of 10000 bytes", Req("GET", "/healthz", "", Auth::kNone, "X-Big: " + std::string(10000, 'b') + "\r\n"),
      400, "malformed HTTP request");
  add(h, "body over the limit (Content-Length)", Req("POST", F, std::string(kMaxBody + 1, ' ')), 413,
      "request body larger than the limit of 65536 bytes");
  {
    std::string chunked = "POST " + F + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 20; ++i) chunked += "1000\r\n" + std::string(4096, ' ') + "\r\n";
    chunked += "0\r\n\r\n";
    add(h, "chunked body (over the limit)", chunked, 411, "send the request body with a Content-Length");
  }
  add(h, "Content-Length not a number",
      "POST " + F + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: lots\r\n\r\n{}", 400,
      "no JSON found");
  // httplib answers if it reads the request before it sees the EOF, and
  // otherwise drops the connection as gone: both are right.
  add(h, "complete request, then half-close", Req("GET", "/healthz"), 0, "", Send::kHalfClose);
  c.back().or_status = 200;
  add(h, "half a request line, then half-close", "GET /hea", 0, "", Send::kHalfClose);
  add(h, "connects, sends nothing", "", 0, "", Send::kStall);
  add(h, "half the headers, then stall", "GET /healthz HTTP/1.1\r\nHost: x\r\n", 400, "malformed HTTP request",
      Send::kStall);
  add(h, "half the body, then stall",
      "POST " + F + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"Pod\":",
      400, "malformed HTTP request", Send::kStall);
  return c;
}

std::string Cell(std::string s) {
  for (char& ch : s) {
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  std::string out;
  for (char ch : s) {
    if (ch == '|') out += "\\|";
    else out += ch;
  }
  if (out.size() > 160) out = out.substr(0, 157) + "...";
  return out;
}

std::string AnswerCell(const Case& c, const Answer& a) {
  if (c.or_status >= 0) {
    return "answered (" + std::to_string(c.or_status) + ") or not, as the server reads the request before or after the "
           "EOF; closed at once";
  }
  if (c.send == Send::kStall && a.status == 0) return "connection closed after `read_timeout_ms`, no response";
  if (a.status == 0) return "connection closed at once, no response";
  std::string after = c.send == Send::kStall ? " after `read_timeout_ms`, then the connection is closed" : "";
  std::string msg = Message(a);
  // Valid UTF-8 only in the table (an echoed name may not be).
  msg = json::parse(json(msg).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
  return "`" + Cell(msg) + "`" + after;
}

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("VRAMD_TEST_VALKEY_URL");
    if (url == nullptr || *url == '\0') GTEST_FAIL() << "VRAMD_TEST_VALKEY_URL is not set (see scripts/test.sh)";
    fs::path vramd = fs::path(VRAMD_BIN_DIR) / "vramd";
    ASSERT_TRUE(fs::exists(vramd)) << "build vramd first (cmake --build build --target vramd)";
    char tmpl[] = "/tmp/vramd-badinput.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::mt19937_64 rng(std::random_device{}());
    prefix_ = "vramdtest-bad-" + std::to_string(rng() % 1'000'000'000'000ULL);
    store::ValkeyOptions opts;
    opts.url = url;
    opts.key_prefix = prefix_;
    client_ = store::NewValkeyClient(opts);

    std::ofstream(dir_ / "token") << kToken << "\n";
    std::ofstream(dir_ / "vramd.json") << json{{"nodes", {{{"name", "n1"}, {"gpus", {"80Gi", "80Gi"}}},
                                                          {{"name", "n2"}, {"gpus", {"24Gi"}}}}},
                                               {"log", {{"level", "warn"}}}}
                                               .dump();
    port_ = FreePort();
    ASSERT_GT(port_, 0);
    std::vector<std::string> args = {vramd.string(),
                                     "--config", (dir_ / "vramd.json").string(),
                                     "--no-kube",
                                     "--valkey", url,
                                     "--key-prefix", prefix_,
                                     "--listen", "127.0.0.1:" + std::to_string(port_),
                                     "--max-body-bytes", std::to_string(kMaxBody),
                                     "--read-timeout-ms", std::to_string(kReadTimeoutMs),
                                     "--http-threads", std::to_string(kHttpThreads),
                                     "--api-token-file", (dir_ / "token").string()};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, (dir_ / "vramd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    itest::CleanEnv env;  // none of the caller's VRAMD_* (issue 18)
    ASSERT_EQ(posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), env.envp()), 0);
    posix_spawn_file_actions_destroy(&fa);
    // Up, with both static nodes in the ledger.
    auto until = Steady::now() + std::chrono::seconds(20);
    while (Steady::now() < until) {
      Answer a = Exchange(port_, Req("GET", "/v1/nodes"), Send::kRequest, 2000);
      json j = json::parse(a.body, nullptr, false);
      if (a.status == 200 && !j.is_discarded() && j["nodes"].size() == 2) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(Get("/v1/nodes").size(), 2u) << "vramd did not come up: " << ReadFile(dir_ / "vramd.log");
  }

  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int st = 0;
      auto until = Steady::now() + std::chrono::seconds(15);
      pid_t r = 0;
      while ((r = waitpid(pid_, &st, WNOHANG)) == 0 && Steady::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (r == 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &st, 0);
        ADD_FAILURE() << "vramd did not stop on SIGTERM";
      } else {
        EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
            << "vramd exited with status " << st << ": " << ReadFile(dir_ / "vramd.log");
      }
    }
    if (client_) {
      auto r = client_->Command({"KEYS", prefix_ + ":*"});
      if (r.ok()) {
        std::vector<std::string> del{"DEL"};
        for (const auto& k : r->elements) del.push_back(k.str);
        if (del.size() > 1) (void)client_->Command(del);
      }
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // The JSON of a GET (null when the answer is not 200 JSON).
  json Get(const std::string& path) {
    Answer a = Exchange(port_, Req("GET", path), Send::kRequest, 5000);
    if (a.status != 200) return nullptr;
    json j = json::parse(a.body, nullptr, false);
    if (j.is_discarded()) return nullptr;
    return path == "/v1/nodes" ? j["nodes"] : j;
  }
  json Ledger() {
    Answer a = Exchange(port_, Req("GET", "/v1/nodes"), Send::kRequest, 5000);
    return json::parse(a.body, nullptr, false);
  }
  bool Healthy(double* took_s = nullptr) {
    auto t0 = Steady::now();
    Answer a = Exchange(port_, Req("GET", "/healthz"), Send::kRequest, 5000);
    if (took_s) *took_s = Seconds(Steady::now() - t0);
    return a.status == 200;
  }

  fs::path dir_;
  std::string prefix_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::shared_ptr<store::ValkeyClient> client_;
};

TEST_F(BadInput, EveryCaseGetsAClearAnswerAndLeavesTheLedgerUntouched) {
  const json ledger0 = Ledger();
  const json locks0 = Get("/v1/locks");
  ASSERT_TRUE(ledger0.is_object() && ledger0.contains("epoch")) << ledger0;
  ASSERT_TRUE(locks0.is_object()) << locks0;

  std::string table =
      "| endpoint | request | status | answer |\n"
      "|---|---|---|---|\n";
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.endpoint + ": " + c.what);
    Answer a = Exchange(port_, c.raw, c.send, 15'000);
    EXPECT_FALSE(a.timed_out) << "no answer, or the server kept the connection open";
    if (c.or_status < 0 || a.status != c.or_status) {
      EXPECT_EQ(a.status, c.status) << a.body;
    }
    if (a.status != 0 && a.status != c.or_status) {
      EXPECT_FALSE(json::parse(a.body, nullptr, false).is_discarded()) << "not a JSON body: " << a.body;
      EXPECT_THAT(a.body + " " + Message(a), HasSubstr(c.says));
    }
    const double timeout_s = kReadTimeoutMs / 1000.0;
    if (c.send == Send::kStall) {
      // Cut off after the read timeout (an answer if a request had begun),
      // and closed one idle keep-alive period (= the read timeout) later.
      if (a.status != 0) {
        EXPECT_GE(a.answered_after_s, 0.8 * timeout_s) << "answered before the read timeout";
      }
      EXPECT_GE(a.closed_after_s, 0.8 * timeout_s) << "cut off before the read timeout";
      EXPECT_LE(a.closed_after_s, 2 * timeout_s + 3.0) << "cut off long after the read timeout";
    }
    if (c.send == Send::kHalfClose) {
      EXPECT_GE(a.closed_after_s, 0) << "not closed";
      EXPECT_LT(a.closed_after_s, timeout_s) << "an EOF should end the connection at once";
    }
    if (c.check && a.status == c.status) c.check(a);
    EXPECT_EQ(Ledger(), ledger0) << "the ledger (or its epoch) changed";
    EXPECT_EQ(Get("/v1/locks"), locks0) << "the locks changed";
    EXPECT_TRUE(Healthy()) << "/healthz stopped answering";
    std::string status = c.or_status >= 0 ? std::to_string(c.or_status) + " or —" : a.status ? std::to_string(a.status) : "—";
    table += "| " + Cell(c.endpoint) + " | " + Cell(c.what) + " | " + status +
             " | " + AnswerCell(c, a) + " |\n";
  }

  // Controls: a good usage report and a good lock call do change the state,
  // so the comparisons above could see a change.
  Answer u = Exchange(port_, Req("PUT", "/v1/nodes/n1/usage", R"({"gpus":{"0":"10Gi"}})", Auth::kToken),
                      Send::kRequest, 5000);
  EXPECT_EQ(u.status, 200) << u.body;
  EXPECT_NE(Ledger()["epoch"], ledger0["epoch"]) << "a valid usage report moves the epoch";
  Answer l = Exchange(port_, Req("POST", "/v1/locks/n1/0/acquire", R"({"owner":"pod-1/w0"})", Auth::kToken),
                      Send::kRequest, 5000);
  EXPECT_EQ(l.status, 200) << l.body;
  EXPECT_NE(Get("/v1/locks"), locks0);

  // The table in docs/operations.md is this run's.
  const fs::path doc = fs::path(VRAMD_TEST_DATA) / ".." / ".." / "docs" / "operations.md";
  const std::string begin = "<!-- bad-input-table: generated by tests/integration/bad_input_test.cc -->\n";
  const std::string end = "<!-- end of bad-input-table -->\n";
  std::string text = ReadFile(doc);
  size_t b = text.find(begin), e = text.find(end);
  const bool update = std::getenv("VRAMD_TEST_UPDATE_DOCS") != nullptr;
  if (::testing::Test::HasFailure()) return;  // never write a table from a failing run
  ASSERT_TRUE(b != std::string::npos && e != std::string::npos && b < e)
      << doc << " has no bad-input table markers";
  std::string current = text.substr(b + begin.size(), e - b - begin.size());
  if (current != table) {
    if (update) {
      std::ofstream(doc) << text.substr(0, b + begin.size()) + table + text.substr(e);
    } else {
      ADD_FAILURE() << "the bad-input table in " << doc << " is not what the cases produce; rewrite it with\n"
                    << "  VRAMD_TEST_UPDATE_DOCS=1 build/bin/integration_tests --gtest_filter='BadInput.*'\n"
                    << "generated:\n"
                    << table;
    }
  }
}

// kube-scheduler's Go client sends Accept-Encoding: gzip on every extender
// call; vramd answers JSON uncompressed (compressing costs CPU at both ends
// of a loopback or cluster-network hop; see kJsonContentType).
TEST_F(BadInput, JsonAnswersAreNotCompressedWhenTheClientAcceptsGzip) {
  const std::string gzip = "Accept-Encoding: gzip, deflate, br\r\n";
  std::vector<std::string> names;
  for (int i = 0; i < 400; ++i) names.push_back(i % 2 ? "n1" : "n2");  // a large, very compressible body
  const std::string filter = FilterBody(Pod("1Gi"), json{"n1", "n2", "nowhere"});
  const struct {
    const char* what;
    std::string raw;
    int status;
  } cases[] = {
      {"filter", Req("POST", "/scheduler/filter", filter, Auth::kNone, gzip), 200},
      {"prioritize", Req("POST", "/scheduler/prioritize", filter, Auth::kNone, gzip), 200},
      {"an error answer", Req("POST", "/scheduler/filter", FilterBody(Pod("1Gi"), names) + "x", Auth::kNone, gzip),
       400},
      {"/v1/nodes", Req("GET", "/v1/nodes", "", Auth::kToken, gzip), 200},
  };
  for (const auto& c : cases) {
    Answer a = Exchange(port_, c.raw, Send::kRequest, 5000);
    EXPECT_EQ(a.status, c.status) << c.what << ": " << a.body;
    EXPECT_THAT(a.head, HasSubstr("Content-Type: application/json; charset=utf-8")) << c.what;
    EXPECT_EQ(a.head.find("Content-Encoding"), std::string::npos) << c.what << " was compressed:\n" << a.head;
    EXPECT_FALSE(json::parse(a.body, nullptr, false).is_discarded()) << c.what << ": not plain JSON";
  }
}

TEST_F(BadInput, StalledClientsAreCutOffAndDoNotStopTheServer) {
  // A few stalled connections: others are served at once.
  std::vector<int> stalled;
  for (int i = 0; i < kHttpThreads - 1; ++i) {
    int fd = Connect(port_);
    ASSERT_GE(fd, 0);
    const std::string half = "POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{";
    ASSERT_EQ(send(fd, half.data(), half.size(), MSG_NOSIGNAL), static_cast<ssize_t>(half.size()));
    stalled.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  double took = 0;
  EXPECT_TRUE(Healthy(&took));
  EXPECT_LT(took, 0.9) << "a stalled client held up another one";
  // Each stalled connection gets a 400 after the read timeout and is closed
  // one idle keep-alive period later.
  for (int fd : stalled) {
    std::string in;
    bool closed = false;
    auto until = Steady::now() + std::chrono::milliseconds(3 * kReadTimeoutMs + 5000);
    while (!closed && Steady::now() < until) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 100) != 1) continue;
      char buf[512];
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n > 0) in.append(buf, static_cast<size_t>(n));
      else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) closed = true;
    }
    EXPECT_TRUE(closed) << "not closed by the server";
    EXPECT_THAT(in, HasSubstr("400 Bad Request"));
    close(fd);
  }

  // Twice as many stalled connections as http_threads: each connection has a
  // thread of its own (issue 30), so the others are still served at once.
  stalled.clear();
  for (int i = 0; i < 2 * kHttpThreads; ++i) {
    int fd = Connect(port_);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(send(fd, "GET /healthz HTTP/1.1\r\n", 23, MSG_NOSIGNAL), 23);
    stalled.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(Healthy(&took));
  EXPECT_LT(took, 0.9) << "stalled clients held up another one";
  for (int fd : stalled) close(fd);
  EXPECT_TRUE(Healthy());
}

}  // namespace
}  // namespace vramd
