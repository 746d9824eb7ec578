#!/usr/bin/env bash
# test_docs.sh - the documentation holds together: README.md is short
# (under 250 lines: options live in the man page, the rest in docs/), every
# relative link and image in README.md and docs/*.md names a file that
# exists (and, with #anchor, a heading of that Markdown file), every file
# of docs/ is linked from one of them, and the README keeps the test
# command .ci/run runs and the apt line of its first step.  No comment or
# test in the sources names an issue number (history is the ChangeLog's).
# The man page's options against --help: tests/test_man.sh.
. "${srcdir:-.}/tests/lib.sh"

python3 - "$srcdir" >"$tmp/out" <<'PY' || fail "$(cat "$tmp/out")"
import os, re, sys
top = sys.argv[1]
readme = os.path.join(top, "README.md")
docs = os.path.join(top, "docs")
pages = [readme] + sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
bad = []

n = sum(1 for _ in open(readme, encoding="utf-8"))
if n >= 250:
    bad.append("README.md: %d lines (at most 249)" % n)

def slugs(path):
    """The anchors GitHub gives the headings of a Markdown file."""
    seen, out, fence = {}, set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        s = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        k = seen.get(s, 0)
        seen[s] = k + 1
        out.add(s if k == 0 else "%s-%d" % (s, k))
    return out

linked = set()
for page in pages:
    text, fence = [], False
    for line in open(page, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        elif not fence:
            text.append(re.sub(r"`[^`]*`", "", line))
    where = os.path.relpath(page, top)
    for target in re.findall(r"\]\(([^)\s]+)\)", "".join(text)):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(page), path) if path else page)
        if not os.path.exists(full):
            bad.append("%s: link to %s: no such file" % (where, target))
            continue
        linked.add(full)
        if anchor:
            if not full.endswith(".md"):
                bad.append("%s: link to %s: an anchor into a file that is not Markdown" % (where, target))
            elif anchor not in slugs(full):
                bad.append("%s: link to %s: no such heading" % (where, target))

for f in sorted(os.listdir(docs)):
    full = os.path.normpath(os.path.join(docs, f))
    if f != "esmbatch.1" and os.path.isfile(full) and full not in linked:
        bad.append("docs/%s: linked from neither README.md nor docs/*.md" % f)

r = open(readme, encoding="utf-8").read().splitlines()
ci = open(os.path.join(top, ".ci", "run"), encoding="utf-8").read().splitlines() \
    if os.path.exists(os.path.join(top, ".ci", "run")) else None
test_cmd = "autoreconf -fi && ./configure --with-cuda-arch=90 && make -j2 && make check"
if test_cmd not in r:
    bad.append("README.md: no line '%s' (the test command .ci/run runs)" % test_cmd)
if ci is not None and test_cmd not in ci:
    bad.append(".ci/run: no longer runs the README's test command '%s'" % test_cmd)
if not any(l.startswith("sudo apt-get update && sudo apt-get install -y ") for l in r):
    bad.append("README.md: no apt-get install line")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY

for d in src tests kernels bench tools contrib; do
	[ -d "$srcdir/$d" ] && printf '%s\n' "$srcdir/$d"
done >"$tmp/dirs"
xargs -d '\n' grep -rnIiE 'issue[ -]?[0-9]' --exclude=test_docs.sh --exclude='*.safetensors' \
	<"$tmp/dirs" >"$tmp/issues" && fail "an issue number in the sources: $(head -3 "$tmp/issues")"
finish
