#!/bin/sh
# test_tolerance.sh - the golden tolerance (docs/testing.md) as the
# Python side applies it: tools/check_dump.py passes a dump equal to a
# fixture's expected tensors and one off by half the tolerance, fails one
# off by one and a half times it and one with a NaN in a tensor's last
# element; --tolerance gives the figure the shell tests use;
# tests/check_pdb.py fails a PDB with a NaN coordinate.
# Prints what passed that should not (or the reverse); exit 1 if any.
. "${srcdir:-.}/tests/lib.sh"
fx=$srcdir/tests/data/tiny_a
chk=$srcdir/tools/check_dump.py
seq=len7 tensor=positions

tol=$(python3 "$chk" --tolerance "$fx" "$seq" "$tensor") || fail "--tolerance $seq $tensor: exit $?"
python3 "$chk" --tolerance "$fx" "$seq" no_such_tensor >/dev/null 2>&1 &&
	fail "--tolerance of a tensor with no figure: exit 0"

# dump MODE FACTOR OUT: SEQ's tensors of expected.safetensors as a dump
# (F64), TENSOR's last element moved by FACTOR x tol (MODE off) or NaN
dump() {
	python3 - "$fx/expected.safetensors" "$seq" "$tensor" "$1" "$2" "$tol" "$3" <<'PY'
import json, struct, sys
src, seq, tensor, mode, factor, tol, out = sys.argv[1:]
blob = open(src, "rb").read()
(hlen,) = struct.unpack("<Q", blob[:8])
head, data = json.loads(blob[8:8 + hlen]), blob[8 + hlen:]
codes = {"F64": ("d", 8), "F32": ("f", 4), "I64": ("q", 8), "I32": ("i", 4)}
hdr, body = {}, b""
for name, e in sorted(head.items()):
    if not name.startswith(seq + "/"):
        continue
    code, size = codes[e["dtype"]]
    b, en = e["data_offsets"]
    v = list(struct.unpack("<%d%s" % ((en - b) // size, code), data[b:en]))
    v = [float(x) for x in v]
    if name == seq + "/" + tensor:
        v[-1] = float("nan") if mode == "nan" else v[-1] + float(factor) * float(tol)
    raw = struct.pack("<%dd" % len(v), *v)
    hdr[name] = {"dtype": "F64", "shape": e["shape"], "data_offsets": [len(body), len(body) + len(raw)]}
    body += raw
h = json.dumps(hdr).encode()
open(out, "wb").write(struct.pack("<Q", len(h)) + h + body)
PY
}

dump off 0 "$tmp/same.st" && python3 "$chk" "$tmp/same.st" "$fx" > "$tmp/same" ||
	fail "the expected tensors themselves: $(grep -v ' ok$' "$tmp/same" | head -3)"
dump off 0.5 "$tmp/half.st" && python3 "$chk" "$tmp/half.st" "$fx" > "$tmp/half" ||
	fail "off by 0.5 x tol: $(grep FAIL "$tmp/half" | head -3)"
dump off 1.5 "$tmp/over.st"
python3 "$chk" "$tmp/over.st" "$fx" > "$tmp/over" && fail "off by 1.5 x tol ($tol) passes"
grep -q "^$seq  *$tensor .*FAIL$" "$tmp/over" || fail "off by 1.5 x tol: $tensor not the one failing"
echo "beyond the tolerance: $(grep FAIL "$tmp/over")"
dump nan 0 "$tmp/nan.st"
python3 "$chk" "$tmp/nan.st" "$fx" > "$tmp/nan" && fail "a NaN in the last element of $tensor passes"
echo "a NaN: $(grep FAIL "$tmp/nan")"

# check_pdb.py: the expected PDB as esmbatch writes it (a monomer's TER
# record the full 80 columns), then with one coordinate NaN
need_gemmi
pdb=$fx/expected_len7.esm.pdb
awk '/^TER/ { $0 = sprintf("%-80s", $0) } { print }' "$pdb" > "$tmp/ours.pdb"
awk '/^ATOM/ && !done { $0 = substr($0, 1, 30) sprintf("%8s", "nan") substr($0, 39); done = 1 } { print }' \
	"$tmp/ours.pdb" > "$tmp/nan.pdb"
"$py" "$srcdir/tests/check_pdb.py" "$tmp/ours.pdb" "$pdb" 1e-5 > "$tmp/pdbsame" 2>&1 ||
	fail "check_pdb.py: the expected PDB against itself: $(head -1 "$tmp/pdbsame")"
"$py" "$srcdir/tests/check_pdb.py" "$tmp/nan.pdb" "$pdb" 1e-5 > "$tmp/pdbnan" 2>&1 &&
	fail "check_pdb.py: a NaN coordinate passes"
echo "check_pdb.py, a NaN coordinate: $(head -1 "$tmp/pdbnan")"
finish
