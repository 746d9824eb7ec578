/* fasta.c - streaming FASTA reader and record validation (see fasta.h).
 *
 * The stream is read through BGZF in 64 KiB blocks and split into lines
 * here, so that a file with no newlines (a binary by mistake) cannot make
 * one line grow without bound: lines come in chunks of at most LINE_CHUNK
 * bytes, and a sequence stops growing at FASTA_MAX_LEN.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <htslib/bgzf.h>
#include <htslib/faidx.h>
#include <htslib/hts.h>
#include <htslib/khash_str2int.h>
#include <htslib/kstring.h>

#include "io/fasta.h"
#include "util/log.h"

#define BUF_SIZE   65536
#define LINE_CHUNK (1 << 22)

/* --- incremental sequence check ----------------------------------------- */

typedef struct {
	kstring_t seq;        /* accepted characters, upper-cased */
	int64_t   pos;        /* characters seen so far (1-based positions) */
	int64_t   nres;       /* residues (':' not counted) */
	int64_t   star_pos;   /* position of a '*' not yet known to be terminal */
	int64_t   star_line;
	int64_t   last_line;
	int       nchains;
	int       bad;        /* first problem found; why holds it */
	char      why[160];
} chk_t;

static void chk_reset(chk_t *c)
{
	c->seq.l = 0;
	if (c->seq.s)
		c->seq.s[0] = '\0';
	c->pos = c->nres = c->star_pos = c->star_line = c->last_line = 0;
	c->nchains = 1;
	c->bad = 0;
	c->why[0] = '\0';
}

static const char *at_line(char *buf, size_t cap, int64_t line)
{
	if (line > 0)
		snprintf(buf, cap, " (line %lld)", (long long)line);
	else
		buf[0] = '\0';
	return buf;
}

static void chk_bad(chk_t *c, unsigned char ch, int64_t pos, int64_t line)
{
	char l[40];
	at_line(l, sizeof l, line);
	if (ch == '*')
		snprintf(c->why, sizeof c->why,
		         "'*' inside the sequence at position %lld%s",
		         (long long)pos, l);
	else if (ch > 0x20 && ch < 0x7f)
		snprintf(c->why, sizeof c->why,
		         "invalid character '%c' at position %lld%s",
		         ch, (long long)pos, l);
	else
		snprintf(c->why, sizeof c->why,
		         "invalid byte 0x%02x at position %lld%s",
		         ch, (long long)pos, l);
	c->bad = 1;
}

/* feed n bytes of sequence text (no line terminator) */
static void chk_feed(chk_t *c, const char *s, size_t n, int64_t line)
{
	char l[40];

	c->last_line = line;
	for (size_t i = 0; i < n && !c->bad; i++) {
		unsigned char ch = (unsigned char)s[i];
		c->pos++;
		if (c->star_pos) {   /* anything after a '*' makes it inner */
			chk_bad(c, '*', c->star_pos, c->star_line);
			return;
		}
		if (ch == '*') {
			c->star_pos = c->pos;
			c->star_line = line;
			continue;
		}
		if (ch == ':') {
			if (c->seq.l == 0) {
				snprintf(c->why, sizeof c->why,
				         "chain separator ':' at the start, position %lld%s",
				         (long long)c->pos, at_line(l, sizeof l, line));
				c->bad = 1;
				return;
			}
			if (c->seq.s[c->seq.l - 1] == ':') {
				snprintf(c->why, sizeof c->why,
				         "empty chain '::' at position %lld%s",
				         (long long)c->pos, at_line(l, sizeof l, line));
				c->bad = 1;
				return;
			}
			c->nchains++;
		} else if (isalpha(ch) && ch < 0x80) {
			ch = (unsigned char)toupper(ch);
			c->nres++;
		} else {
			chk_bad(c, ch, c->pos, line);
			return;
		}
		if (c->seq.l >= FASTA_MAX_LEN) {
			snprintf(c->why, sizeof c->why,
			         "sequence longer than %d residues", FASTA_MAX_LEN);
			c->bad = 1;
			return;
		}
		kputc(ch, &c->seq);
	}
}

