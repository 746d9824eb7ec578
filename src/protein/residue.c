/* rc.c - lookups over the residue-constant tables (tables in rc_tables.c). */
#include "protein/residue.h"

int rc_aatype_of(char c)
{
	if (c >= 'a' && c <= 'z')
		c = (char)(c - 'a' + 'A');
	for (int i = 0; i < RC_NUM_AA; i++)
		if (rc_restypes[i] == c)
			return i;
	return RC_UNK;
}

const char *rc_restype_name3(int aatype)
{
	if (aatype < 0 || aatype >= RC_NUM_RESTYPES)
		aatype = RC_UNK;
	return rc_restype_names3[aatype];
}
