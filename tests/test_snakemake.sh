#!/usr/bin/env bash
# test_snakemake.sh - contrib/snakemake/Snakefile on the demo model: the
# example in 2 shards on the CPU, into an output directory and from a FASTA
# whose paths hold a space (the rules quote them), two pretend GPUs (each
# shard, run at once, holds one of its own and sees it in
# CUDA_VISIBLE_DEVICES), then the merge and one report.html; every rule
# logs to OUT/logs; a second run has nothing to do.  A dry run with a
# fair-esm FOLD,LM pair passes both files in one --weights.  Skipped (77)
# where snakemake is not installed.
. "${srcdir:-.}/tests/lib.sh"
if ! command -v snakemake >/dev/null; then
	echo "SKIP: snakemake not installed (pip install snakemake)"
	exit 77
fi
top=$(cd "$srcdir" && pwd)
sf=$top/contrib/snakemake/Snakefile demo=$top/data/demo/esmfold_demo.safetensors
d="$tmp/a dir"
mkdir -p "$d"
cp "$top/data/example.fa" "$d/in put.fa"
# esmbatch, run by the shards at once: each says which GPU it sees, and
# the two fold side by side
cat >"$tmp/esmbatch" <<SH
#!/bin/sh
case " \$* " in *" --shard "*) echo "CUDA_VISIBLE_DEVICES=\${CUDA_VISIBLE_DEVICES-unset}" >&2; sleep 2;; esac
exec "$bin" "\$@"
SH
chmod +x "$tmp/esmbatch"
cd "$d" || exit 99
cfg=("fasta=$d/in put.fa" "weights=$demo" shards=2 "out=$d/out dir" gpus=7,8 threads=1
	"esmbatch=$tmp/esmbatch" "extra=--devices cpu --num-recycles 0")
snakemake -s "$sf" -c2 --resources gpu=2 --config "${cfg[@]}" >"$tmp/smk.log" 2>&1 ||
	{ rc=$?; tail -30 "$tmp/smk.log"; fail "snakemake: exited $rc"; finish; }
o="$d/out dir"
[ "$(tail -n +2 "$o/summary.tsv" | cut -f6 | grep -c '^ok$')" -eq 5 ] ||
	fail "summary.tsv: not 5 records ok: $(cut -f2,6 "$o/summary.tsv" | tr '\n' ' ')"
[ "$(ls "$o"/*.pdb | wc -l)" -eq 5 ] || fail "not 5 PDBs"
[ -s "$o/report.html" ] && [ ! "$o/report.html" -ot "$o/summary.tsv" ] ||
	fail "report.html not rebuilt after the merge"
grep -q '<html' "$o/report.html" || fail "report.html: not a page"
for l in shard.1-of-2 shard.2-of-2 merge report; do
	[ -f "$o/logs/$l.log" ] || fail "no log $l.log"
done
g1=$(sed -n 's/^CUDA_VISIBLE_DEVICES=//p' "$o/logs/shard.1-of-2.log")
g2=$(sed -n 's/^CUDA_VISIBLE_DEVICES=//p' "$o/logs/shard.2-of-2.log")
case "$g1:$g2" in
7:8 | 8:7) ;;
*) fail "the shards' GPUs: '$g1' and '$g2', not 7 and 8 one each" ;;
esac
snakemake -s "$sf" -c2 -n --resources gpu=2 --config "${cfg[@]}" >"$tmp/again.log" 2>&1 ||
	fail "snakemake again: exited $?"
grep -q 'Nothing to be done' "$tmp/again.log" || fail "a second run has work: $(tail -5 "$tmp/again.log")"

# FOLD,LM: both inputs of the shard, one --weights
: >"$tmp/esmfold_3B_v1.pt"; : >"$tmp/esm2_t36_3B_UR50D.pt"
snakemake -s "$sf" -c1 -n -p --config "fasta=$d/in put.fa" \
	"weights=$tmp/esmfold_3B_v1.pt,$tmp/esm2_t36_3B_UR50D.pt" shards=2 "out=$tmp/pair" \
	>"$tmp/pair.log" 2>&1 || fail "snakemake -n with FOLD,LM: exited $? $(tail -5 "$tmp/pair.log")"
grep -qF -- "--weights $tmp/esmfold_3B_v1.pt,$tmp/esm2_t36_3B_UR50D.pt " "$tmp/pair.log" ||
	fail "FOLD,LM: not one --weights FOLD,LM: $(grep -m1 -- --weights "$tmp/pair.log")"
finish