/* checks at the end of the record; a pending '*' was terminal */
static void chk_end(chk_t *c)
{
	if (c->bad)
		return;
	if (c->nres == 0) {
		snprintf(c->why, sizeof c->why, "empty sequence");
		c->bad = 1;
	} else if (c->seq.s[c->seq.l - 1] == ':') {
		char l[40];
		snprintf(c->why, sizeof c->why,
		         "chain separator ':' at the end, position %lld%s",
		         (long long)(c->star_pos ? c->star_pos - 1 : c->pos),
		         at_line(l, sizeof l, c->last_line));
		c->bad = 1;
	}
}

int fasta_check_seq(char *seq, int64_t *len, int *nchains,
                    char *why, size_t why_cap)
{
	chk_t c;
	int rc = 0;

	memset(&c, 0, sizeof c);
	chk_reset(&c);
	chk_feed(&c, seq, strlen(seq), 0);
	chk_end(&c);
	if (c.bad) {
		if (why && why_cap)
			snprintf(why, why_cap, "%s", c.why);
		rc = -1;
	} else {
		memcpy(seq, c.seq.s, c.seq.l + 1);
		if (len) *len = c.nres;
		if (nchains) *nchains = c.nchains;
	}
	free(c.seq.s);
	return rc;
}

/* --- the reader ------------------------------------------------------- */

enum { SAFETENSORS_START, SAFETENSORS_HEADER, SAFETENSORS_DONE };

struct fasta {
	char        *path;
	BGZF        *fp;
	faidx_t     *fai;
	void        *fai_recno;  /* faidx: name -> 1-based record number */
	unsigned char *buf;
	size_t       bpos, blen;
	int          eof;        /* the stream is exhausted */
	int          mid_line;   /* the last chunk did not end its line */
	int64_t      lineno;     /* line of the last chunk returned */
	int          state;
	kstring_t    line;       /* current line chunk */
	kstring_t    hdr;        /* pending header line, without '>' */
	int64_t      hdr_line;
	int64_t      recno;
	int64_t      njobs;
	chk_t        chk;
	job_names_t *outnames;
	/* --names */
	char        *names_path;
	char       **want;       /* names in file order */
	int         *seen;
	int          nwant, want_pos;
	void        *want_idx;   /* name -> index into want */
};

const char *fasta_path(const fasta_t *r) { return r->path; }
int fasta_uses_index(const fasta_t *r) { return r->fai != NULL; }

static int fill(fasta_t *r)
{
	ssize_t n;

	errno = 0;
	n = bgzf_read(r->fp, r->buf, BUF_SIZE);
	if (n < 0) {
		if (errno && errno != EINVAL && errno != EIO)
			log_error("%s: read error: %s", r->path, strerror(errno));
		else
			log_error("%s: read error: corrupt or truncated compressed data",
			          r->path);
		return -1;
	}
	r->bpos = 0;
	r->blen = (size_t)n;
	if (n == 0)
		r->eof = 1;
	return n > 0;
}

/* Next chunk of a line into r->line: 1 (more = 1 when the line goes on),
 * 0 at end of input, -1 on a read error. */
static int rd_line(fasta_t *r, int *more, int *starts_line)
{
	int got = 0;

	r->line.l = 0;
	*starts_line = !r->mid_line;
	if (!r->mid_line)
		r->lineno++;
	for (;;) {
		if (r->bpos == r->blen) {
			int rc;
			if (r->eof)
				break;
			rc = fill(r);
			if (rc < 0)
				return -1;
			if (rc == 0)
				break;
		}
		unsigned char *p = r->buf + r->bpos;
		size_t avail = r->blen - r->bpos;
		size_t room = LINE_CHUNK - r->line.l;
		size_t take = avail < room ? avail : room;
		unsigned char *nl = memchr(p, '\n', take);
		got = 1;
		if (nl) {
			kputsn((char *)p, (size_t)(nl - p), &r->line);
			r->bpos += (size_t)(nl - p) + 1;
			r->mid_line = 0;
			*more = 0;
			return 1;
		}
		kputsn((char *)p, take, &r->line);
		r->bpos += take;
		if (r->line.l >= LINE_CHUNK) {
			r->mid_line = 1;
			*more = 1;
			return 1;
		}
	}
	r->mid_line = 0;
	*more = 0;
	if (!got && *starts_line)
		r->lineno--;
	return got;
}

