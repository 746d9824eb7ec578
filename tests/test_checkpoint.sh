#!/usr/bin/env bash
# test_checkpoint.sh - folds from PyTorch checkpoints (tests/data, written by
# tools/mk_torch_fixtures.py) against folds from the safetensors fixtures:
# HF's pytorch_model.bin (fp32) gives byte-identical PDBs (the weights
# fingerprint included); fair-esm's pair (esmfold.pt + esm2.pt, by
# --lm-weights or as a comma list, with config.json beside them or with only
# the checkpoints' cfg) gives identical PDBs but for the fingerprint line;
# the fp16 checkpoints fold.  The legacy file and every file of the hostile
# catalogue are refused: one error line, exit 1, no crash.  `convert` and
# `version --weights` on the checkpoints.
set -u
srcdir=${srcdir:-.}
bin=${ESMBATCH:-./esmbatch}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/esmbatch-ckpt.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# same PDBs in $1 and $2 (with $3 = nofp: but for the REMARK 250 WEIGHTS line)
same() {
	local n=0
	for p in "$1"/*.pdb; do
		q=$2/$(basename "$p")
		n=$((n + 1))
		if [ "${3:-}" = nofp ]; then
			cmp -s <(grep -v 'REMARK 250 WEIGHTS' "$p") <(grep -v 'REMARK 250 WEIGHTS' "$q") || return 1
		else
			cmp -s "$p" "$q" || return 1
		fi
	done
	[ "$n" -gt 0 ]
}

for fx in tiny_a tiny_b; do
	d=$srcdir/tests/data/$fx
	awk '/^>/ { print; next } { gsub(/[a-z]/, "X"); print }' "$d/sequences.fa" > "$tmp/$fx.fa"
	run() { "$bin" -q -t 2 -i "$tmp/$fx.fa" -o "$tmp/$fx.$1" --weights "$2" "${@:3}" || fail "$fx $1: exit $?"; }
	run st "$d/weights.safetensors"
	if [ -f "$d/pytorch_model.bin" ]; then
		run bin "$d/pytorch_model.bin"
		same "$tmp/$fx.st" "$tmp/$fx.bin" || fail "$fx: pytorch_model.bin folds differently"
	fi
	run fair "$d/esmfold.pt" --lm-weights "$d/esm2.pt"
	run list "$d/esmfold.pt,$d/esm2.pt"
	if [ "$fx" = tiny_a ]; then
		same "$tmp/$fx.st" "$tmp/$fx.fair" nofp || fail "$fx: the fair-esm pair folds differently"
		same "$tmp/$fx.fair" "$tmp/$fx.list" || fail "$fx: --lm-weights and the comma list differ"
		# no config.json beside them: the checkpoints' cfg over the published defaults
		mkdir -p "$tmp/nocfg"
		cp "$d/esmfold.pt" "$d/esm2.pt" "$tmp/nocfg/"
		"$bin" -t 2 -i "$tmp/$fx.fa" -o "$tmp/$fx.nocfg" --weights "$tmp/nocfg/esmfold.pt" \
			--lm-weights "$tmp/nocfg/esm2.pt" 2> "$tmp/nocfg.log" || fail "$fx nocfg: exit $?"
		grep -q "configuration from the checkpoint's cfg" "$tmp/nocfg.log" || fail "$fx nocfg: no log line on the cfg"
		same "$tmp/$fx.st" "$tmp/$fx.nocfg" nofp || fail "$fx: the pair without config.json folds differently"
		# a tiny pytorch_model.bin alone: the published configuration does not fit, one line
		cp "$d/pytorch_model.bin" "$tmp/nocfg/"
		"$bin" -q -i "$tmp/$fx.fa" -o "$tmp/$fx.nofit" --weights "$tmp/nocfg/pytorch_model.bin" 2> "$tmp/err"
		rc=$?
		[ "$rc" -eq 1 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "does not fit the configuration" "$tmp/err" ||
			fail "$fx: a checkpoint that does not fit the published configuration: exit $rc, $(head -3 "$tmp/err")"
	fi
	run fp16 "$d/pytorch_model_fp16.bin"
	[ "$(ls "$tmp/$fx.fp16"/*.pdb | wc -l)" -eq "$(ls "$tmp/$fx.st"/*.pdb | wc -l)" ] || fail "$fx fp16: PDBs missing"
done

# convert: the pair as one safetensors file (+ config.json) folds alike; the
# converted pytorch_model.bin has the safetensors fixture's fingerprint
d=$srcdir/tests/data/tiny_a
mkdir -p "$tmp/conv" "$tmp/conv2"
"$bin" convert -q --weights "$d/esmfold.pt" --lm-weights "$d/esm2.pt" -o "$tmp/conv/pair.safetensors" ||
	fail "convert the pair: exit $?"
[ -s "$tmp/conv/config.json" ] || fail "convert: no config.json beside its output"
"$bin" -q -t 2 -i "$tmp/tiny_a.fa" -o "$tmp/tiny_a.conv" --weights "$tmp/conv/pair.safetensors" ||
	fail "fold from the converted pair: exit $?"
same "$tmp/tiny_a.st" "$tmp/tiny_a.conv" nofp || fail "the converted pair folds differently"
"$bin" convert -q --weights "$d/pytorch_model.bin" -o "$tmp/conv2/bin.safetensors" || fail "convert the .bin: exit $?"
fp() { "$bin" version --weights "$1" | sed -n 's/^fingerprint: //p'; }
[ "$(fp "$tmp/conv2/bin.safetensors")" = "$(fp "$d/weights.safetensors")" ] ||
	fail "converted pytorch_model.bin: fingerprint $(fp "$tmp/conv2/bin.safetensors"), not $(fp "$d/weights.safetensors")"
"$bin" version --weights "$d/pytorch_model.bin" | grep -q '^parameters: 399948$' || fail "version --weights: parameter count"
"$bin" version --weights "$srcdir/tests/data/tiny_b/pytorch_model_fp16.bin" | grep -q '^dtype F16: ' ||
	fail "version --weights: no F16 line for the fp16 checkpoint"

# refused: one error line naming the file, exit 1
for f in legacy.pt hostile/truncated.pt hostile/offset_past.pt hostile/os_system.pt \
	hostile/other_class.pt hostile/huge_size.pt hostile/deep.pt hostile/bomb.pt; do
	"$bin" -q -i "$tmp/tiny_a.fa" -o "$tmp/hostile" --weights "$srcdir/tests/data/$f" 2> "$tmp/err"
	rc=$?
	[ "$rc" -eq 1 ] || fail "$f: exit $rc, expected 1"
	[ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "$f: $(wc -l < "$tmp/err") lines on stderr: $(head -3 "$tmp/err")"
	grep -q "error: .*$(basename "$f")" "$tmp/err" || fail "$f: the error does not name the file: $(cat "$tmp/err")"
	echo "$f: $(cat "$tmp/err")"
done
"$bin" -q -i "$tmp/tiny_a.fa" -o "$tmp/x" --lm-weights "$srcdir/tests/data/tiny_a/esm2.pt" 2> "$tmp/err"
[ $? -eq 2 ] || fail "--lm-weights without --weights: not a usage error"

echo "test_checkpoint: $fails failure(s)"
[ "$fails" -eq 0 ]
