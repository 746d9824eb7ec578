#!/usr/bin/env bash
# test_modelcif.sh - every mmCIF esmbatch writes (tiny_a's and tiny_b's
# records: monomers, X residues, a dimer and a trimer) is valid against
# the PDBx and ModelCIF dictionaries, parent items included (`gemmi
# validate -p`, which must print nothing), and holds the categories that
# AlphaFold DB files and python-modelcif write for readers that use them.
# The gemmi program: $GEMMI, else `gemmi` on PATH (PyPI's gemmi-program);
# the dictionaries: $CIF_DICT_DIR, else Debian's libcifpp-data
# (/usr/share/libcifpp).  Skipped (77) where either is missing.
. "${srcdir:-.}/tests/lib.sh"

gemmi=${GEMMI:-$(command -v gemmi || true)}
dicts=${CIF_DICT_DIR:-/usr/share/libcifpp}
if [ -z "$gemmi" ] || ! [ -x "$gemmi" ] ||
	! [ -r "$dicts/mmcif_pdbx.dic" ] || ! [ -r "$dicts/mmcif_ma.dic" ]; then
	echo "SKIP: no gemmi program or no mmcif_pdbx.dic and mmcif_ma.dic in $dicts"
	exit 77
fi

for fx in tiny_a tiny_b; do
	fixture_fa $fx
	"$bin" -q -i "$tmp/$fx.fa" -o "$tmp/$fx" --weights "$srcdir/tests/data/$fx/weights.safetensors" \
		--num-recycles 0 --format cif || fail "$fx: exit $?"
	# one run for all (the dictionaries load once); a finding names the
	# data block, the record's name
	"$gemmi" validate -p -d "$dicts/mmcif_pdbx.dic" -d "$dicts/mmcif_ma.dic" "$tmp/$fx"/*.cif \
		> "$tmp/validate.out" 2>&1 || fail "$fx: gemmi validate exited $?"
	[ -s "$tmp/validate.out" ] && fail "$fx: $(head -3 "$tmp/validate.out" | tr '\n' ' ')"
	for cif in "$tmp/$fx"/*.cif; do
		n=$fx/$(basename "$cif")
		for cat in _atom_type.symbol _chem_comp_atom.atom_id _pdbx_poly_seq_scheme.seq_id \
			_ma_target_entity.entity_id _ma_target_entity_instance.asym_id; do
			grep -q "^$cat\$" "$cif" || fail "$n: no $cat"
		done
	done
done

finish