static int is_blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
			return 0;
	return 1;
}

static size_t trim_end(const char *s, size_t n)
{
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		n--;
	return n;
}

/* r->line holds the first chunk of a header line: keep it in r->hdr
 * (cut at FASTA_MAX_HEADER), drain the rest of the line. */
static int take_header(fasta_t *r, int more)
{
	size_t n = r->line.l - 1;

	if (n > FASTA_MAX_HEADER)
		n = FASTA_MAX_HEADER;
	r->hdr.l = 0;
	kputsn(r->line.s + 1, n, &r->hdr);
	r->hdr_line = r->lineno;
	while (more) {
		int sl;
		if (rd_line(r, &more, &sl) < 0)
			return -1;
	}
	return 0;
}

static int load_names(fasta_t *r, const char *path)
{
	FILE *fp = fopen(path, "r");
	char *ln = NULL;
	size_t cap = 0;
	ssize_t n;
	int lno = 0;

	if (!fp) {
		log_error("%s: cannot open names file: %s", path, strerror(errno));
		return -1;
	}
	r->want_idx = khash_str2int_init();
	while ((n = getline(&ln, &cap, fp)) >= 0) {
		char *s = ln, *e;
		lno++;
		while (*s == ' ' || *s == '\t')
			s++;
		for (e = s; *e && !isspace((unsigned char)*e); e++)
			;
		*e = '\0';
		if (!*s)
			continue;
		if (khash_str2int_has_key(r->want_idx, s)) {
			log_warn("%s:%d: '%s' is listed twice; folding it once",
			         path, lno, s);
			continue;
		}
		char **w = realloc(r->want, (size_t)(r->nwant + 1) * sizeof *w);
		if (!w)
			goto oom;
		r->want = w;
		if (!(r->want[r->nwant] = strdup(s)))
			goto oom;
		khash_str2int_set(r->want_idx, r->want[r->nwant], r->nwant);
		r->nwant++;
	}
	if (ferror(fp)) {
		log_error("%s: read error: %s", path, strerror(errno));
		goto fail;
	}
	free(ln);
	fclose(fp);
	r->seen = calloc((size_t)r->nwant + 1, sizeof *r->seen);
	if (!r->seen) {
		log_error("out of memory");
		return -1;
	}
	if (r->nwant == 0)
		log_warn("%s: no names in the names file", path);
	return 0;
oom:
	log_error("out of memory");
fail:
	free(ln);
	fclose(fp);
	return -1;
}

static int try_faidx(fasta_t *r)
{
	char *fai_path;
	int ok;

	if (strcmp(r->path, "-") == 0)
		return 0;
	if (asprintf(&fai_path, "%s.fai", r->path) < 0)
		return -1;
	ok = access(fai_path, R_OK) == 0;
	if (ok) {
		/* an index older than its file describes other bytes */
		struct stat fs, is;
		if (stat(r->path, &fs) == 0 && stat(fai_path, &is) == 0 &&
		    (fs.st_mtim.tv_sec > is.st_mtim.tv_sec ||
		     (fs.st_mtim.tv_sec == is.st_mtim.tv_sec && fs.st_mtim.tv_nsec > is.st_mtim.tv_nsec))) {
			log_warn("%s: the index %s is stale (older than the file); reading the whole file",
			         r->path, fai_path);
			ok = 0;
		}
	}
	if (ok) {
		r->fai = fai_load3(r->path, fai_path, NULL, 0);
		if (!r->fai)
			log_warn("%s: cannot use the index %s; reading the whole file",
			         r->path, fai_path);
	}
	free(fai_path);
	if (r->fai) {
		int n = faidx_nseq(r->fai);
		r->fai_recno = khash_str2int_init();
		for (int i = 0; i < n; i++)
			khash_str2int_set(r->fai_recno, faidx_iseq(r->fai, i), i + 1);
		log_debug("%s: using the .fai index for %d names", r->path, r->nwant);
	}
	return 0;
}

