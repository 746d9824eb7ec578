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
