#!/usr/bin/env bash
# test_report.sh - what a person reads after a run (demo model, CPU, the
# example proteome; then the same with a bad record and a long one split
# on a small simulated device):
# - summary.tsv: the columns of 0.1 first and unchanged, then
#   frac_plddt_gt70, the four AFDB band counts, crc64 and flags; the bands
#   sum to the residues (a split record's over its fragments), crc64
#   equals Biopython's Bio.SeqUtils.CheckSum.crc64 of every sequence, and
#   the ca_break and clash counts equal those recounted from the PDBs (all
#   fragments) by gemmi (an independent reader and search);
# - a done.jsonl row of an older version (without the new columns) is
#   resumed, not refolded, with "-" in the new columns, and the report is
#   built from it;
# - report.html is self-contained (no script, no link, no external URL),
#   `esmbatch report -o DIR` rebuilds it, and headless Chromium renders it
#   with no console message: each chart has as many points as summary.tsv
#   has rows with that figure, the timeline a bar per fold of run.jsonl,
#   the list of failed and split records a line per such row; during a run
#   it is rewritten with the records settled so far.
#   The page's PNG stays in the build directory (tests/test_report.png).
#   Without chromium the rendering is skipped, with a message (CI installs
#   it: .ci/run).
. "${srcdir:-.}/tests/lib.sh"
need_gemmi
"$py" -c 'import Bio.SeqUtils.CheckSum' 2>/dev/null ||
	{ echo "FAIL: no python3 with Biopython (install python3-biopython)"; exit 1; }
# check_summary FASTA OUT LABEL: OUT/summary.tsv's new columns against
# Biopython (crc64) and gemmi (the flag counts, from the PDBs)
check_summary() {
	"$py" - "$1" "$2" <<'PY' || fail "$3: summary columns against Biopython and gemmi"
import csv, math, re, sys
import gemmi
from Bio.SeqUtils.CheckSum import crc64

fa, out = sys.argv[1], sys.argv[2]
seqs, name = {}, None
for line in open(fa):
    line = line.strip()
    if line.startswith(">"):
        name = line[1:].split()[0]
        seqs[name] = ""
    elif line:
        seqs[name] += line.upper()
def recount(path):
    """ca_break and clash counts of one PDB, by gemmi"""
    st = gemmi.read_structure(path)
    breaks = 0
    for ch in st[0]:
        for a, b in zip(ch, list(ch)[1:]):
            if b.seqid.num == a.seqid.num + 1:
                d = a["CA"][0].pos.dist(b["CA"][0].pos)
                breaks += not (3.0 <= d <= 4.5)
    # no unit cell: no symmetry images (a CRYST1 1 1 1 is no crystal)
    ns = gemmi.NeighborSearch(st[0], gemmi.UnitCell(), 2.0).populate()
    clashes = set()
    for ch in st[0]:
        for res in ch:
            for at in res:
                for m in ns.find_atoms(at.pos, "\0", radius=1.5):
                    cra = m.to_cra(st[0])
                    a = (ch.name, res.seqid.num, at.name)
                    b = (cra.chain.name, cra.residue.seqid.num, cra.atom.name)
                    if a[:2] == b[:2] or at.pos.dist(cra.atom.pos) >= 1.5:
                        continue
                    lo, hi = sorted([a, b])
                    # the peptide bond C(i)-N(i+1) of one chain is no clash
                    if lo[0] == hi[0] and hi[1] == lo[1] + 1 and lo[2] == "C" and hi[2] == "N":
                        continue
                    clashes.add((lo, hi))
    return breaks, len(clashes)

rows = list(csv.DictReader(open(out + "/summary.tsv"), delimiter="\t"))
assert len(rows) == len(seqs), len(rows)
bad = []
for r in rows:
    n = r["name"]
    if r["status"] == "failed":   # a bad record: no sequence, no figure
        if any(r[k] != "-" for k in ("frac_plddt_gt70", "plddt_low", "crc64", "flags")):
            bad.append("%s: failed, but %s" % (n, r))
        continue
    if r["crc64"] != crc64(seqs[n])[4:]:
        bad.append("%s: crc64 %s, Biopython %s" % (n, r["crc64"], crc64(seqs[n])))
    bands = [int(r[k]) for k in ("plddt_very_low", "plddt_low", "plddt_confident", "plddt_very_high")]
    if sum(bands) != int(r["length"]):
        bad.append("%s: bands %s, length %s" % (n, bands, r["length"]))
    if abs(float(r["frac_plddt_gt70"]) - (bands[2] + bands[3]) / sum(bands)) > 5e-5:
        bad.append("%s: frac_plddt_gt70 %s" % (n, r["frac_plddt_gt70"]))
    # "-", or a comma list of the flags in this order
    kinds = [next((k for k, p in enumerate((r"ptm_plddt_mismatch", r"ca_break:[1-9][0-9]*", r"clash:[1-9][0-9]*"))
                   if re.fullmatch(p, f)), None) for f in r["flags"].split(",")]
    if r["flags"] != "-" and (None in kinds or kinds != sorted(set(kinds))):
        bad.append("%s: flags '%s'" % (n, r["flags"]))
    # the flags recounted from the PDBs (a split record: its fragments'
    # sum): gemmi reads them, consecutive CAs per chain, heavy-atom pairs of
    # different residues by gemmi's neighbour search
    breaks, nclash = 0, 0
    for file in r["file"].split(","):
        b, c = recount(out + "/" + file)
        breaks += b
        nclash += c
    got = dict(f.split(":") for f in r["flags"].split(",") if ":" in f)
    if int(got.get("ca_break", 0)) != breaks or int(got.get("clash", 0)) != nclash:
        bad.append("%s: flags '%s', gemmi counts ca_break %d clash %d" % (n, r["flags"], breaks, nclash))
    if ("ptm_plddt_mismatch" in r["flags"]) != (float(r["ptm"]) > 0.9 and float(r["mean_plddt"]) < 50):
        bad.append("%s: ptm_plddt_mismatch" % n)
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}
# check_page DOM OUT LABEL: the charts of a rendered report against
# OUT/summary.tsv and OUT/run.jsonl
check_page() {
	"$py" - "$1" "$2" <<'PY' || fail "$3: report.html's charts against summary.tsv and run.jsonl"
import csv, json, sys
from html.parser import HTMLParser

class Charts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.svg, self.n, self.hist, self.rows = None, {}, 0, 0
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.svg = a.get("id")
        key = (self.svg or "", tag, a.get("class"))
        self.n[key] = self.n.get(key, 0) + 1
        if tag == "rect" and a.get("class") == "bar":
            self.hist += int(a["data-n"])
        if tag == "tr" and a.get("class") == "bad":
            self.rows += 1
    def handle_endtag(self, tag):
        if tag == "svg":
            self.svg = None

c = Charts()
c.feed(open(sys.argv[1]).read())
rows = list(csv.DictReader(open(sys.argv[2] + "/summary.tsv"), delimiter="\t"))
folds = [e for e in map(json.loads, open(sys.argv[2] + "/run.jsonl")) if e["event"] == "fold"]
plddt = sum(r["mean_plddt"] != "-" for r in rows)
secs = sum(r["seconds"] != "-" for r in rows)
timeline = sum(v for (svg, tag, cls), v in c.n.items() if svg.startswith("timeline-") and cls == "fold")
want = [("plddt-length circles", c.n.get(("plddt-length", "circle", "pt"), 0), plddt),
        ("time-length circles", c.n.get(("time-length", "circle", "pt"), 0), secs),
        ("records in the histogram", c.hist, plddt),
        ("histogram bars", c.n.get(("plddt-hist", "rect", "bar"), 0), 20),
        ("timeline bars", timeline, len(folds)),
        ("memory bars (one bucket)", c.n.get(("memory", "rect", "mem"), 0), 5),
        ("failed and split records", c.rows, sum(r["status"] != "ok" for r in rows))]
bad = ["%s: %d, expected %d" % w for w in want if w[1] != w[2]]
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}
out=$tmp/ex
run() { "$bin" -q --weights "$demo" --num-recycles 0 --devices cpu --workers 2 "$@"; }