fasta_t *fasta_open(const char *path, const char *names_file)
{
	fasta_t *r;

	if (!path || !*path) {
		log_error("no input file given");
		return NULL;
	}
	if (log_get_level() < LOG_DEBUG)
		hts_set_log_level(HTS_LOG_OFF);
	r = calloc(1, sizeof *r);
	if (!r || !(r->path = strdup(path)) || !(r->buf = malloc(BUF_SIZE)) ||
	    !(r->outnames = job_names_init())) {
		log_error("out of memory");
		goto fail;
	}
	chk_reset(&r->chk);
	if (names_file) {
		if (!(r->names_path = strdup(names_file))) {
			log_error("out of memory");
			goto fail;
		}
		if (load_names(r, names_file) < 0 || try_faidx(r) < 0)
			goto fail;
	}
	if (!r->fai) {
		errno = 0;
		r->fp = bgzf_open(path, "r");
		if (!r->fp) {
			log_error("%s: cannot open: %s", path,
			          errno ? strerror(errno) : "not a readable file");
			goto fail;
		}
		if (bgzf_compression(r->fp) == bgzf && bgzf_check_EOF(r->fp) == 0)
			log_warn("%s: BGZF end-of-file marker missing: the file may be truncated",
			         path);
	}
	r->state = r->fai ? SAFETENSORS_DONE : SAFETENSORS_START;
	return r;
fail:
	fasta_close(r);
	return NULL;
}

void fasta_close(fasta_t *r)
{
	if (!r)
		return;
	if (r->fp)
		bgzf_close(r->fp);
	if (r->fai)
		fai_destroy(r->fai);
	khash_str2int_destroy(r->fai_recno);
	for (int i = 0; i < r->nwant; i++)
		free(r->want[i]);
	free(r->want);
	free(r->seen);
	khash_str2int_destroy(r->want_idx);
	free(r->names_path);
	free(r->chk.seq.s);
	free(r->line.s);
	free(r->hdr.s);
	free(r->buf);
	job_names_free(r->outnames);
	free(r->path);
	free(r);
}

/* --- building jobs ------------------------------------------------------ */

static int job_start(fasta_t *r, job_t *j, int64_t recno,
                     const char *header, const char *name)
{
	job_free(j);
	j->index = r->njobs++;
	j->recno = recno;
	j->header = strdup(header);
	j->name = strdup(name);
	if (!j->header || !j->name ||
	    job_names_assign(r->outnames, name, recno, &j->outname) < 0) {
		log_error("out of memory");
		return -1;
	}
	return 0;
}

/* finish j from r->chk: ok with the sequence, or failed with the reason */
static int job_finish(fasta_t *r, job_t *j)
{
	chk_end(&r->chk);
	if (r->chk.bad) {
		if (job_fail(j, "record %lld '%.64s': %s", (long long)j->recno,
		             j->name, r->chk.why) < 0) {
			log_error("out of memory");
			return -1;
		}
		return 1;
	}
	j->seq = ks_release(&r->chk.seq);
	j->len = r->chk.nres;
	j->nchains = r->chk.nchains;
	j->status = JOB_OK;
	return 1;
}

/* split a header into its display form (in place) and name (into name) */
static void parse_header(char *h, kstring_t *name)
{
	size_t i = 0, n = trim_end(h, strlen(h));
	h[n] = '\0';
	while (h[i] == ' ' || h[i] == '\t')
		i++;
	name->l = 0;
	kputs("", name);
	while (h[i] && !isspace((unsigned char)h[i]) && (unsigned char)h[i] >= 0x20
	       && h[i] != 0x7f)
		kputc(h[i++], name);
	for (i = 0; i < n; i++)
		if ((unsigned char)h[i] < 0x20 || h[i] == 0x7f)
			h[i] = ' ';
}

/* a name asked for with --names and absent from the input: a failed job */
static int job_not_found(fasta_t *r, job_t *j, const char *name)
{
	if (job_start(r, j, 0, "", name) < 0)
		return -1;
	job_fail(j, "'%.64s' not found in %s", name, r->path);
	return 1;
}

/* the names of --names not seen while streaming, as failed jobs */
static int next_missing(fasta_t *r, job_t *j)
{
	while (r->want_pos < r->nwant) {
		int i = r->want_pos++;
		if (r->seen[i])
			continue;
		return job_not_found(r, j, r->want[i]);
	}
	return 0;
}

