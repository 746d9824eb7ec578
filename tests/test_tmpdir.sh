#!/bin/sh
# test_tmpdir.sh - the C tests make their scratch files under $TMPDIR
# (tests/tmpdir.h), /tmp only when it is unset: no test source names /tmp
# itself, and a test run with TMPDIR set uses it (fails where it cannot
# be written, passes where it can).
. "${srcdir:-.}/tests/lib.sh"
hits=$(grep -ln '"/tmp' "$srcdir"/tests/*.c | grep -v '/tmpdir\.c$')
[ -z "$hits" ] || fail "C tests naming /tmp instead of \$TMPDIR: $hits"
[ -x ./tests/test_atomic ] || { echo "no tests/test_atomic (built with cmocka)"; exit 77; }
mkdir "$tmp/scratch"
TMPDIR=$tmp/scratch ./tests/test_atomic > "$tmp/ok.log" 2>&1 ||
	fail "test_atomic with TMPDIR=$tmp/scratch: $(tail -3 "$tmp/ok.log")"
TMPDIR=$tmp/absent ./tests/test_atomic > "$tmp/absent.log" 2>&1 &&
	fail "test_atomic passed with TMPDIR=$tmp/absent (it does not use TMPDIR)"
finish
