#!/usr/bin/env bash
# test_man.sh - the man page and --help agree: the long options --help
# defines are the OPTIONS the man page lists, its commands are the man
# page's COMMANDS, and every option --help mentions is one it defines.
# The built page (docs/esmbatch.1, from docs/esmbatch.1.in) carries the
# configured data directory in its paths and no unfilled @VAR@.
# `esmbatch help` prints what --help does; --version names the CUDA
# runtime (or no CUDA), the compiled architectures and the BLAS.
. "${srcdir:-.}/tests/lib.sh"
: "${TOP_BUILDDIR:?run by make check}" "${MAKE:=make}"
man=$TOP_BUILDDIR/docs/esmbatch.1
[ -s "$man" ] || { fail "$man: not built"; finish; }

"$bin" --help >"$tmp/help" 2>&1 || fail "--help: exited $?"
"$bin" help >"$tmp/help2" 2>&1 || fail "help: exited $?"
cmp -s "$tmp/help" "$tmp/help2" || fail "'esmbatch help' differs from --help: $(head -1 "$tmp/help2")"

python3 - "$tmp/help" "$man" >"$tmp/diff" <<'PY' || fail "$(cat "$tmp/diff")"
import re, sys
help_text = open(sys.argv[1]).read()
man = open(sys.argv[2]).read().replace("\\-", "-")
LONG = r"--[a-z][a-z0-9-]*[a-z0-9]"

def block(text, head):
    m = re.search(r"^%s:\n(.*?)(?:\n\n|\Z)" % head, text, re.M | re.S)
    return m.group(1) if m else ""

h_opts = set(re.findall(r"^\s+(?:-\w, )?(%s)" % LONG, block(help_text, "Options"), re.M))
h_cmds = set(re.findall(r"^  ([a-z]+)  ", block(help_text, "Commands"), re.M))
h_said = set(re.findall(LONG, help_text))

def section(name):
    m = re.search(r'^\.SH "?%s"?\n(.*?)(?=^\.SH |\Z)' % name, man, re.M | re.S)
    return m.group(1) if m else ""

tags = re.findall(r"^\.TP\n(.*)$", section("OPTIONS"), re.M)
m_opts = set(o for t in tags for o in re.findall(LONG, t))
m_cmds = set(re.findall(r"^\.TP\n\.B ([a-z]+)$", section("COMMANDS"), re.M))
bad = []
for what, a, b in (("option", h_opts, m_opts), ("command", h_cmds, m_cmds)):
    if not a:
        bad.append("--help defines no %ss" % what)
    for x in sorted(a - b):
        bad.append("--help's %s %s is not in the man page's %sS" % (what, x, what.upper()))
    for x in sorted(b - a):
        bad.append("the man page's %s %s is not in --help" % (what, x))
for x in sorted(h_said - h_opts):
    bad.append("--help mentions %s but does not define it" % x)
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY

grep -n '@[A-Za-z_]*@' "$man" >"$tmp/at" && fail "$man: unfilled $(head -1 "$tmp/at")"
pkgdatadir=$(env -u MAKEFLAGS -u MFLAGS $MAKE -s -C "$TOP_BUILDDIR" --no-print-directory \
	--eval='print-pkgdatadir: ; @echo $(pkgdatadir)' print-pkgdatadir)
[ -n "$pkgdatadir" ] || fail "make: no pkgdatadir"
grep -qF -- "$(printf '%s' "$pkgdatadir" | sed 's/-/\\-/g')/example.fa" "$man" ||
	fail "$man: the example is not under the configured $pkgdatadir"
if [ "$pkgdatadir" != /usr/local/share/esmbatch ]; then
	grep -q '/usr/local' "$man" && fail "$man: /usr/local under prefix $pkgdatadir"
fi
if command -v groff >/dev/null; then
	groff -man -ww -z "$man" >"$tmp/groff.err" 2>&1 && [ ! -s "$tmp/groff.err" ] ||
		fail "$man: $(head -3 "$tmp/groff.err")"
fi

"$bin" --version >"$tmp/version" 2>&1 || fail "--version: exited $?"
grep -Eq '^cuda: (runtime [0-9]+\.[0-9]+ |no CUDA)' "$tmp/version" ||
	fail "--version names no CUDA runtime: $(tr '\n' ';' <"$tmp/version")"
if grep -q '^cuda: runtime' "$tmp/version"; then
	grep -Eq '^cuda architectures: sm_[0-9]' "$tmp/version" ||
		fail "--version: a CUDA build without its architectures"
fi
grep -Eq '^blas: [A-Za-z]' "$tmp/version" || fail "--version names no BLAS"
finish
