#!/usr/bin/env bash
# test_cells.sh - summary.tsv's cells by one escaping rule (util/tsv.h,
# docs/output.md): records named with a leading '"', '=', '+', '@' or '-',
# with bytes that are not UTF-8, and a --names name not found in an input
# whose path holds a TAB and a newline give one row each, of 23 columns,
# to Python's csv excel-tab reader; summary.tsv and report.html are valid
# UTF-8; every name decodes back to its header's; report shows the names
# decoded and the bad bytes as U+FFFD; merge of shards keeps the cells.
. "${srcdir:-.}/tests/lib.sh"
in=$tmp/$'in\tput\nx.fa'
printf '>"quoted one\nMKTAYIAKQR\n>=HYPERLINK(1)\nMKTAYIAKQG\n>+sum\nMKTAYIAKQA\n>@at\nMKTAYIAKQC\n>-dash\nMKTAYIAKQD\n>bad\377\376name\nMKTAYIAKQE\n>plain\nMKTAYIAKQF\n' >"$in"
args=(-q --weights "$demo" --devices cpu --num-recycles 0 -t 1)
"$bin" "${args[@]}" -i "$in" -o "$tmp/o" || fail "fold exited $?"
python3 - "$tmp/o/summary.tsv" <<'PY' || fail "summary.tsv: rows or names"
import csv, sys
raw = open(sys.argv[1], "rb").read()
raw.decode("utf-8")                     # valid UTF-8, or this raises
rows = list(csv.reader(open(sys.argv[1], newline="", encoding="utf-8"), dialect="excel-tab"))
assert len(rows) == 8, "%d rows" % len(rows)
assert all(len(r) == 23 for r in rows), [len(r) for r in rows]
def decode(c):
    out, i = bytearray(), 0
    b = c.encode()
    while i < len(b):
        if b[i:i + 1] == b"\\" and b[i + 1:i + 2] in (b"\\", b"t", b"n", b"r"):
            out += {b"\\": b"\\", b"t": b"\t", b"n": b"\n", b"r": b"\r"}[b[i + 1:i + 2]]; i += 2
        elif b[i:i + 2] == b"\\x":
            out.append(int(b[i + 2:i + 4], 16)); i += 4
        else:
            out.append(b[i]); i += 1
    return bytes(out)
names = [decode(r[1]) for r in rows[1:]]
want = [b'"quoted', b"=HYPERLINK(1)", b"+sum", b"@at", b"-dash", b"bad\377\376name", b"plain"]
assert names == want, names
for r in rows[1:]:
    assert r[1][0] not in "\"=+@-", r[1]
PY
python3 -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8")' "$tmp/o/report.html" ||
	fail "report.html is not UTF-8"
grep -q 'bad��name' "$tmp/o/report.html" || fail "report.html: bad bytes not shown as U+FFFD"
grep -q '=HYPERLINK(1)' "$tmp/o/report.html" || fail "report.html: name not decoded"

# a --names name not found in an input whose path has a TAB and a newline
printf 'plain\nmissing\n' >"$tmp/names"
"$bin" "${args[@]}" -i "$in" -o "$tmp/n" --names "$tmp/names" 2>/dev/null
[ "$(tail -n +2 "$tmp/n/summary.tsv" | wc -l)" -eq 2 ] ||
	fail "--names: $(tail -n +2 "$tmp/n/summary.tsv" | wc -l) rows, expected 2: $(head -c 400 "$tmp/n/summary.tsv")"
awk -F'\t' 'NF != 23 { exit 1 }' "$tmp/n/summary.tsv" || fail "--names: a row of another width"
grep -q 'in\\tput\\nx.fa' "$tmp/n/summary.tsv" || fail "--names: the path not escaped"

# merge keeps the cells as written
for k in 1 2; do "$bin" "${args[@]}" -i "$in" -o "$tmp/m" --shard $k/2 || fail "shard $k/2: exited $?"; done
"$bin" merge -q -o "$tmp/m" || fail "merge exited $?"
cmp -s <(cut -f2 "$tmp/o/summary.tsv") <(cut -f2 "$tmp/m/summary.tsv") || fail "merged names differ"
finish
