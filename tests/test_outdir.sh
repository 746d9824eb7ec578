#!/usr/bin/env bash
# test_outdir.sh - nothing outside -o is written through it, nothing is
# destroyed (demo model, CPU):
# - a symlink planted in -o at run.jsonl, done.jsonl or .esmbatch.lock is
#   refused with one line naming it, and the file it points to is
#   untouched (none is created); one planted at a temporary's name
#   (summary.tsv.tmp.PID during a fold, report.html.tmp.PID before
#   `report`, NAME.pdb.tmp.PID) is removed, never written through, and a
#   symlink at a record's NAME.pdb (a FIFO at a fragment's) fails that
#   record only;
# - --dump-tensors onto a FIFO, the input FASTA or -o's done.jsonl, and
#   `convert -o` onto a FIFO or its own input, are refused before anything
#   is written, and leave them as they were;
# - a rerun with --format pdb,cif whose .cif cannot be written keeps the
#   earlier run's .pdb;
# - resume trusts a done.jsonl line only for the files it describes: a
#   PDB overwritten by another input's run is refolded (and merge refuses
#   the shard until then), a row whose file column leaves -o or that holds
#   a newline is not kept.
. "${srcdir:-.}/tests/lib.sh"
w=$demo
run() { "$bin" -q --weights "$w" --num-recycles 0 --devices cpu "$@"; }
mkfa 3 "$tmp/one.fa" X=20
mkfa 4 "$tmp/other.fa" X=24
mkdir "$tmp/outside"
# plant NAME: a symlink -o/NAME to outside/NAME holding "secret"
plant() {
	echo secret >"$tmp/outside/$2"
	ln -sfn "$tmp/outside/$2" "$1/$2"
}
untouched() { [ "$(cat "$tmp/outside/$1")" = secret ] || fail "$2: outside/$1 was written"; }

