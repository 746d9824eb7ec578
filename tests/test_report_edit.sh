#!/usr/bin/env bash
# test_report_edit.sh - `esmbatch report` of an output directory whose
# summary.tsv and run.jsonl a person (or an attacker) edited: every text
# read from them is escaped in report.html (a status or a fold's status
# holding markup is shown, never run), and figures out of range (a length
# of 1e300, an infinite pLDDT, a worker of 1e300) read as missing instead
# of wrapping into other numbers.
. "${srcdir:-.}/tests/lib.sh"
mkfa 5 "$tmp/two.fa" a=20 b=24
"$bin" -q --weights "$demo" --num-recycles 0 --devices cpu -i "$tmp/two.fa" -o "$tmp/o" ||
	fail "fold: exit $?"
python3 - "$tmp/o" <<'PY'
import json, sys
d = sys.argv[1]
rows = open(d + "/summary.tsv").read().splitlines()
head = rows[0].split("\t")
col = {c: i for i, c in enumerate(head)}
r = rows[1].split("\t")
r[col["status"]] = "</svg><script>alert(1)</script>"
r[col["length"]] = "1e300"
r[col["mean_plddt"]] = "inf"
rows[1] = "\t".join(r)
r = rows[2].split("\t")
r[col["mean_plddt"]] = "1e300"
r[col["plddt_low"]] = "-1e300"
rows[2] = "\t".join(r)
open(d + "/summary.tsv", "w").write("\n".join(rows) + "\n")
ev = [json.loads(l) for l in open(d + "/run.jsonl")]
for e in ev:
    if e["event"] == "fold":
        e["status"] = "<img src=x onerror=alert(1)>"
        e["worker"] = 1e300
        e["start"] = 2147483647
        e["t1"] = 1e308
open(d + "/run.jsonl", "w").write("".join(json.dumps(e) + "\n" for e in ev))
PY
"$bin" report -q -o "$tmp/o" || fail "report: exit $?"
page=$tmp/o/report.html
grep -qi -e '<script' -e '<img' "$page" && fail "markup from the files in the page: $(grep -io -e '<script[^>]*>' -e '<img[^>]*>' "$page" | head -3)"
grep -q '&lt;/svg&gt;&lt;script&gt;alert(1)&lt;/script&gt;' "$page" || fail "the edited status is not shown escaped"
grep -q '&lt;img src=x onerror=alert(1)&gt;' "$page" || fail "the edited fold status is not shown escaped"
grep -q -e '-9223372036854775808' -e '2147483648' -e '-2147483647' "$page" &&
	fail "a figure out of range wrapped: $(grep -o -e '-9223372036854775808' -e '2147483648' -e '-2147483647' "$page" | head -3)"
finish
