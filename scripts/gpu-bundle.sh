#!/usr/bin/env bash
# Bundles a built vramd-agent with its loader and every shared library it
# links, so it runs on a GPU host of another distribution (docs/agent.md, the
# GPU check): OUT/vramd-agent is a wrapper that starts OUT/bin/vramd-agent
# through OUT/lib/ld-linux-x86-64.so.2 --library-path OUT/lib. NVML itself is
# not bundled: the agent loads the host driver's libnvidia-ml.so.1 (dlopen
# searches the library path, then the host's ld.so.cache).
#   scripts/gpu-bundle.sh OUT [AGENT]      AGENT default: build/bin/vramd-agent
#   scripts/gpu-check.sh --agent OUT/vramd-agent     (on the GPU host)
set -euo pipefail
out=${1:?usage: scripts/gpu-bundle.sh OUT [AGENT]}
agent=${2:-$(dirname "$0")/../build/bin/vramd-agent}
[[ -x "$agent" ]] || { echo "gpu-bundle: no vramd-agent at $agent (build it: scripts/build.sh)" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$agent" "$out/bin/vramd-agent"
# Every library ldd resolves, the loader, and the glibc stubs older
# distributions still look for.
ldd "$agent" | awk '/=> \//{print $3} /^\s*\/lib/{print $1}' | while read -r lib; do
  cp -L "$lib" "$out/lib/"
done
cp -L /lib64/ld-linux-x86-64.so.2 "$out/lib/"
for stub in libpthread.so.0 libdl.so.2 librt.so.1; do
  for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu; do
    if [[ -e "$d/$stub" ]]; then cp -L "$d/$stub" "$out/lib/"; break; fi
  done
done
cat > "$out/vramd-agent" <<'EOF'
#!/bin/sh
d=$(dirname "$(readlink -f "$0")")
exec "$d/lib/ld-linux-x86-64.so.2" --library-path "$d/lib" "$d/bin/vramd-agent" "$@"
EOF
chmod +x "$out/vramd-agent"
echo "gpu-bundle: $out/vramd-agent ($(du -sh "$out" | cut -f1), $(ls "$out/lib" | wc -l) libraries)"
