#!/usr/bin/env bash
# test_resume.sh - nothing lost, nothing done twice: a fold of a
# multi-record FASTA (demo model, two workers) is stopped with SIGTERM
# mid-run, rerun and killed with SIGKILL, rerun again.  The stopped run
# leaves complete files only (no *.tmp.PID, no unrenamed fragments) and
# summary.partial.tsv with every row, no summary.tsv (not every record has
# a final outcome); the final rerun writes summary.tsv and removes the
# partial table; the final outputs equal an uninterrupted run's
# (every PDB byte for byte, the summary rows bar the timing and RSS
# columns); from run.jsonl, every record was folded by exactly one run
# and skipped by the later ones.  --force refolds; changed options refold.
. "${srcdir:-.}/tests/lib.sh"
w=$demo
n=10

python3 - "$tmp/in.fa" "$n" <<'PY'
import random, sys
random.seed(7)
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        L = random.randint(100, 200)
        f.write(">p%d\n%s\n" % (i, "".join(random.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(L))))
PY
args=(-q -i "$tmp/in.fa" --weights "$w" --devices cpu --workers 2 --num-recycles 1)
run() { "$bin" "${args[@]}" "$@"; }
# ok folds recorded in a run.jsonl
oks() { cat "$1" 2>/dev/null | grep -c '"status":"ok"'; }
# start a run in the background, send signal $1 once $2 folds are done
run_killed() {
	local sig=$1 after=$2 out=$3 i=0
	rm -f "$out/run.jsonl"   # not an earlier run's
	"$bin" "${args[@]}" -o "$out" 2>"$tmp/err" &   # not run: $! is esmbatch
	local pid=$!
	while [ "$(oks "$out/run.jsonl")" -lt "$after" ] && [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do
		sleep 0.05
		i=$((i + 1))
	done
	kill "-$sig" $pid 2>/dev/null
	{ wait $pid; } 2>/dev/null   # no "Killed" notice from bash
}

run -o "$tmp/ref" || fail "uninterrupted run exited $?"

# SIGTERM: running folds finish, the rest are marked failed, exit 1
run_killed TERM 2 "$tmp/res"
rc=$?
cp "$tmp/res/run.jsonl" "$tmp/run1.jsonl"
[ $rc -eq 1 ] || fail "SIGTERM: expected exit 1, got $rc"
grep -q interrupted "$tmp/err" || fail "SIGTERM: no interrupted message"
ls "$tmp/res" | grep -Eq '\.tmp(\.[0-9]+)?$|\.frag' && fail "SIGTERM left partial files: $(ls "$tmp/res")"
[ "$(tail -n +2 "$tmp/res/summary.partial.tsv" | wc -l)" -eq $n ] || fail "SIGTERM: summary rows"
[ -e "$tmp/res/summary.tsv" ] && fail "SIGTERM: summary.tsv written"
done1=$(awk -F'\t' '$6 == "ok"' "$tmp/res/summary.partial.tsv" | wc -l)
[ "$done1" -ge 2 ] && [ "$done1" -lt $n ] || fail "SIGTERM: $done1 of $n done (expected some, not all)"
[ "$(ls "$tmp/res"/*.pdb | wc -l)" -eq "$done1" ] || fail "SIGTERM: PDBs beside the ok rows"
[ "$(wc -l <"$tmp/res/done.jsonl")" -eq "$done1" ] || fail "SIGTERM: done.jsonl lines"

# SIGKILL during the rerun: complete files and *.tmp only
run_killed KILL 2 "$tmp/res"
cp "$tmp/res/run.jsonl" "$tmp/run2.jsonl"
ls "$tmp/res" | grep -Ev '\.tmp(\.[0-9]+)?$' | grep -q '\.frag' && fail "SIGKILL left fragments"

# the last rerun completes
run -o "$tmp/res" 2>"$tmp/err3" || fail "final rerun exited $?"
cp "$tmp/res/run.jsonl" "$tmp/run3.jsonl"
ls "$tmp/res" | grep -Eq '\.tmp(\.[0-9]+)?$' && fail "temporaries left after the final rerun"
[ -e "$tmp/res/summary.partial.tsv" ] && fail "final rerun: the partial summary left"

python3 - "$n" "$tmp"/run1.jsonl "$tmp"/run2.jsonl "$tmp"/run3.jsonl <<'PY' || fail "a record folded twice or never"
import json, sys
n = int(sys.argv[1])
folded, seen = [], set()
for k, p in enumerate(sys.argv[2:]):
    ev = [json.loads(l) for l in open(p) if l.strip()]
    ok = {e["record"] for e in ev if e["event"] == "fold" and e["status"] == "ok"}
    skip = {e["record"] for e in ev if e["event"] == "skip"}
    if ok & seen:
        sys.exit("run %d folded again: %s" % (k + 1, sorted(ok & seen)))
    if skip != seen:
        sys.exit("run %d skipped %s, earlier runs folded %s" % (k + 1, sorted(skip), sorted(seen)))
    seen |= ok
    folded.append(len(ok))
if seen != set(range(n)):
    sys.exit("never folded: %s" % sorted(set(range(n)) - seen))
print("folds per run:", folded)
PY

# outputs identical to the uninterrupted run's
[ "$(cd "$tmp/ref" && ls *.pdb)" = "$(cd "$tmp/res" && ls *.pdb)" ] || fail "PDB file lists differ"
for f in "$tmp/ref"/*.pdb; do
	cmp -s "$f" "$tmp/res/$(basename "$f")" || fail "$(basename "$f") differs from the uninterrupted run's"
done
rows() { cut -f1-9,11-13 "$1"; }
[ "$(rows "$tmp/ref/summary.tsv")" = "$(rows "$tmp/res/summary.tsv")" ] || fail "summary rows differ"
[ "$(tail -n +2 "$tmp/res/summary.tsv" | cut -f6 | sort -u)" = ok ] || fail "not all ok after resuming"

# two records again: skipped; with --force, or other options, refolded
printf 'p1\np4\n' >"$tmp/names"
run -o "$tmp/res" --names "$tmp/names" || fail "names rerun exited $?"
[ "$(grep -c '"event":"skip"' "$tmp/res/run.jsonl")" -eq 2 ] || fail "names rerun: not skipped"
[ "$(oks "$tmp/res/run.jsonl")" -eq 0 ] || fail "names rerun: folded again"
run -o "$tmp/res" --names "$tmp/names" --force || fail "--force exited $?"
[ "$(oks "$tmp/res/run.jsonl")" -eq 2 ] || fail "--force: not refolded"
cmp -s "$tmp/ref/p1.pdb" "$tmp/res/p1.pdb" || fail "--force: p1.pdb differs"
run -o "$tmp/res" --names "$tmp/names" --num-recycles 0 || fail "--num-recycles 0 exited $?"
[ "$(oks "$tmp/res/run.jsonl")" -eq 2 ] || fail "other options: not refolded"
grep -q 'REMARK 250 RECYCLES 0' "$tmp/res/p4.pdb" || fail "other options: p4.pdb not rewritten"

finish
