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
# - at 200 and 20,000 records (a synthetic output directory made from the
#   example run's rows, not folded; and the example, and a merged
#   directory of two shards): every record once, in input order, on the
#   pages under DIR/report/ (200 a page, each linked to the next and back,
#   an index on report.html), each row's links resolving to its files; the
#   failed-and-split and flagged lists on report.html their first 50 rows,
#   sorted by mean pLDDT, with a link to the whole list; the settings say
#   --num-recycles -1 as the model default's number (a merged directory's
#   from its shards); the wall time and throughput are run.jsonl's;
#   report.html stays under 600 kB at 20,000 records; an earlier report's
#   pages past the last are removed.  The time to write each report, its
#   size, and the time Chromium takes to render its pages are printed.
#   The page's PNG stays in the build directory (tests/test_report.png;
#   a records page of the 20,000: tests/test_report_records.png).
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
        self.svg, self.n, self.hist, self.rows, self.marks = None, {}, 0, 0, {}
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.svg = a.get("id")
        key = (self.svg or "", tag, a.get("class"))
        self.n[key] = self.n.get(key, 0) + 1
        if tag == "rect" and a.get("class") == "bar":
            self.hist += int(a["data-n"])
        # what a mark stands for: a point, a fold; a square or bar of many
        if (tag, a.get("class")) in (("circle", "pt"), ("rect", "cell"), ("rect", "fold")):
            k = "timeline" if (self.svg or "").startswith("timeline-") else self.svg
            self.marks[k] = self.marks.get(k, 0) + int(a.get("data-n", 1))
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
want = [("records in the pLDDT-length plot", c.marks.get("plddt-length", 0), plddt),
        ("records in the time-length plot", c.marks.get("time-length", 0), secs),
        ("records in the histogram", c.hist, plddt),
        ("histogram bars", c.n.get(("plddt-hist", "rect", "bar"), 0), 20),
        ("folds in the timelines", c.marks.get("timeline", 0), len(folds)),
        ("memory bars (one bucket)", c.n.get(("memory", "rect", "mem"), 0), 5),
        ("failed and split records (at most 50)", c.rows, min(50, sum(r["status"] != "ok" for r in rows)))]
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
new="frac_plddt_gt70 plddt_very_low plddt_low plddt_confident plddt_very_high crc64 flags source same_as"
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
awk -F'\t' 'NR > 1 && (NF != 23 || $15 != "-" || $20 != "-" || $21 != "-" || $23 != "-" || $8 == "-") { bad = 1 }
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
# (its links: relative, to its pages and the records' files)
grep -Eiq '<script|<link|<img|<iframe|@import|url\(|src=|href="([a-z]+:|/)' "$page" &&
	fail "report.html is not self-contained: $(grep -Eio '<script|<link|<img|<iframe|@import|url\(|src=|href="([a-z]+:|/)[^ >]*' "$page" | head -3)"
cp "$page" "$tmp/first.html"
"$bin" report -q -o "$out" || fail "report: exited $?"
# the same page but for the time it was written
[ "$(grep -v 'written 20' "$page")" = "$(grep -v 'written 20' "$tmp/first.html")" ] ||
	fail "report -o does not rebuild the page the run wrote"
"$bin" report -q -o "$tmp/none" 2>"$tmp/none.err" && fail "report of a missing directory: exit 0"
[ "$(wc -l <"$tmp/none.err")" -eq 1 ] && grep -q 'summary.tsv' "$tmp/none.err" ||
	fail "report of a missing directory: $(cat "$tmp/none.err")"