# --- symlinks at the run's own files: refused ------------------------------
for f in run.jsonl done.jsonl; do
	mkdir -p "$tmp/s-$f"
	plant "$tmp/s-$f" "$f"
	run -i "$tmp/one.fa" -o "$tmp/s-$f" 2>"$tmp/err" && fail "symlink $f: exit 0"
	untouched "$f" "symlink $f"
	grep -q "$f: exists and is a symbolic link, not a regular file: refused" "$tmp/err" || fail "symlink $f: $(cat "$tmp/err")"
	[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "symlink $f: not one line: $(cat "$tmp/err")"
done
mkdir "$tmp/s-lock"
ln -s "$tmp/outside/lock" "$tmp/s-lock/.esmbatch.lock"
run -i "$tmp/one.fa" -o "$tmp/s-lock" 2>"$tmp/err" && fail "symlink lock: exit 0"
[ -e "$tmp/outside/lock" ] && fail "symlink lock: created outside -o"
grep -q "esmbatch.lock: exists and is a symbolic link, not a regular file: refused" "$tmp/err" || fail "symlink lock: $(cat "$tmp/err")"

# --- symlinks at temporaries: removed, never written through --------------
mkdir "$tmp/s-tmp"
# exec: $! is esmbatch's PID, the PID in its temporaries' names.  The
# PDB's temporary is planted before the fold starts (its worker writes it
# as soon as the fold ends: planted during the run, it could land between
# the file's creation and its rename, which esmbatch reports as a failed
# write, rightly); the summary's and report's during the run, while
# slowio holds up the output step
( plant "$tmp/s-tmp" "X.pdb.tmp.$BASHPID"
  ESMBATCH_FAULT=slowio:1500 exec "$bin" -q --weights "$w" --num-recycles 0 --devices cpu \
	-i "$tmp/one.fa" -o "$tmp/s-tmp" 2>"$tmp/err" ) &
pid=$!
i=0
while [ ! -e "$tmp/s-tmp/run.jsonl" ] && [ $i -lt 400 ]; do sleep 0.02; i=$((i + 1)); done
plant "$tmp/s-tmp" "summary.tsv.tmp.$pid"
plant "$tmp/s-tmp" "report.html.tmp.$pid"
wait $pid || fail "symlinked temporaries: exit $?: $(cat "$tmp/err")"
for f in summary.tsv report.html X.pdb; do
	untouched "$f.tmp.$pid" "symlinked temporary $f"
	[ -f "$tmp/s-tmp/$f" ] && [ ! -L "$tmp/s-tmp/$f" ] || fail "symlinked temporary: $f not a file"
done
# `report` alone: its temporary's name is known before it starts
( echo $BASHPID >"$tmp/rpid"; plant "$tmp/s-tmp" "report.html.tmp.$BASHPID"
  exec "$bin" report -q -o "$tmp/s-tmp" ) || fail "report: exit $?"
untouched "report.html.tmp.$(cat "$tmp/rpid")" "report's temporary"
[ -f "$tmp/s-tmp/report.html" ] && [ ! -L "$tmp/s-tmp/report.html" ] || fail "report: not a file"
[ "$(find "$tmp/outside" -newer "$tmp/one.fa" -type f | xargs cat | sort -u)" = secret ] ||
	fail "a file outside -o was written"
# a symlink at a record's file: that record fails, the link's target stays
mkdir "$tmp/s-pdb"
plant "$tmp/s-pdb" X.pdb
run -i "$tmp/one.fa" -o "$tmp/s-pdb" 2>"$tmp/err" && fail "symlink X.pdb: exit 0"
untouched X.pdb "symlink X.pdb"
[ -L "$tmp/s-pdb/X.pdb" ] || fail "symlink X.pdb: the link was replaced"
grep -q "X.pdb: exists and is a symbolic link, not a regular file: refused" "$tmp/err" ||
	fail "symlink X.pdb: $(cat "$tmp/err")"

# --- outputs that are not regular files, inputs, or the run's own files ---
# a FIFO at a fragment's final name (200 residues on sim:3M: 4 parts)
python3 -c 'import random; random.seed(3)
print(">L\n" + "".join(random.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(200)))' >"$tmp/long.fa"
mkdir "$tmp/p"
mkfifo "$tmp/p/L.part2of4.pdb"
"$bin" -q --weights "$w" --num-recycles 0 --devices sim:3M -i "$tmp/long.fa" -o "$tmp/p" 2>"$tmp/err" &&
	fail "FIFO at a fragment: exit 0"
[ -p "$tmp/p/L.part2of4.pdb" ] || fail "FIFO at a fragment: replaced"
grep -q "L.part2of4.pdb: exists and is a FIFO, not a regular file: refused" "$tmp/err" ||
	fail "FIFO at a fragment: $(cat "$tmp/err")"
mkfifo "$tmp/fifo"
run -i "$tmp/one.fa" -o "$tmp/d1" --dump-tensors "$tmp/fifo" 2>"$tmp/err"
[ $? -eq 2 ] || fail "--dump-tensors FIFO: exit not 2"
[ -p "$tmp/fifo" ] || fail "--dump-tensors FIFO: the FIFO was replaced"
grep -q "fifo: exists and is a FIFO, not a regular file: refused" "$tmp/err" ||
	fail "--dump-tensors FIFO: $(cat "$tmp/err")"
[ -e "$tmp/d1/X.pdb" ] && fail "--dump-tensors FIFO: folded before refusing"
cp "$tmp/one.fa" "$tmp/in.fa"
run -i "$tmp/in.fa" -o "$tmp/d2" --dump-tensors "$tmp/in.fa" 2>"$tmp/err"
[ $? -eq 2 ] || fail "--dump-tensors onto the input: exit not 2"
cmp -s "$tmp/in.fa" "$tmp/one.fa" || fail "--dump-tensors onto the input: input destroyed"
grep -q "is the input" "$tmp/err" || fail "--dump-tensors onto the input: $(cat "$tmp/err")"
run -i "$tmp/one.fa" -o "$tmp/d3" || fail "d3: exit $?"
cp "$tmp/d3/done.jsonl" "$tmp/done.keep"
run -i "$tmp/one.fa" -o "$tmp/d3" --dump-tensors "$tmp/d3/done.jsonl" 2>"$tmp/err"
[ $? -eq 2 ] || fail "--dump-tensors onto done.jsonl: exit not 2"
cmp -s "$tmp/d3/done.jsonl" "$tmp/done.keep" || fail "--dump-tensors onto done.jsonl: destroyed"
"$bin" -q convert --weights "$w" -o "$tmp/fifo" 2>"$tmp/err" && fail "convert -o FIFO: exit 0"
[ -p "$tmp/fifo" ] || fail "convert -o FIFO: the FIFO was replaced"
cp "$w" "$tmp/w.safetensors"
cp "$w" "$tmp/w.keep"
"$bin" -q convert --weights "$tmp/w.safetensors" -o "$tmp/w.safetensors" 2>"$tmp/err" &&
	fail "convert -o its input: exit 0"
cmp -s "$tmp/w.safetensors" "$tmp/w.keep" || fail "convert -o its input: input rewritten"

# --- a failed rerun keeps the earlier run's files -------------------------
run -i "$tmp/one.fa" -o "$tmp/f" --format pdb || fail "pdb run: exit $?"
cp "$tmp/f/X.pdb" "$tmp/X.pdb.keep"
mkdir "$tmp/f/X.cif"   # in the way: the .cif cannot be written
# another --num-recycles: the refold's PDB differs from the earlier one
"$bin" -q --weights "$w" --num-recycles 1 --devices cpu -i "$tmp/one.fa" -o "$tmp/f" \
	--format pdb,cif 2>"$tmp/err" && fail "cif refused: exit 0"
cmp -s "$tmp/f/X.pdb" "$tmp/X.pdb.keep" || fail "cif refused: the earlier X.pdb is gone or changed"
ls "$tmp/f" | grep -q '\.tmp\.' && fail "cif refused: temporaries left: $(ls "$tmp/f")"

# --- resume checks the files its journal line describes -------------------
run -i "$tmp/one.fa" -o "$tmp/ref" || fail "ref: exit $?"
run -i "$tmp/one.fa" -o "$tmp/r" --shard 1/1 || fail "shard: exit $?"
run -i "$tmp/other.fa" -o "$tmp/r" || fail "other input into the shard's -o: exit $?"
"$bin" merge -q -o "$tmp/r" 2>"$tmp/err" && fail "merge: accepted X.pdb of another sequence"
grep -q "record 0: its file is not the one shard 1/1 folded" "$tmp/err" || fail "merge: $(cat "$tmp/err")"
run -i "$tmp/one.fa" -o "$tmp/r" --shard 1/1 || fail "shard rerun: exit $?"
grep -q '"event":"skip"' "$tmp/r/run.1-of-1.jsonl" && fail "shard rerun: skipped a PDB of another sequence"
cmp -s "$tmp/r/X.pdb" "$tmp/ref/X.pdb" || fail "shard rerun: X.pdb holds another sequence"
"$bin" merge -q -o "$tmp/r" || fail "merge after the shard's rerun: exit $?"
# a row whose file leaves -o, a row with a newline: refolded, nothing forged
run -i "$tmp/one.fa" -o "$tmp/j" || fail "j: exit $?"
cp "$tmp/j/X.pdb" "$tmp/outside/X.pdb"
for edit in outside newline; do
	python3 - "$tmp/j/done.jsonl" "$edit" <<'PY'
import json, sys
p, edit = sys.argv[1], sys.argv[2]
e = json.loads(open(p).read().splitlines()[-1])
if edit == "outside":
    e["row"] = "../outside/X.pdb" + e["row"][len("X.pdb"):]
else:
    e["row"] += "\n99\tforged\tforged.pdb\t20\t-\tok"
open(p, "w").write(json.dumps(e) + "\n")
PY
	run -i "$tmp/one.fa" -o "$tmp/j" || fail "$edit row: exit $?"
	grep -q '"event":"skip"' "$tmp/j/run.jsonl" && fail "$edit row: kept"
	grep -q -e forged -e outside "$tmp/j/summary.tsv" && fail "$edit row: in summary.tsv"
	[ "$(wc -l <"$tmp/j/summary.tsv")" -eq 2 ] || fail "$edit row: $(wc -l <"$tmp/j/summary.tsv") summary lines"
done
finish
