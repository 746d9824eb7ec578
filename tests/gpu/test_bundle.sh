#!/usr/bin/env bash
# test_bundle.sh - the GPU check bundle (tests/gpu/bundle.sh) needs nothing
# a lent machine lacks: built from this build into a fresh folder, every
# program and library in it resolves (ldd) each library it loads inside
# the bundle or to one of bundle.sh --allowed (glibc's, libgcc_s,
# libstdc++, CUDA's); the programs' RUNPATH starts with $ORIGIN/lib; its
# archive (bundle.sh's OUTDIR.tar.gz, what travels) holds its files; and
# its check.sh runs from there, writing only under $OUT (here, without a
# GPU, it stops at test_cuda_ops's skip: exit 77).  Skipped (77) where
# the bundle cannot be built: no CUDA build, no cmocka (no
# tests/test_cuda_ops) or no patchelf.
. "${srcdir:-.}/tests/lib.sh"

top=${TOP_BUILDDIR:-.}
if ! ldd "$bin" 2>/dev/null | grep -q libcudart; then echo "skip: not a CUDA build"; exit 77; fi
if [ ! -x "$top/tests/test_cuda_ops" ]; then echo "skip: no tests/test_cuda_ops (cmocka)"; exit 77; fi
if ! command -v patchelf >/dev/null; then echo "skip: no patchelf"; exit 77; fi

b=$tmp/bundle
"$srcdir/tests/gpu/bundle.sh" "$top" "$srcdir" "$b" || { fail "bundle.sh failed"; finish; }
allowed=$("$srcdir/tests/gpu/bundle.sh" --allowed)
for f in "$b"/esmbatch "$b"/mkweights "$b"/test_cuda_ops "$b"/lib/*; do
	ldd "$f" > "$tmp/ldd" 2>&1 || { fail "ldd $(basename "$f"): $(tail -1 "$tmp/ldd")"; continue; }
	# NAME => PATH (or "not found"); the loader and the vDSO have no "=>"
	while read -r name arrow path _; do
		[ "$arrow" = "=>" ] || continue
		case $path in "$b"/lib/*) continue ;; esac
		grep -Eq "$allowed" <<< "$name" || fail "$(basename "$f"): $name => $path, outside the bundle"
	done < "$tmp/ldd"
done
for p in esmbatch mkweights test_cuda_ops; do
	readelf -d "$b/$p" | grep -q 'RUNPATH.*\[\$ORIGIN/lib' || fail "$p: no RUNPATH \$ORIGIN/lib"
done
echo "bundle: $(du -sb "$b" | cut -f1) bytes, archive $(stat -c %s "$b.tar.gz") bytes"
# the archive (what travels) holds the folder, file for file
(cd "$tmp" && find bundle -type f | sort) > "$tmp/files"
tar -tzf "$b.tar.gz" | grep -v '/$' | sort > "$tmp/archived" || fail "$b.tar.gz: unreadable"
cmp -s "$tmp/files" "$tmp/archived" || fail "$b.tar.gz does not hold the bundle's files"

# check.sh from inside the bundle, with nothing of the build on its paths
mkdir -p "$tmp/scratch"
OUT=$tmp/out SCRATCH=$tmp/scratch "$b/check.sh" > "$tmp/check.out" 2>&1
rc=$?
cat "$tmp/check.out"
if [ -e /dev/nvidia0 ]; then
	echo "a GPU is present: check.sh's result ($rc) is not this test's"
else
	[ $rc -eq 77 ] || fail "check.sh without a GPU: exit $rc, expected 77"
fi
cmp -s "$tmp/check.out" "$tmp/out/summary.txt" || fail "\$OUT/summary.txt is not check.sh's output"
[ -z "$(ls -A "$tmp/scratch")" ] || fail "check.sh left its scratch folder"
finish