# --- the record pages at 200 and 20,000 records: a synthetic output
# directory (summary.tsv, run.jsonl, done.jsonl and empty structure files)
# made from the example run's rows, not folded ------------------------------
# synth N DIR: N records like the example's, of random lengths, pLDDT and
# flags (one in 100 failed, one in 100 split), one name with & < > " ' # %
# and a space; run.jsonl with --num-recycles -1 and two workers' folds
synth() {
	"$py" - "$out" "$1" "$2" <<'PY'
import json, os, random, sys
src, n, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.makedirs(dst)
random.seed(n)
lines = open(src + "/summary.tsv").read().splitlines()
head, tmpl = lines[0].split("\t"), lines[1].split("\t")
col = {h: i for i, h in enumerate(head)}
run = [json.loads(l) for l in open(src + "/run.jsonl")]
ev = next(e for e in run if e["event"] == "run")
ev["num_recycles"] = -1
rows, folds, done, t = [], [], [], [0.0, 0.0]
for i in range(n):
    name = "odd name &<b>\"'#1%" if i == n // 2 else "P%06d_synth" % i
    L = random.randint(30, 1500)
    r = list(tmpl)
    r[col["index"]], r[col["name"]], r[col["length"]] = str(i), name, str(L)
    kind = "failed" if i % 100 == 7 else "split" if i % 100 == 42 else "ok"
    if kind == "failed":
        for k in head[2:]:
            r[col[k]] = "-"
        r[col["index"]], r[col["name"]], r[col["length"]] = str(i), name, str(L)
        r[col["status"]], r[col["reason"]] = "failed", "out of memory on every device"
    else:
        p = random.uniform(20, 95)
        bands = [L // 4, L // 4, L // 4, L - 3 * (L // 4)]
        files = [name + ".pdb"] if kind == "ok" else [name + "_1-%d.pdb" % (L // 2 + 50), name + "_%d-%d.pdb" % (L // 2 - 49, L)]
        r[col["file"]], r[col["status"]] = ",".join(files), kind
        r[col["mean_plddt"]], r[col["ptm"]] = "%.2f" % p, "%.4f" % random.random()
        r[col["seconds"]] = "%.2f" % (1e-5 * L * L)
        for k, b in zip(("plddt_very_low", "plddt_low", "plddt_confident", "plddt_very_high"), bands):
            r[col[k]] = str(b)
        r[col["flags"]] = random.choice(["-"] * 7 + ["clash:2", "ca_break:1", "ptm_plddt_mismatch"])
        parts = [(0, L)] if kind == "ok" else [(0, L // 2 + 50), (L // 2 - 50, L - L // 2 + 50)]
        for s0, ln in parts:
            w = i % 2
            folds.append({"event": "fold", "record": i, "start": s0, "length": ln, "device": "cpu",
                          "worker": w, "chunk": 32, "quota": 1, "t0": t[w], "t1": t[w] + 1e-5 * ln * ln,
                          "status": "ok"})
            t[w] += 1e-5 * ln * ln
        stat = {}
        for f in files:
            open(dst + "/" + f, "w").close()
            stat[f] = [0, 0, 0]
            if kind == "ok":
                cif = f[:-4] + ".cif"
                open(dst + "/" + cif, "w").close()
                stat[cif] = [0, 0, 0]
        done.append({"name": name, "weights": ev["weights_fingerprint"], "recycles": -1,
                     "chunk_size": 0, "precision": "auto", "row": "\t".join(r[2:]), "files": stat})
    rows.append("\t".join(r))
open(dst + "/summary.tsv", "w").write("\t".join(head) + "\n" + "".join(x + "\n" for x in rows))
dev = [e for e in run if e["event"] == "device"]
open(dst + "/run.jsonl", "w").write("".join(json.dumps(e) + "\n" for e in [ev] + dev + folds))
open(dst + "/done.jsonl", "w").write("".join(json.dumps(e) + "\n" for e in done))
PY
}
# check_pages DIR LABEL: report.html's lists bounded with links to the
# rest, every record once on the pages under DIR/report/ (in input order,
# each page linked to the next and back), its links resolving to its
# files, the flagged and the failed-or-split lists sorted by mean pLDDT, the
# settings in words and the wall time and throughput of run.jsonl
check_pages() {
	"$py" - "$1" <<'PY' || fail "$2: the report's record tables"
import csv, json, math, os, re, sys
from html.parser import HTMLParser
from urllib.parse import unquote

d = sys.argv[1]
class Page(HTMLParser):
    """rows by class (cells' text, links), the links, the settings"""
    def __init__(self, path):
        super().__init__()
        self.rows, self.links, self.cell, self.row, self.a = {}, [], None, None, None
        self.text = []
        self.dir = os.path.dirname(path)
        self.feed(open(path).read())
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr":
            self.row = (a.get("class"), [], [])
            self.rows.setdefault(a.get("class"), []).append(self.row)
        if tag in ("td", "th") and self.row:
            self.row[1].append("")
        if tag == "a":
            self.a = [a["href"], ""]
            self.links.append(self.a)
            if self.row:
                self.row[2].append(self.a)
    def handle_endtag(self, tag):
        if tag == "a":
            self.a = None
        if tag == "tr":
            self.row = None
    def handle_data(self, s):
        self.text.append(s)
        if self.row and self.row[1]:
            self.row[1][-1] += s
        if self.a:
            self.a[1] += s
    def href(self, text):
        return [h for h, t in self.links if t.strip().startswith(text)]

bad = []
def check(ok, msg):
    if not ok:
        bad.append(msg)
rows = list(csv.DictReader(open(d + "/summary.tsv"), delimiter="\t", quoting=csv.QUOTE_NONE))
# run.jsonl, or a merged directory's shards' (in shard order)
names = ["run.jsonl"] if os.path.exists(d + "/run.jsonl") else sorted(
    (f for f in os.listdir(d) if re.fullmatch(r"run\.\d+-of-\d+\.jsonl", f)),
    key=lambda f: int(f.split(".")[1].split("-")[0]))
runs = [[json.loads(l) for l in open(d + "/" + f)] for f in names]
run = sum(runs, [])
main = Page(d + "/report.html")
key = lambda r: (r["mean_plddt"] != "-", float(r["mean_plddt"]) if r["mean_plddt"] != "-" else 0)
lists = {"flagged": sorted((r for r in rows if r["flags"] not in ("-", "")), key=key),
         "bad": sorted((r for r in rows if r["status"] != "ok"), key=key)}
# a page's rows against the summary's: name, outcome, links that resolve
def same(page, got, want, where):
    if any(len(g[1]) != 8 for g in got):
        return check(False, "%s: rows of %s cells, not 8" % (where, sorted(set(len(g[1]) for g in got))))
    check([g[1][1] for g in got] == [w["name"] for w in want], "%s: rows %s..., expected %s..." %
          (where, [g[1][1] for g in got][:3], [w["name"] for w in want][:3]))
    for g, w in zip(got, want):
        names = [t.strip() for h, t in g[2]]
        for f in (w["file"].split(",") if w["file"] != "-" else []):
            check(f in names, "%s: %s has no link to %s (%s)" % (where, w["name"], f, names))
        for h, t in g[2]:
            check(os.path.isfile(os.path.join(page.dir, unquote(h))) and unquote(h).endswith(t.strip()),
                  "%s: %s links %s, not a file of its own" % (where, w["name"], h))
        check(g[1][5].startswith(w["status"]), "%s: %s outcome %s" % (where, w["name"], g[1][5]))
# a list's pages from the first: every row once, prev/next linked
def pages(first, want, where):
    got, path, k = [], os.path.join(d, first), 0
    while path:
        k += 1
        p = Page(path)
        rec = p.rows.get("rec", [])
        check(len(rec) <= 200, "%s page %d: %d rows" % (where, k, len(rec)))
        same(p, rec, want[len(got):len(got) + len(rec)], "%s page %d" % (where, k))
        got += rec
        prev = p.href("\u2190")
        check(bool(prev) == (k > 1), "%s page %d: previous link %s" % (where, k, prev))
        nxt = p.href("next")
        path = os.path.join(p.dir, nxt[0]) if nxt else None
    check(len(got) == len(want), "%s: %d rows over %d pages, expected %d" % (where, len(got), k, len(want)))
    return k
for cls, stem in (("flagged", "flagged"), ("bad", "problems")):
    want = lists[cls]
    shown = main.rows.get(cls, [])
    same(main, shown, want[:50], "report.html " + cls)
    more = main.href("All %d" % len(want))
    check(bool(more) == (len(want) > 50), "%s: %d rows, link to the rest %s" % (cls, len(want), more))
    if more:
        check(more[0] == "report/%s-001.html" % stem, "%s: link %s" % (cls, more[0]))
        pages(more[0], want, stem)
idx = [h for h, t in main.links if re.fullmatch(r"report/records-\d{3,}\.html", h)]
check(len(idx) == math.ceil(len(rows) / 200), "index: %d page links for %d records" % (len(idx), len(rows)))
n = pages(idx[0], rows, "records") if idx else 0
check(n == len(idx), "records: %d pages, the index links %d" % (n, len(idx)))
# the settings in words: --num-recycles -1 as the model default's number
ev = next(e for e in run if e["event"] == "run")
sett = {r[1][0]: r[1][1] for r in main.rows.get(None, []) if len(r[1]) == 2}
want = "%d (the model's default)" % ev["model_recycles"] if ev["num_recycles"] < 0 else str(ev["num_recycles"])
check(sett.get("recycles") == want, "settings: recycles '%s', expected '%s'" % (sett.get("recycles"), want))
# the model's default as the folds ran it: a PDB's REMARK 250 RECYCLES
for r in rows:
    f = d + "/" + r["file"].split(",")[0]
    if ev["num_recycles"] < 0 and r["status"] == "ok" and os.path.getsize(f):
        got = [l.split()[3] for l in open(f) if l.startswith("REMARK 250 RECYCLES")]
        check(got == [str(ev["model_recycles"])], "%s: RECYCLES %s, run.jsonl's default %d" % (f, got, ev["model_recycles"]))
        break
# wall time and throughput, from run.jsonl
folds = [e for e in run if e["event"] == "fold"]
wall = max(max(e["t1"] for e in r if e["event"] == "fold") for r in runs)
recs = sum(r["status"] in ("ok", "split") for r in rows) - sum(e["event"] == "skip" for e in run)
res = sum(e["length"] for e in folds if e["status"] == "ok")
text = " ".join("".join(main.text).split())
m = re.search(r"([0-9]+) records/h, ([0-9.]+) residues/s", text)
check(m and int(m.group(1)) == round(recs * 3600 / wall) and abs(float(m.group(2)) - res / wall) < 0.06,
      "throughput '%s', expected %d records/h, %.1f residues/s" % (m and m.group(0), recs * 3600 / wall, res / wall))
if bad:
    print("\n".join(bad[:20]))
sys.exit(1 if bad else 0)
PY
}
now() { date +%s.%N; }
for n in 200 20000; do
	synth "$n" "$tmp/s$n" || fail "synth $n: exited $?"
	t0=$(now)
	"$bin" report -q -o "$tmp/s$n" || fail "report of $n records: exited $?"
	t1=$(now)
	bytes=$(wc -c <"$tmp/s$n/report.html")
	eval "bytes$n=$bytes"
	printf 'report of %d records: written in %.2f s; report.html %d bytes; %d pages of %d bytes under report/\n' \
		"$n" "$(awk "BEGIN { print $t1 - $t0 }")" "$bytes" "$(ls "$tmp/s$n/report" | wc -l)" \
		"$(cat "$tmp/s$n/report"/*.html | wc -c)"
	check_pages "$tmp/s$n" "synthetic $n"
done
# the main page bounded: not a row or a mark per record
[ "$bytes20000" -le 600000 ] || fail "report.html of 20,000 records: $bytes20000 bytes, more than 600000"
check_pages "$out" example
# fewer records: the pages of the earlier report past the last are gone
cp -a "$tmp/s20000" "$tmp/fewer"
head -101 "$tmp/s20000/summary.tsv" >"$tmp/fewer/summary.tsv"
"$bin" report -q -o "$tmp/fewer" || fail "report of 100 records: exited $?"
[ "$(ls "$tmp/fewer/report" | tr '\n' ' ')" = "flagged-001.html problems-001.html records-001.html " ] ||
	fail "report of 100 records after 20,000: $(ls "$tmp/fewer/report" | tr '\n' ' ')"

# --- a merged directory: the shards' settings ----------------------------
for k in 1 2; do
	"$bin" -q --weights "$demo" --devices cpu --workers 1 -i "$srcdir/data/example.fa" -o "$tmp/sh" \
		--shard "$k/2" || fail "shard $k/2: exited $?"
done
"$bin" merge -q -o "$tmp/sh" || fail "merge: exited $?"
"$bin" report -q -o "$tmp/sh" || fail "report of the merged shards: exited $?"
grep -q 'holds no settings' "$tmp/sh/report.html" && fail "merged report: no settings"
check_pages "$tmp/sh" merged
# a killed run's page temporaries are removed by the next run; report/
# planted as a symlink is refused, not written through
cp -a "$out" "$tmp/rerun"   # times kept: resume checks a file's size and mtime
touch "$tmp/rerun/report/records-001.html.tmp.99999" "$tmp/rerun/report/keep.html.tmp"
run -i "$srcdir/data/example.fa" -o "$tmp/rerun" || fail "rerun: exited $?"
[ -e "$tmp/rerun/report/records-001.html.tmp.99999" ] && fail "rerun: a page's temporary left"
[ -e "$tmp/rerun/report/keep.html.tmp" ] || fail "rerun: removed a file not its temporary"
mkdir "$tmp/elsewhere"
rm -r "$tmp/s200/report" && ln -s "$tmp/elsewhere" "$tmp/s200/report"
"$bin" report -q -o "$tmp/s200" 2>"$tmp/link.err" && fail "report/ a symlink: exit 0"
[ "$(wc -l <"$tmp/link.err")" -eq 1 ] && grep -q 'report: not a directory' "$tmp/link.err" ||
	fail "report/ a symlink: $(cat "$tmp/link.err")"
[ -z "$(ls "$tmp/elsewhere")" ] || fail "report/ a symlink: written through"
rm "$tmp/s200/report"
"$bin" report -q -o "$tmp/s200" || fail "report of 200 records again: exited $?"

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
# the synthetic reports' pages render, the time each took printed: as many
# rows as the files hold
for n in 200 20000; do
	last=$(ls "$tmp/s$n/report"/records-*.html 2>/dev/null | tail -1)
	for p in "$tmp/s$n/report.html" "$tmp/s$n/report/records-001.html" "${last:-records-LAST}" "$tmp/s$n/report/flagged-001.html"; do
		[ -f "$p" ] || { fail "$n records: no page $p"; continue; }
		t0=$(now)
		render "$p" "$tmp/r.dom" || fail "chromium: exited $? on $p"
		t1=$(now)
		grep -E ':CONSOLE[:(]' "$tmp/r.dom.err" && fail "$p: console messages"
		rows=$(grep -o '<tr class="[a-z]*"' "$p" | wc -l)
		[ "$rows" -gt 0 ] && [ "$(grep -o '<tr class="[a-z]*"' "$tmp/r.dom" | wc -l)" -eq "$rows" ] ||
			fail "$p: $rows rows in the file, $(grep -o '<tr class="[a-z]*"' "$tmp/r.dom" | wc -l) rendered"
		printf '%d records: %s (%d bytes) rendered in %.2f s\n' "$n" "${p#"$tmp/s$n/"}" \
			"$(wc -c <"$p")" "$(awk "BEGIN { print $t1 - $t0 }")"
	done
done
render "$tmp/s20000/report/records-001.html" "$tmp/shot.dom" --screenshot="$PWD/tests/test_report_records.png" ||
	fail "chromium screenshot of a records page: exited $?"
finish
