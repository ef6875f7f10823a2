#!/usr/bin/env python3
"""Keeps the key table of docs/configuration.md equal to `vramd --help-config`.

  tests/deploy/config_doc.py [--vramd-bin build/bin/vramd]           # rewrite the table
  tests/deploy/config_doc.py --check [--vramd-bin build/bin/vramd]   # exit 1 if it differs

The table sits between the markers
  <!-- BEGIN vramd --help-config -->  and  <!-- END vramd --help-config -->
and is generated from the binary's own key table (src/config/config.cc), so
a key, flag, variable or default added there shows up here or fails the check.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DOC = os.path.join(ROOT, "docs", "configuration.md")
BEGIN = "<!-- BEGIN vramd --help-config -->"
END = "<!-- END vramd --help-config -->"


def rows(vramd_bin):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # vramd warns about stray VRAMD_* variables
    out = subprocess.run([vramd_bin, "--help-config"], capture_output=True, text=True, env=env, check=True).stdout
    lines = out.splitlines()
    if not lines or not lines[0].startswith("KEY"):
        raise SystemExit(f"config_doc: unexpected --help-config output: {out[:200]!r}")
    result = []
    for line in lines[1:]:
        if not line.strip():
            continue
        parts = line.split(None, 4)
        if len(parts) < 4:
            raise SystemExit(f"config_doc: cannot parse line {line!r}")
        key, flag, var, default = parts[:4]
        meaning = parts[4] if len(parts) > 4 else ""
        result.append((key, flag, var, default, meaning))
    return result


def table(vramd_bin):
    def code(s):
        return "`" + s + "`"

    out = ["| key (config file) | flag | environment variable | default | meaning |",
           "|---|---|---|---|---|"]
    for key, flag, var, default, meaning in rows(vramd_bin):
        if key == "kube.enabled":
            flag_text = "`--no-kube` (sets false)"
        elif flag == "-":
            flag_text = "(none)"
        else:
            flag_text = code(flag)
        default_text = "(empty)" if default == '""' else code(default)
        meaning = meaning.replace("|", "\\|")
        out.append(f"| {code(key)} | {flag_text} | {code(var)} | {default_text} | {meaning} |")
    return "\n".join(out)


def main(argv):
    check = "--check" in argv
    vramd_bin = os.path.join(ROOT, "build", "bin", "vramd")
    if "--vramd-bin" in argv:
        vramd_bin = argv[argv.index("--vramd-bin") + 1]
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    m = re.search(re.escape(BEGIN) + r"\n(.*?)\n" + re.escape(END), text, re.S)
    if not m:
        print(f"config_doc: {DOC} lacks the {BEGIN} ... {END} markers", file=sys.stderr)
        return 1
    want = table(vramd_bin)
    if check:
        if m.group(1) != want:
            print("config_doc: docs/configuration.md's key table differs from `vramd --help-config`; "
                  "run tests/deploy/config_doc.py", file=sys.stderr)
            return 1
        print(f"config_doc: docs/configuration.md lists all {len(want.splitlines()) - 2} keys of vramd --help-config")
        return 0
    text = text[:m.start(1)] + want + text[m.end(1):]
    with open(DOC, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