run -i "$srcdir/data/example.fa" -o "$out" || fail "fold: exited $?"

# --- summary.tsv ----------------------------------------------------------
old="index name file length bucket status reason mean_plddt ptm seconds predicted_bytes allocated_bytes reserved_bytes device_used_bytes"
new="frac_plddt_gt70 plddt_very_low plddt_low plddt_confident plddt_very_high crc64 flags"
[ "$(head -1 "$out/summary.tsv" | tr '\t' ' ')" = "$old $new" ] ||
	fail "summary header: $(head -1 "$out/summary.tsv")"
check_summary "$srcdir/data/example.fa" "$out" example

# --- a journal of an older version: rows without the new columns ----------
cp -a "$out" "$tmp/old"   # times kept: resume checks a file's size and mtime
"$py" - "$tmp/old/done.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
for e in lines:
    e["row"] = "\t".join(e["row"].split("\t")[:10])
open(sys.argv[1], "w").write("".join(json.dumps(e) + "\n" for e in lines))
PY
run -i "$srcdir/data/example.fa" -o "$tmp/old" || fail "old journal: exited $?"
grep -q '"event":"fold"' "$tmp/old/run.jsonl" && fail "old journal: records folded again"
awk -F'\t' 'NR > 1 && (NF != 21 || $15 != "-" || $20 != "-" || $21 != "-" || $8 == "-") { bad = 1 }
	END { exit bad }' "$tmp/old/summary.tsv" || fail "old journal: rows $(tail -n +2 "$tmp/old/summary.tsv")"
[ "$(cut -f1-14 "$tmp/old/summary.tsv")" = "$(cut -f1-14 "$out/summary.tsv")" ] ||
	fail "old journal: the first 14 columns changed"
