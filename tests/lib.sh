# lib.sh - what the shell tests share; each sources it first:
#     . "${srcdir:-.}/tests/lib.sh"
# Run by `make check` from the build directory: srcdir is the source tree,
# bin the esmbatch binary ($ESMBATCH, else ./esmbatch), mkw the weights
# generator ($MKWEIGHTS, else ./tools/mkweights), demo the demo model, tmp
# a fresh directory removed at exit.  fail MSG counts a failure; finish
# prints the count and exits 1 if there was any, else 0.
set -u
srcdir=${srcdir:-.}
bin=${ESMBATCH:-./esmbatch}
mkw=${MKWEIGHTS:-./tools/mkweights}
demo=$srcdir/data/demo/esmfold_demo.safetensors
test_name=$(basename "$0" .sh)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/esmbatch-$test_name.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
finish() {
	echo "$test_name: $fails failure(s)"
	[ "$fails" -eq 0 ] && exit 0
	exit 1
}

# need_gemmi: py = a python3 that imports gemmi (Debian's python3-gemmi
# lives in /usr/bin/python3); without one the test fails at once
need_gemmi() {
	py=
	for p in python3 /usr/bin/python3; do
		if "$p" -c 'import gemmi' 2>/dev/null; then py=$p; return 0; fi
	done
	echo "FAIL: no python3 with gemmi (install python3-gemmi)"
	exit 1
}

# need_biopython: after need_gemmi, that python3 imports Biopython too
# (Debian's python3-biopython); without it the test fails at once
need_biopython() {
	"$py" -c 'import Bio.PDB' 2>/dev/null && return 0
	echo "FAIL: $py cannot import Bio.PDB (install python3-biopython)"
	exit 1
}

# mkfa SEED FILE NAME=LENGTH[:LENGTH..] ...: a FASTA of one record per
# argument, in order, its chains random sequences of those lengths
# (python3's random, seeded with SEED, drawn chain after chain) joined by
# the ':' linker; LENGTH "bad": the record MK1Z, which the reader refuses
mkfa() {
	python3 - "$@" <<'PY'
import random, sys
random.seed(int(sys.argv[1]))
with open(sys.argv[2], "w") as f:
    for a in sys.argv[3:]:
        name, lens = a.rsplit("=", 1)
        s = "MK1Z" if lens == "bad" else ":".join(
            "".join(random.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(int(L)))
            for L in lens.split(":"))
        f.write(">%s\n%s\n" % (name, s))
PY
}

# fixture_fa FX: tests/data/FX's sequences as esmbatch reads them into
# $tmp/FX.fa (the fixture README: lower-case letters are fed as X)
fixture_fa() {
	awk '/^>/ { print; next } { gsub(/[a-z]/, "X"); print }' \
		"$srcdir/tests/data/$1/sequences.fa" > "$tmp/$1.fa"
}

# check_fixture FX OUT DUMP LABEL: a fold of $tmp/FX.fa into OUT against
# the fixture: every tensor of DUMP within the golden tolerance
# (docs/testing.md; tools/check_dump.py), a summary row per record, every
# PDB within its atom37_positions tolerance (check_dump.py --tolerance) by
# tests/check_pdb.py; needs need_gemmi
check_fixture() {
	local d=$srcdir/tests/data/$1 out=$2 dump=$3 label=$4 pdb n tol rows
	"$py" "$srcdir/tools/check_dump.py" "$dump" "$d" > "$dump.check" ||
		fail "$label: tensors off the reference: $(grep -v ' ok$' "$dump.check" | head -5)"
	echo "$label: $(tail -1 "$dump.check")"
	rows=$(tail -n +2 "$out/summary.tsv" | wc -l)
	[ "$rows" -eq "$(grep -c '^>' "$tmp/$1.fa")" ] || fail "$label: $rows summary rows"
	for pdb in "$out"/*.pdb; do
		n=$(basename "$pdb" .pdb)
		tol=$("$py" "$srcdir/tools/check_dump.py" --tolerance "$d" "$n" atom37_positions)
		"$py" "$srcdir/tests/check_pdb.py" "$pdb" "$d/expected_$n.esm.pdb" "$tol" >/dev/null ||
			fail "$label: $("$py" "$srcdir/tests/check_pdb.py" "$pdb" "$d/expected_$n.esm.pdb" "$tol")"
	done
}
