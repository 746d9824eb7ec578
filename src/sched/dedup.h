/* dedup.h (prefix dedup_) - which records of a run fold the same
 * sequence: a hash table from the sequence as the model folds it to the
 * first record that brought it.
 *
 * Two sequences are the same when the tokenizer makes the same input of
 * them: letter by letter the same residue type (case is the reader's,
 * already upper; every letter the model has no type of, B, Z, U, O, J, X,
 * is X), and the chain breaks (':', each the same 25-residue linker) in
 * the same places.  Such records give the same structure: only their
 * names differ.
 */
#ifndef ESMBATCH_SCHED_DEDUP_H
#define ESMBATCH_SCHED_DEDUP_H

typedef struct dedup dedup_t;

dedup_t *dedup_init(void);
void     dedup_free(dedup_t *d);
/* Record rec folds seq (a job's sequence: upper-case, ':' between
 * chains).  The first record added whose sequence is the same (itself
 * when none was), or -1 out of memory.  seq is copied. */
int      dedup_add(dedup_t *d, const char *seq, int rec);
/* distinct sequences added so far */
int      dedup_count(const dedup_t *d);

#endif
