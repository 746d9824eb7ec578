/* fasta.c - streaming FASTA reader and record validation (see fasta.h).
 *
 * The stream is read through BGZF in 64 KiB blocks and split into lines
 * here, so that a file with no newlines (a binary by mistake) cannot make
 * one line grow without bound: lines come in chunks of at most LINE_CHUNK
 * bytes, and a sequence stops growing at FASTA_MAX_LEN.  The stop flag
 * is looked at before and after every block (a pipe or device is read by
 * a thread that looks at it while it waits: open_stream).
 */
#include "io/fasta.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
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

#include "util/lines.h"
#include "util/log.h"
#include "io/fasta_index.h"

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

/* a non-regular input copied into a pipe by a thread (feed_main) */
typedef struct {
	int          src, dst;   /* the input (not owned when stdin), the pipe's write end */
	int          own_src;
	volatile sig_atomic_t *stop;
	atomic_int   quit;       /* fasta_close: stop copying */
	atomic_int   err;        /* errno of a failed read of src, 0 if none */
	pthread_t    th;
	char         buf[65536];
} feed_t;

struct fasta {
	char        *path;
	BGZF        *fp;
	faidx_t     *fai;
	fidx_t      *fidx;       /* the checked index, with fai */
	volatile sig_atomic_t *stop;
	feed_t      *feed;       /* NULL: BGZF reads the file itself */
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

/* 1 (logged) when the stop flag is set */
static int stopped(fasta_t *r)
{
	if (!r->stop || !*r->stop)
		return 0;
	log_error("%s: interrupted while reading the input", r->path);
	return 1;
}

static int fill(fasta_t *r)
{
	ssize_t n;
	int ferr;

	if (stopped(r))
		return -1;
	errno = 0;
	n = bgzf_read(r->fp, r->buf, BUF_SIZE);
	if (stopped(r))
		return -1;
	if (n <= 0 && r->feed && (ferr = atomic_load(&r->feed->err))) {
		log_error("%s: read error: %s", r->path, strerror(ferr));
		return -1;
	}
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
	lines_t ln;
	int rc;

	if (!fp) {
		log_error("%s: cannot open names file: %s", path, strerror(errno));
		return -1;
	}
	lines_init(&ln, fp, path, r->stop);
	if (!(r->want_idx = khash_str2int_init()))
		goto oom;
	while ((rc = lines_next(&ln)) > 0) {
		char *s = ln.s, *e;
		while (*s == ' ' || *s == '\t')
			s++;
		for (e = s; *e && !isspace((unsigned char)*e); e++)
			;
		*e = '\0';
		if (!*s)
			continue;
		if (khash_str2int_has_key(r->want_idx, s)) {
			log_warn("%s:%ld: '%s' is listed twice; folding it once",
			         path, ln.lineno, s);
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
	if (rc < 0)
		goto fail;
	lines_free(&ln);
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
	log_error("%s: out of memory reading the names", path);
fail:
	lines_free(&ln);
	fclose(fp);
	return -1;
}

/* FILE.fai when it is there, no older than the file, checked against it
 * (fasta_index.h) and loaded by htslib: r->fai; else the file is read
 * whole (a warning says why).  0, or -1 on a fatal error. */
static int try_faidx(fasta_t *r)
{
	char *fai_path;
	struct stat fs, is;
	int rc = 0;

	if (strcmp(r->path, "-") == 0)
		return 0;
	if (asprintf(&fai_path, "%s.fai", r->path) < 0) {
		log_error("out of memory");
		return -1;
	}
	if (stat(fai_path, &is) < 0 || stat(r->path, &fs) < 0 || !S_ISREG(fs.st_mode))
		goto out;
	/* an index older than its file describes other bytes */
	if (fs.st_mtim.tv_sec > is.st_mtim.tv_sec ||
	    (fs.st_mtim.tv_sec == is.st_mtim.tv_sec && fs.st_mtim.tv_nsec > is.st_mtim.tv_nsec)) {
		log_warn("%s: the index %s is stale (older than the file); reading the whole file",
		         r->path, fai_path);
		goto out;
	}
	{
		BGZF *z = bgzf_open(r->path, "r");
		int compressed = z && bgzf_compression(z) != no_compression;
		if (z)
			bgzf_close(z);
		rc = fidx_open(&r->fidx, r->path, fai_path, compressed, r->want, r->nwant, r->stop);
	}
	if (rc != 0) {
		rc = rc < 0 ? -1 : 0;
		goto out;
	}
	r->fai = fai_load3(r->path, fai_path, NULL, 0);
	if (!r->fai || faidx_nseq(r->fai) != fidx_count(r->fidx)) {
		log_warn("%s: cannot use the index %s; reading the whole file", r->path, fai_path);
		if (r->fai)
			fai_destroy(r->fai);
		r->fai = NULL;
		fidx_close(r->fidx);
		r->fidx = NULL;
		goto out;
	}
	log_debug("%s: using the .fai index for %d names", r->path, r->nwant);
out:
	free(fai_path);
	return rc;
}

/* --- a non-regular input -----------------------------------------------
 * htslib reads a whole block before it returns and retries a read that a
 * signal interrupted, so on a slow pipe or an endless device it would not
 * look at the stop flag for as long as the input likes.  A pipe, FIFO,
 * terminal, socket or device is therefore copied by a thread into a pipe
 * that BGZF reads: the thread waits at most FEED_POLL_MS at a time, and
 * when the stop flag is set it closes the pipe, which ends BGZF's read.
 */
#define FEED_POLL_MS 100

/* 1 when fd is ready for ev, 0 when told to stop, -1 on an error */
static int feed_wait(feed_t *f, int fd, short ev)
{
	struct pollfd p = { .fd = fd, .events = ev };

	for (;;) {
		if (*f->stop || atomic_load(&f->quit))
			return 0;
		int n = poll(&p, 1, FEED_POLL_MS);
		if (n > 0)
			return 1;   /* also POLLHUP / POLLERR: the read or write says */
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

static void *feed_main(void *arg)
{
	feed_t *f = arg;

	for (;;) {
		ssize_t n;
		if (feed_wait(f, f->src, POLLIN) <= 0)
			break;
		n = read(f->src, f->buf, sizeof f->buf);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			atomic_store(&f->err, errno);
		if (n <= 0)
			break;
		for (ssize_t o = 0; o < n;) {
			ssize_t w;
			if (feed_wait(f, f->dst, POLLOUT) <= 0)
				goto out;
			w = write(f->dst, f->buf + o, (size_t)(n - o));
			if (w < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (w < 0)
				goto out;   /* the reader is gone */
			o += w;
		}
	}
out:
	close(f->dst);
	return NULL;
}

/* open r->path ("-": stdin); a pipe or device with a stop flag gets a
 * feeding thread, anything else is BGZF's to open.  0, or -1 (logged) */
static int open_stream(fasta_t *r)
{
	int std = strcmp(r->path, "-") == 0, fd = std ? 0 : -1, pfd[2] = { -1, -1 };
	struct stat st;
	sigset_t all, old;
	feed_t *f;

	if (r->stop && !std) {
		while ((fd = open(r->path, O_RDONLY | O_CLOEXEC)) < 0 && errno == EINTR && !*r->stop)
			;
		if (fd < 0 && *r->stop) {
			log_error("%s: interrupted while opening it", r->path);
			return -1;
		}
	}
	if (!r->stop || fd < 0 || fstat(fd, &st) < 0 ||
	    !(S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode))) {
		if (fd > 0)
			close(fd);
		errno = 0;
		if (!(r->fp = bgzf_open(r->path, "r"))) {
			log_error("%s: cannot open: %s", r->path,
			          errno ? strerror(errno) : "not a readable file");
			return -1;
		}
		return 0;
	}
	if (!(f = r->feed = calloc(1, sizeof *f)) || pipe2(pfd, O_CLOEXEC) < 0 ||
	    fcntl(pfd[1], F_SETFL, O_NONBLOCK) < 0) {
		log_error("%s: cannot open: %s", r->path, f ? strerror(errno) : "out of memory");
		goto fail;
	}
	f->src = fd;
	f->own_src = !std;
	f->dst = pfd[1];
	f->stop = r->stop;
	/* the signals are the main thread's; a write to a closed pipe fails */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	errno = pthread_create(&f->th, NULL, feed_main, f);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (errno) {
		log_error("%s: cannot start reading it: %s", r->path, strerror(errno));
		goto fail;
	}
	if (!(r->fp = bgzf_dopen(pfd[0], "r"))) {
		log_error("%s: cannot open: %s", r->path, strerror(errno ? errno : ENOMEM));
		close(pfd[0]);
		return -1;   /* fasta_close ends the thread */
	}
	return 0;
fail:
	if (pfd[0] >= 0) close(pfd[0]);
	if (pfd[1] >= 0) close(pfd[1]);
	if (fd > 0) close(fd);
	free(r->feed);
	r->feed = NULL;
	return -1;
}

fasta_t *fasta_open(const char *path, const char *names_file, volatile sig_atomic_t *stop)
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
	r->stop = stop;
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
		if (open_stream(r) < 0)
			goto fail;
		if (stopped(r))
			goto fail;
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
		bgzf_close(r->fp);   /* the pipe's read end: the feeding thread's write fails */
	if (r->feed) {
		atomic_store(&r->feed->quit, 1);
		pthread_join(r->feed->th, NULL);
		if (r->feed->own_src)
			close(r->feed->src);
		free(r->feed);
	}
	if (r->fai)
		fai_destroy(r->fai);
	fidx_close(r->fidx);
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

	int64_t n;

	if (r->want_pos >= r->nwant)
		return 0;
	if (stopped(r))
		return -1;
	idx = r->want_pos++;
	name = r->want[idx];
	if (!fidx_find(r->fidx, name, &recno, &n))
		return job_not_found(r, j, name);
	if (job_start(r, j, recno, name, name) < 0)
		return -1;
	chk_reset(&r->chk);
	if (n > FASTA_MAX_LEN) {
		job_fail(j, "record %lld '%.64s': sequence longer than %d residues",
		         (long long)recno, name, FASTA_MAX_LEN);
		return 1;
	}
	if (n > 0) {
		hts_pos_t got = 0;
		/* htslib read the index again: it must be the one checked */
		char *s = faidx_seq_len(r->fai, name) == n
		          ? faidx_fetch_seq64(r->fai, name, 0, n - 1, &got) : NULL;
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