[ -s "$tmp/old/report.html" ] || fail "old journal: no report"

# --- a bad record, and a long one split on a small device -----------------
{
	cat "$srcdir/data/example.fa"
	printf '>digit a bad letter\nMKV7LA\n>long200\n'
	"$py" -c 'import random; random.seed(3); print("".join(random.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(200)))'
} >"$tmp/mix.fa"
run -i "$tmp/mix.fa" -o "$tmp/mix" --devices sim:3M 2>/dev/null
rc=$?
[ $rc -eq 3 ] || fail "mix: exited $rc, not 3 (a record failed)"
[ "$(awk -F'\t' '$2 == "long200" { print $6 }' "$tmp/mix/summary.tsv")" = split ] ||
	fail "mix: long200 not split"
check_summary "$tmp/mix.fa" "$tmp/mix" mix

# --- refreshed during a run (after every record: ESMBATCH_REPORT_EVERY=0;
# each record's output step 1 s longer) -----------------------------------
ESMBATCH_REPORT_EVERY=0 ESMBATCH_FAULT=slowio:1000 run -i "$srcdir/data/example.fa" -o "$tmp/live" &
pid=$!
pending=
for i in $(seq 200); do
	pending=$(sed -n 's|.*<b>\([0-9]*\)</b>pending.*|\1|p' "$tmp/live/report.html" 2>/dev/null)
	[ -n "$pending" ] && break
	sleep 0.1
done
wait $pid || fail "live: exited $?"
[ -n "$pending" ] && [ "$pending" -ge 1 ] && [ "$pending" -le 4 ] ||
	fail "live: no report with 1-4 records pending while the run was under way ('$pending')"
grep -q 'run under way\|pending' "$tmp/live/report.html" && fail "live: the last report still says under way"
[ "$(grep -c '<tr class="flagged">' "$tmp/live/report.html")" -eq "$(awk -F'\t' 'NR > 1 && $21 != "-"' "$tmp/live/summary.tsv" | wc -l)" ] ||
	fail "live: the last report does not list every flagged record"

# --- report.html ----------------------------------------------------------
page=$out/report.html
[ -s "$page" ] || fail "no report.html after the run"
grep -Eiq '<script|<link|<img|<iframe|@import|url\(|(src|href)=' "$page" &&
	fail "report.html is not self-contained: $(grep -Eio '<script|<link|<img|<iframe|@import|url\(|(src|href)=[^ >]*' "$page" | head -3)"
cp "$page" "$tmp/first.html"
"$bin" report -q -o "$out" || fail "report: exited $?"
# the same page but for the time it was written
[ "$(grep -v 'written 20' "$page")" = "$(grep -v 'written 20' "$tmp/first.html")" ] ||
	fail "report -o does not rebuild the page the run wrote"
"$bin" report -q -o "$tmp/none" 2>"$tmp/none.err" && fail "report of a missing directory: exit 0"
[ "$(wc -l <"$tmp/none.err")" -eq 1 ] && grep -q 'summary.tsv' "$tmp/none.err" ||
	fail "report of a missing directory: $(cat "$tmp/none.err")"

chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chrome" ]; then
	echo "SKIP: chromium not installed (Debian: apt-get install chromium); report.html not rendered"
	finish
fi
# render PAGE OUT.dom [--screenshot=...]: the DOM after load, console in OUT.dom.err
render() {
	local page=$1 dom=$2
	shift 2
	timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars \
		--user-data-dir="$tmp/chrome" --enable-logging=stderr --v=0 --window-size=1150,2400 \
		"$@" --dump-dom "file://$page" >"$dom" 2>"$dom.err"
}
# the console check sees a page's console message
printf '<html><body><script>console.error("probe")</script></body></html>\n' >"$tmp/probe.html"
render "$tmp/probe.html" "$tmp/probe.dom" || fail "chromium: exited $? on the probe page"
grep -q 'CONSOLE.*probe' "$tmp/probe.dom.err" || fail "chromium: the console check sees no console message"

render "$page" "$tmp/page.dom" || fail "chromium: exited $?"
grep -E ':CONSOLE[:(]' "$tmp/page.dom.err" && fail "report.html: console messages"
check_page "$tmp/page.dom" "$out" example
render "$tmp/mix/report.html" "$tmp/mix.dom" || fail "chromium: exited $? on the mix"
grep -E ':CONSOLE[:(]' "$tmp/mix.dom.err" && fail "mix report.html: console messages"
check_page "$tmp/mix.dom" "$tmp/mix" mix
# the picture a person looks at (kept: tests/test_report.png)
png=$PWD/tests/test_report.png
rm -f "$png"
render "$page" "$tmp/shot.dom" --screenshot="$png" || fail "chromium screenshot: exited $?"
"$py" - "$png" <<'PY' || fail "screenshot: not a 1150x2400 PNG"
import struct, sys
b = open(sys.argv[1], "rb").read(24)
assert b[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", b[16:24]) == (1150, 2400), b
PY
echo "report rendered: $png"
finish
