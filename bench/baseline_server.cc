// The limit (issue 6, item 2): a cpp-httplib server that only decodes an
// extender request and echoes its node names back, configured like vramd's
// server (TCP_NODELAY on, keep-alive, a pool of the same number of threads).
//
//   baseline_server --parser simdjson|nlohmann|nlohmann-sax [--listen 127.0.0.1:PORT] [--threads 8]
//                   [--bind-api https://HOST:PORT --bind-token-file F --bind-ca-file F]
//
// POST /scheduler/filter      -> ExtenderFilterResult keeping every name
// POST /scheduler/prioritize  -> HostPriorityList, every host scored 0
// POST /scheduler/bind        -> (with --bind-api only) creates the pod's
//                                Binding, nothing else: what any extender that
//                                binds must do at least (issue 17)
// GET  /healthz               -> ok
#include <httplib.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>

#include "echo_codecs.h"

namespace {

// The answers' content type, as vramd writes it (src/http/server.cc). With a
// bare "application/json" cpp-httplib gzips every answer to a client that
// accepts gzip, as Go's HTTP client (kube-scheduler's) always says it does:
// the "do-nothing" echo then spent ~70 us deflating each small answer (and
// kube-scheduler as long inflating it), where vramd, whose type carries the
// charset, never compresses. Before 2026-11-27 the echo did; see
// docs/performance.md, issue 17, "The echo gzipped its answers".
constexpr const char* kJson = "application/json; charset=utf-8";

enum class Parser { kSimdjson, kNlohmann, kNlohmannSax };

int Usage() {
  std::fprintf(stderr,
               "usage: baseline_server --parser simdjson|nlohmann|nlohmann-sax "
               "[--listen HOST:PORT] [--threads N] "
               "[--bind-api https://HOST:PORT --bind-token-file F --bind-ca-file F]\n");
  return 2;
}

// Turns a filter result {"NodeNames":[...],...} into a HostPriorityList.
std::string PrioritiesFromEcho(std::string_view filter_result) {
  std::string out = "[";
  size_t p = filter_result.find('[');
  size_t end = filter_result.find(']', p);
  bool first = true;
  while (p != std::string_view::npos && p < end) {
    size_t q1 = filter_result.find('"', p);
    if (q1 == std::string_view::npos || q1 > end) break;
    size_t q2 = filter_result.find('"', q1 + 1);
    if (!first) out += ',';
    first = false;
    out += "{\"Host\":";
    out.append(filter_result.substr(q1, q2 - q1 + 1));
    out += ",\"Score\":0}";
    p = q2 + 1;
  }
  out += ']';
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  std::string t = s.str();
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  return t;
}

// The bind verb of a do-nothing extender: one Binding POST per call, over a
// keep-alive TLS connection per server thread (as vramd's client pool).
struct Binder {
  std::string host;
  int port = 0;
  std::string token, ca_file;