static int next_indexed(fasta_t *r, job_t *j)
{
	int idx;
	const char *name;
	int64_t recno;

	if (r->want_pos >= r->nwant)
		return 0;
	idx = r->want_pos++;
	name = r->want[idx];
	if (!faidx_has_seq(r->fai, name))
		return job_not_found(r, j, name);
	int rn = 0;
	khash_str2int_get(r->fai_recno, name, &rn);
	recno = rn;
	if (job_start(r, j, recno, name, name) < 0)
		return -1;
	chk_reset(&r->chk);
	int64_t n = faidx_seq_len(r->fai, name);
	if (n > FASTA_MAX_LEN) {
		job_fail(j, "record %lld '%.64s': sequence longer than %d residues",
		         (long long)recno, name, FASTA_MAX_LEN);
		return 1;
	}
	if (n > 0) {
		hts_pos_t got = 0;
		char *s = faidx_fetch_seq64(r->fai, name, 0, n - 1, &got);
		if (!s || got < 0) {
			log_error("%s: cannot read record '%s' through the index %s.fai: "
			          "the index is stale or the file damaged", r->path, name, r->path);
			free(s);
			return -1;
		}
		/* a header inside the bytes the index points at: the file changed */
		if (memchr(s, '>', (size_t)got)) {
			free(s);
			job_fail(j, "record %lld '%.64s': the index %s.fai is stale (its offsets "
			         "point into another record)", (long long)recno, name, r->path);
			return 1;
		}
		chk_feed(&r->chk, s, (size_t)got, 0);
		free(s);
	}
	return job_finish(r, j);
}

int fasta_next(fasta_t *r, job_t *j)
{
	kstring_t name = { 0, 0, NULL };
	int rc = 0, more, sl;

	if (r->fai)
		return next_indexed(r, j);
	for (;;) {
		if (r->state == SAFETENSORS_DONE) {
			rc = r->names_path ? next_missing(r, j) : 0;
			break;
		}
		if (r->state == SAFETENSORS_START) {
			/* lines before the first header: blank is fine, text is not */
			int64_t orphan = 0;
			while ((rc = rd_line(r, &more, &sl)) > 0) {
				if (sl && r->line.l > 0 && r->line.s[0] == '>') {
					if (take_header(r, more) < 0)
						rc = -1;
					break;
				}
				if (!orphan && !is_blank(r->line.s, r->line.l))
					orphan = r->lineno;
			}
			if (rc < 0)
				break;
			r->state = rc > 0 ? SAFETENSORS_HEADER : SAFETENSORS_DONE;
			if (orphan) {
				r->recno++;
				if (r->names_path)
					continue;
				if (job_start(r, j, r->recno, "", "") < 0) {
					rc = -1;
					break;
				}
				job_fail(j, "record %lld: sequence before the first header (line %lld)",
				         (long long)r->recno, (long long)orphan);
				rc = 1;
				break;
			}
			continue;
		}
		/* SAFETENSORS_HEADER: r->hdr is this record's header */
		int64_t recno = ++r->recno, hline = r->hdr_line;
		int want = -1, selected;
		parse_header(r->hdr.s, &name);
		if (r->names_path &&
		    khash_str2int_get(r->want_idx, name.s, &want) == 0)
			r->seen[want] = 1;
		selected = !r->names_path || want >= 0;
		if (selected && job_start(r, j, recno, r->hdr.s, name.s) < 0) {
			rc = -1;
			break;
		}
		chk_reset(&r->chk);
		while ((rc = rd_line(r, &more, &sl)) > 0) {
			if (sl && r->line.l > 0 && r->line.s[0] == '>') {
				if (take_header(r, more) < 0)
					rc = -1;
				break;
			}
			if (selected) {
				size_t n = more ? r->line.l : trim_end(r->line.s, r->line.l);
				chk_feed(&r->chk, r->line.s, n, r->lineno);
			}
		}
		if (rc < 0)
			break;
		r->state = rc > 0 ? SAFETENSORS_HEADER : SAFETENSORS_DONE;
		if (!selected)
			continue;
		if (name.s[0] == '\0') {
			job_fail(j, "record %lld: header has no name (line %lld)",
			         (long long)recno, (long long)hline);
			rc = 1;
		} else {
			rc = job_finish(r, j);
		}
		break;
	}
	free(name.s);
	return rc;
}
