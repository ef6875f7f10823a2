// The admission webhook's latency (issue 34: < 5 ms p99), as the API server
// meets it: one kept-alive connection on loopback, AdmissionReviews of a
// typical Deployment pod (two containers, a VRAM limit, a few labels and
// annotations) to /admission/mutate and /admission/validate, one after the
// other. Prints mean, p50, p99, p99.9 and max per endpoint (ms).
//   build/bin/admission_bench [--requests N]
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "vramd/http/routes.h"
#include "vramd/http/server.h"
#include "vramd/metrics/registry.h"

namespace {

const char* kPod = R"({"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"llama-infer-7d9f8c6b5-",
"namespace":"team-a","labels":{"app":"llama-infer","pod-template-hash":"7d9f8c6b5","team":"a"},
"annotations":{"vramd.io/model":"llama-3-8b","vramd.io/vram-peak":"30Gi","prometheus.io/scrape":"true"},
"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"llama-infer-7d9f8c6b5",
"uid":"5f0e8c1a-8f5e-4c1e-9d55-2b8f0c9b8e11","controller":true,"blockOwnerDeletion":true}]},
"spec":{"containers":[{"name":"infer","image":"registry.example/llama-infer:1.4","args":["--port","8000"],
"ports":[{"containerPort":8000,"protocol":"TCP"}],"env":[{"name":"MODEL","value":"/models/llama"}],
"resources":{"limits":{"vramd.io/vram":"24Gi","cpu":"4","memory":"32Gi"},"requests":{"cpu":"2","memory":"16Gi"}},
"volumeMounts":[{"name":"models","mountPath":"/models"}]},{"name":"metrics","image":"registry.example/exporter:2",
"resources":{"limits":{"cpu":"100m","memory":"64Mi"}}}],"volumes":[{"name":"models","persistentVolumeClaim":
{"claimName":"models"}}],"restartPolicy":"Always","terminationGracePeriodSeconds":60,"dnsPolicy":"ClusterFirst",
"serviceAccountName":"default","priority":0,"enableServiceLinks":true}})";

std::string Review() {
  return std::string(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{)"
                     R"("uid":"705ab4f5-6393-11e8-b7cc-42010a800002","kind":{"group":"","version":"v1","kind":"Pod"},)"
                     R"("resource":{"group":"","version":"v1","resource":"pods"},"namespace":"team-a",)"
                     R"("operation":"CREATE","userInfo":{"username":"system:serviceaccount:kube-system:replicaset-controller",)"
                     R"("groups":["system:serviceaccounts","system:authenticated"]},"object":)") +
         kPod + "}}";
}

double Percentile(std::vector<double> v, double p) {
  size_t k = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  int n = 20000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--requests") n = std::atoi(argv[++i]);
  }
  vramd::metrics::Registry registry;
  vramd::http::ServerOptions so;
  so.host = "127.0.0.1";
  so.port = 0;
  vramd::http::Server server(so, &registry);
  vramd::http::AdmissionServices svc;
  svc.policy.vramd_users = {"system:serviceaccount:vramd-system:vramd"};
  svc.policy.scheduler_name = "vramd-scheduler";
  vramd::http::RegisterAdmissionRoutes(server, svc);
  if (!server.Start().ok()) return 1;
  httplib::Client cli("127.0.0.1", server.port());
  cli.set_keep_alive(true);
  cli.set_tcp_nodelay(true);  // as the API server's Go client (no 40 ms delayed-ACK stalls)
  const std::string body = Review();
  std::printf("admission_bench: %d requests per endpoint, one kept-alive connection, a %zu-byte review\n", n,
              body.size());
  for (const char* path : {"/admission/mutate", "/admission/validate"}) {
    std::vector<double> ms;
    ms.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n + n / 10; ++i) {  // the first tenth warms up
      auto t0 = std::chrono::steady_clock::now();
      auto r = cli.Post(path, body, "application/json");
      auto t1 = std::chrono::steady_clock::now();
      if (!r || r->status != 200) {
        std::fprintf(stderr, "admission_bench: %s failed\n", path);
        return 1;
      }
      if (i >= n / 10) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    double sum = 0;
    for (double x : ms) sum += x;
    std::printf("%-22s mean=%.3f p50=%.3f p99=%.3f p99.9=%.3f max=%.3f ms\n", path, sum / static_cast<double>(ms.size()),
                Percentile(ms, 50), Percentile(ms, 99), Percentile(ms, 99.9), *std::max_element(ms.begin(), ms.end()));
  }
  server.Stop();
  return 0;
}
