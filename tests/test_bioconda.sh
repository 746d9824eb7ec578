#!/usr/bin/env bash
# test_bioconda.sh - contrib/bioconda's recipe outside conda: build.sh's
# configure / make / make install (the CPU build) run in a fresh copy of
# the release tree (`make distdir`) into a temporary prefix, then every
# command of meta.yaml's test section against that prefix, from an empty
# directory: the installed esmbatch folds the installed example.  The
# recipe's version is the package's, and meta.yaml passes
# tests/lint_recipe.py (licence, URL, sha256, CUDA fields) as the template
# and as set-release makes it from a tarball, and fails with a zero sha256
# not marked as the template.
. "${srcdir:-.}/tests/lib.sh"
: "${TOP_BUILDDIR:?run by make check}" "${MAKE:=make}"
meta=$srcdir/contrib/bioconda/meta.yaml
version=$(sed -n 's/^{% set version = "\(.*\)" %}$/\1/p' "$meta")
[ "$version" = "$("$bin" --version | sed -n '1s/^esmbatch //p')" ] ||
	fail "meta.yaml: version $version, esmbatch $("$bin" --version | head -1)"

lint=$srcdir/tests/lint_recipe.py
python3 "$lint" "$meta" "$srcdir" 2>"$tmp/lint.log" || fail "$(cat "$tmp/lint.log")"
mkdir "$tmp/recipe"
cp "$meta" "$srcdir/contrib/bioconda/set-release" "$tmp/recipe/"
sed '/^# recipe-template$/d' "$meta" >"$tmp/recipe/unmarked.yaml"
python3 "$lint" "$tmp/recipe/unmarked.yaml" 2>"$tmp/lint.log" &&
	fail "lint_recipe.py: accepted a zero sha256 outside the template"
grep -q 'all zeros' "$tmp/lint.log" || fail "lint_recipe.py: $(cat "$tmp/lint.log")"
echo release >"$tmp/esmbatch-9.8.7.tar.gz"
sh "$tmp/recipe/set-release" "$tmp/esmbatch-9.8.7.tar.gz" >/dev/null || fail "set-release: exited $?"
sum=$(sha256sum "$tmp/esmbatch-9.8.7.tar.gz" | cut -d' ' -f1)
grep -q "set sha256 = \"$sum\"" "$tmp/recipe/meta.yaml" || fail "set-release: sha256 not written"
grep -q 'set version = "9.8.7"' "$tmp/recipe/meta.yaml" || fail "set-release: version not written"
python3 "$lint" "$tmp/recipe/meta.yaml" 2>"$tmp/lint.log" ||
	fail "the recipe set-release wrote: $(cat "$tmp/lint.log")"

$MAKE -C "$TOP_BUILDDIR" distdir distdir="$tmp/src" >"$tmp/distdir.log" 2>&1 ||
	{ tail -20 "$tmp/distdir.log"; fail "make distdir: exited $?"; finish; }
[ -s "$tmp/src/LICENSE" ] || fail "the release tree has no LICENSE (meta.yaml's license_file)"
p=$tmp/prefix
# conda-build's environment for build.sh: PREFIX, CPU_COUNT, the variant
(cd "$tmp/src" && env -u MAKEFLAGS -u MFLAGS PREFIX="$p" CPU_COUNT=2 cuda_compiler_version=None \
	bash contrib/bioconda/build.sh) >"$tmp/build.log" 2>&1 ||
	{ tail -20 "$tmp/build.log"; fail "build.sh: exited $?"; finish; }

# meta.yaml's test commands: the list under "test:" / "commands:"
python3 - "$meta" >"$tmp/commands" <<'PY' || fail "meta.yaml: no test commands"
import sys
section = sub = None
out = []
for line in open(sys.argv[1]):
    if line.strip().startswith("#") or not line.strip():
        continue
    if not line.startswith(" "):
        section = line.split(":")[0]
        continue
    if section != "test":
        continue
    if line.startswith("  ") and not line.startswith("    "):
        sub = line.strip().rstrip(":")
        continue
    if sub == "commands" and line.strip().startswith("- "):
        out.append(line.strip()[2:])
assert out
print("\n".join(out))
PY
mkdir "$tmp/t"
n=0
while IFS= read -r c; do
	n=$((n + 1))
	(cd "$tmp/t" && env -u ESMBATCH_WEIGHTS PREFIX="$p" PATH="$p/bin:$PATH" bash -euc "$c") \
		>"$tmp/cmd.log" 2>&1 || fail "test command $n: $c: $(tail -3 "$tmp/cmd.log")"
done <"$tmp/commands"
[ "$n" -ge 5 ] || fail "meta.yaml: only $n test commands"
grep -q 'esmfold_demo.safetensors' "$tmp/commands" || fail "meta.yaml: no test folds the installed example"
finish
