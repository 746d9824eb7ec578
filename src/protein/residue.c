/* residue.c - lookups over the residue-constant tables (tables in residue_tables.c). */
#include "protein/residue.h"

int residue_aatype_of(char c)
{
	if (c >= 'a' && c <= 'z')
		c = (char)(c - 'a' + 'A');
	for (int i = 0; i < RESIDUE_NUM_AA; i++)
		if (residue_restypes[i] == c)
			return i;
	return RESIDUE_UNK;
}

const char *residue_restype_name3(int aatype)
{
	if (aatype < 0 || aatype >= RESIDUE_NUM_RESTYPES)
		aatype = RESIDUE_UNK;
	return residue_restype_names3[aatype];
}
