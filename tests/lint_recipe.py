#!/usr/bin/env python3
"""lint_recipe.py META [SRCDIR] - the bioconda recipe's fields a submission
needs: MIT licence and its file (in SRCDIR), a release URL built from the
version, a real sha256 unless the file is the marked template, the CUDA
compiler through compiler('cuda'), cuda-version pinned by series, and no
hard __cuda run dependency (the binary falls back to the CPU).  Jinja is
stripped ({% %} lines dropped, {{ }} kept as text) and the rest parsed as
YAML.  One line per problem on stderr; exit 1 if any."""
import os
import re
import sys

import yaml

meta = sys.argv[1]
srcdir = sys.argv[2] if len(sys.argv) > 2 else None
raw = open(meta).read()
problems = []


def bad(msg):
    problems.append(f"{meta}: {msg}")


sets = dict(re.findall(r'^{%\s*set\s+(\w+)\s*=\s*"([^"]*)"\s*%}', raw, re.M))
# jinja statements go; expressions become plain text YAML can hold
text = re.sub(r"^\s*{%.*%}\s*$", "", raw, flags=re.M)
text = re.sub(r"{{\s*(.*?)\s*}}", lambda m: "<<" + m.group(1).replace("'", '"') + ">>", text)
try:
    doc = yaml.safe_load(text)
except yaml.YAMLError as e:
    sys.exit(f"{meta}: not YAML once its jinja is stripped: {e}")


def get(*keys):
    d = doc
    for k in keys:
        d = d.get(k) if isinstance(d, dict) else None
    return d


about = get("about") or {}
if about.get("license") != "MIT":
    bad(f"about/license is {about.get('license')!r}, not MIT")
if about.get("license_file") != "LICENSE":
    bad(f"about/license_file is {about.get('license_file')!r}, not LICENSE")
elif srcdir and not os.path.isfile(os.path.join(srcdir, "LICENSE")):
    bad(f"license_file LICENSE is not in {srcdir}")

url = str(get("source", "url") or "")
if not re.fullmatch(r"https://\S+<<version>>\S*\.tar\.gz", url) or "example" in url:
    bad(f"source/url {url!r} is not a release tarball URL built from the version")
if get("source", "sha256") != "<<sha256>>":
    bad("source/sha256 is not the sha256 variable")
sha = sets.get("sha256", "")
template = re.search(r"^# recipe-template$", raw, re.M) is not None
if not re.fullmatch(r"[0-9a-f]{64}", sha):
    bad(f"sha256 {sha!r} is not 64 hex digits")
elif set(sha) == {"0"} and not template:
    bad("sha256 is all zeros: run contrib/bioconda/set-release on the release tarball")
elif set(sha) != {"0"} and template:
    bad("a real sha256 in a file still marked '# recipe-template'")

# requirement lines with their selectors (YAML drops comments)
reqs = {}
section = sub = None
for line in raw.splitlines():
    if re.match(r"^\S", line) and not line.startswith("#"):
        section = line.split(":")[0]
        continue
    m = re.match(r"^  (\w+):", line)
    if m and section == "requirements":
        sub = m.group(1)
        continue
    m = re.match(r"^    - (.*?)\s*(#.*)?$", line)
    if m and section == "requirements":
        reqs.setdefault(sub, []).append(m.group(1))

build = reqs.get("build", [])
if "{{ compiler('cuda') }}" not in build:
    bad("requirements/build has no {{ compiler('cuda') }}")
for sec, deps in reqs.items():
    for d in deps:
        if d.split()[0] in ("cuda-nvcc", "nvcc", "cudatoolkit"):
            bad(f"requirements/{sec}: {d!r}: the CUDA compiler comes from {{{{ compiler('cuda') }}}}")
        if d.split()[0] == "cuda-version" and not d.endswith(".*"):
            bad(f"requirements/{sec}: {d!r} pins one release, not a series (X.*)")
        if d.split()[0] == "__cuda" and sec != "run_constrained":
            bad(f"requirements/{sec}: {d!r}: the CPU fallback must install without a GPU driver")
if not any(d.startswith("cuda-version") for d in reqs.get("host", [])):
    bad("requirements/host has no cuda-version pin for the CUDA build")

for p in problems:
    print(p, file=sys.stderr)
sys.exit(1 if problems else 0)