  std::string Bind(std::string_view body) const {
    nlohmann::json a = nlohmann::json::parse(body, nullptr, false);
    if (a.is_discarded() || !a.is_object()) return R"({"Error":"invalid JSON"})";
    const std::string ns = a.value("PodNamespace", ""), name = a.value("PodName", "");
    nlohmann::json binding = {{"apiVersion", "v1"},
                              {"kind", "Binding"},
                              {"metadata", {{"name", name}, {"uid", a.value("PodUID", "")}}},
                              {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", a.value("Node", "")}}}};
    thread_local std::unique_ptr<httplib::SSLClient> client;
    if (!client) {
      client = std::make_unique<httplib::SSLClient>(host, port);
      client->set_ca_cert_path(ca_file.c_str());
      client->enable_server_certificate_verification(true);
      client->set_keep_alive(true);
      client->set_tcp_nodelay(true);
    }
    httplib::Headers h{{"Authorization", "Bearer " + token}};
    auto r = client->Post(("/api/v1/namespaces/" + ns + "/pods/" + name + "/binding").c_str(), h, binding.dump(),
                          "application/json");
    if (!r) {
      client.reset();
      return R"({"Error":"the Binding request failed"})";
    }
    if (r->status != 201 && r->status != 200) {
      return nlohmann::json{{"Error", "Binding: HTTP " + std::to_string(r->status)}}.dump();
    }
    return R"({"Error":""})";
  }
};

}  // namespace

int main(int argc, char** argv) {
  Parser parser = Parser::kSimdjson;
  bool have_parser = false;
  std::string host = "127.0.0.1";
  int port = 0;
  int threads = 8;  // vramd's default http_threads
  Binder binder;
  std::string bind_api;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--parser") {
      std::string p = next();
      have_parser = true;
      if (p == "simdjson") parser = Parser::kSimdjson;
      else if (p == "nlohmann") parser = Parser::kNlohmann;
      else if (p == "nlohmann-sax") parser = Parser::kNlohmannSax;
      else return Usage();
    } else if (a == "--listen") {
      std::string l = next();
      size_t c = l.rfind(':');
      if (c == std::string::npos) return Usage();
      host = l.substr(0, c);
      port = std::atoi(l.c_str() + c + 1);
    } else if (a == "--bind-api") {
      bind_api = next();
      const std::string prefix = "https://";
      if (bind_api.rfind(prefix, 0) != 0) return Usage();
      std::string hp = bind_api.substr(prefix.size());
      size_t c = hp.rfind(':');
      if (c == std::string::npos) return Usage();
      binder.host = hp.substr(0, c);
      binder.port = std::atoi(hp.c_str() + c + 1);
    } else if (a == "--bind-token-file") {
      binder.token = ReadAll(next());
    } else if (a == "--bind-ca-file") {
      binder.ca_file = next();
    } else if (a == "--threads") {
      threads = std::atoi(next().c_str());
      if (threads < 1) return Usage();
    } else {
      return Usage();
    }
  }
  if (!have_parser) return Usage();
  signal(SIGPIPE, SIG_IGN);

  httplib::Server server;
  server.set_tcp_nodelay(true);
  server.set_keep_alive_max_count(100000);
  server.set_keep_alive_timeout(30);
  server.set_payload_max_length(4 << 20);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };

  auto echo = [parser](std::string_view body, std::string* out) {
    switch (parser) {
      case Parser::kNlohmann: return vramd::bench::EchoNlohmannDom(body, out);
      case Parser::kNlohmannSax: return vramd::bench::EchoNlohmannSax(body, out);
      case Parser::kSimdjson: {
        thread_local vramd::bench::SimdjsonEcho simd;
        return simd.Echo(body, out);
      }
    }
    return false;
  };
  server.Post("/scheduler/filter", [&](const httplib::Request& req, httplib::Response& res) {
    std::string out;
    if (!echo(req.body, &out)) {
      res.status = 400;
      res.set_content("{\"Error\":\"invalid JSON\"}", kJson);
      return;
    }
    res.set_content(std::move(out), kJson);
  });
  server.Post("/scheduler/prioritize", [&](const httplib::Request& req, httplib::Response& res) {
    std::string out;
    if (!echo(req.body, &out)) {
      res.status = 400;
      res.set_content("{\"Error\":\"invalid JSON\"}", kJson);
      return;
    }
    res.set_content(PrioritiesFromEcho(out), kJson);
  });
  if (!bind_api.empty()) {
    server.Post("/scheduler/bind", [&binder](const httplib::Request& req, httplib::Response& res) {
      res.set_content(binder.Bind(req.body), kJson);
    });
  }
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });

  if (port == 0) {
    port = server.bind_to_any_port(host);
  } else if (!server.bind_to_port(host, port)) {
    port = -1;
  }
  if (port < 0) {
    std::fprintf(stderr, "baseline_server: cannot listen on %s\n", host.c_str());
    return 1;
  }
  std::printf("baseline_server listening on %s:%d\n", host.c_str(), port);
  std::fflush(stdout);
  server.listen_after_bind();
  return 0;
}
