/*
 * Reading a table set. The manifest is written last by ibfabric (after every
 * table file is in place), and names each file with its size and FNV-1a
 * digest: a set caught while its files are being replaced, or one with a
 * file truncated or left from another routing, fails those checks and is
 * refused as a whole. The digest detects accidents, not forgery; who may
 * write the directory is the file system's business.
 *
 * Each kind of table may be listed as OpenSM's text dump, in the compact
 * form (read by tableset-bin.c), or both: the compact file is then the set
 * and the text one an export for OpenSM's own loader and other tools, which
 * is not even read (it may be gigabytes).
 */
#include "tableset-int.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { K_LFTS, K_SL2VL, K_PATHSL, K_MCAST, K_RECORD };

static const struct {
	const char *name;
	int kind, bin;
} known[] = {
	{ TS_LFTS, K_LFTS, 0 }, { TS_SL2VL, K_SL2VL, 0 }, { TS_PATHSL, K_PATHSL, 0 },
	{ TS_LFTS_BIN, K_LFTS, 1 }, { TS_SL2VL_BIN, K_SL2VL, 1 }, { TS_PATHSL_BIN, K_PATHSL, 1 },
	{ TS_MCAST_TREE, K_MCAST, 0 }, { TS_MCAST_GROUPS, K_RECORD, 0 }, { TS_MFTS, K_RECORD, 0 },
};

#define MAX_FILES ((int)(sizeof known / sizeof known[0]))

struct ts_file {
	char name[64];
	int kind, bin;
	int skip;		/* a text file whose compact form is listed too */
	unsigned long long size;
	uint64_t digest;
	char *data;		/* NUL-terminated contents */
};

static void fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

uint64_t ts_fnv1a(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;
	for (i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

char *ts_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	char *buf;
	if (!f)
		return NULL;
	if (fstat(fileno(f), &st) != 0 || st.st_size < 0) {
		fclose(f);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		fclose(f);
		errno = ENOMEM;
		return NULL;
	}
	*len = fread(buf, 1, (size_t)st.st_size, f);
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

static void join(char *out, size_t n, const char *dir, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

int ts_manifest_digest(const char *dir, char out[32])
{
	char path[4096];
	size_t len;
	char *text;
	join(path, sizeof path, dir, TS_MANIFEST);
	text = ts_slurp(path, &len);
	if (!text)
		return -1;
	snprintf(out, 32, "%016llx", (unsigned long long)ts_fnv1a(text, len));
	free(text);
	return 0;
}

/* Next line of a mutable buffer, NUL-terminated in place; NULL at the end. */
static char *next_line(char **cursor, unsigned *lineno)
{
	char *s = *cursor, *e;
	if (!s || !*s)
		return NULL;
	e = strchr(s, '\n');
	if (e) {
		*e = '\0';
		*cursor = e + 1;
	} else {
		*cursor = s + strlen(s);
	}
	if (e && e > s && e[-1] == '\r')
		e[-1] = '\0';
	(*lineno)++;
	return s;
}

static char *skip_ws(char *p)
{
	while (*p && isspace((unsigned char)*p))
		p++;
	return p;
}

static int parse_manifest(char *text, struct tableset *ts, struct ts_file *files,
			  int *nfiles, char *err, size_t errlen)
{
	char *cur = text, *line;
	unsigned ln = 0;
	int header = 0, end = 0;
	*nfiles = 0;
	while ((line = next_line(&cur, &ln))) {
		char *p = skip_ws(line), key[32], a[64], b[64], c[64];
		int n;
		if (!*p || *p == '#')
			continue;
		if (end) {
			fail(err, errlen, "%s:%u: text after 'end'", TS_MANIFEST, ln);
			return -1;
		}
		n = sscanf(p, "%31s %63s %63s %63s", key, a, b, c);
		if (!header) {
			if (n != 2 || strcmp(key, "ibfabric-tables") || strcmp(a, "1")) {
				fail(err, errlen, "%s:%u: expected 'ibfabric-tables 1' (a set of another format version?)",
				     TS_MANIFEST, ln);
				return -1;
			}
			header = 1;
		} else if (!strcmp(key, "engine") && n == 2) {
			snprintf(ts->engine, sizeof ts->engine, "%s", a);
		} else if (!strcmp(key, "generation") && n == 2) {
			snprintf(ts->generation, sizeof ts->generation, "%s", a);
		} else if (!strcmp(key, "file") && n == 4) {
			struct ts_file *f;
			char *e1, *e2;
			int i, k;
			for (k = 0; k < MAX_FILES && strcmp(a, known[k].name); k++)
				;
			if (k == MAX_FILES) {
				fail(err, errlen, "%s:%u: unknown table file '%s'", TS_MANIFEST, ln, a);
				return -1;
			}
			for (i = 0; i < *nfiles; i++)
				if (!strcmp(files[i].name, a)) {
					fail(err, errlen, "%s:%u: '%s' listed twice", TS_MANIFEST, ln, a);
					return -1;
				}
			f = &files[(*nfiles)++];
			snprintf(f->name, sizeof f->name, "%s", a);
			f->kind = known[k].kind;
			f->bin = known[k].bin;
			errno = 0;
			f->size = strtoull(b, &e1, 10);
			f->digest = strtoull(c, &e2, 16);
			if (errno || *e1 || *e2) {
				fail(err, errlen, "%s:%u: bad size or digest for '%s'", TS_MANIFEST, ln, a);
				return -1;
			}
		} else if (!strcmp(key, "end") && n == 1) {
			end = 1;
		} else {
			fail(err, errlen, "%s:%u: unexpected line '%s'", TS_MANIFEST, ln, p);
			return -1;
		}
	}
	if (!header || !end) {
		fail(err, errlen, "%s: %s", TS_MANIFEST,
		     header ? "no 'end' line: the manifest is truncated" : "empty");
		return -1;
	}
	for (int i = 0; i < *nfiles; i++)
		for (int j = 0; j < *nfiles; j++)
			if (!files[i].bin && files[j].bin && files[i].kind == files[j].kind)
				files[i].skip = 1;
	for (int i = 0; i < *nfiles; i++)
		if (files[i].kind == K_LFTS)
			return 0;
	fail(err, errlen, "%s: the set lists no %s or %s", TS_MANIFEST, TS_LFTS_BIN, TS_LFTS);
	return -1;
}

static int cmp_gl_lid(const void *a, const void *b)
{
	const struct ts_guid_lid *x = a, *y = b;
	if (x->guid != y->guid)
		return x->guid < y->guid ? -1 : 1;
	return (int)x->lid - (int)y->lid;
}

/* After the first block of the text dump: each port's LIDs (one row per
 * LID) become its base LID and LMC, the LIDs one aligned range of 2^LMC,
 * and the first block's rows get their offsets. */
static int port_ranges(struct tableset *ts, char *err, size_t errlen)
{
	size_t i, j, k = 0, nrows = ts->nlids;
	/* The first block's rows and LIDs were added together: row i is
	 * LID lids[i] until they are sorted. */
	uint16_t *row_lid = malloc((nrows ? nrows : 1) * sizeof *row_lid);
	if (!row_lid) {
		fail(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < nrows; i++)
		row_lid[i] = ts->lids[i].lid;
	qsort(ts->lids, ts->nlids, sizeof *ts->lids, cmp_gl_lid);
	for (i = 0; i < ts->nlids; i = j) {
		size_t n;
		uint8_t lmc = 0;
		for (j = i + 1; j < ts->nlids && ts->lids[j].guid == ts->lids[i].guid; j++)
			if (ts->lids[j].lid != ts->lids[j - 1].lid + 1)
				break;
		n = j - i;
		while ((1u << lmc) < n)
			lmc++;
		if ((j < ts->nlids && ts->lids[j].guid == ts->lids[i].guid) || (1u << lmc) != n ||
		    lmc > 7 || ts->lids[i].lid % n) {
			fail(err, errlen, "%s: port 0x%016llx has LIDs that are not one aligned range of 2^LMC",
			     TS_LFTS, (unsigned long long)ts->lids[i].guid);
			free(row_lid);
			return -1;
		}
		ts->lids[k] = ts->lids[i];
		ts->lids[k].lmc = lmc;
		k++;
	}
	ts->nlids = k;
	for (i = 0; i < nrows; i++) {
		struct ts_lft_row *r = &ts->rows[ts->sw[0].first + i];
		const struct ts_guid_lid *e = ts_file_port(ts, r->dst_guid);
		r->offset = e ? (uint8_t)(row_lid[i] - e->lid) : 0;
	}
	free(row_lid);
	return 0;
}

int ts_cmp_sv(const void *a, const void *b)
{
	const struct ts_sl2vl *x = a, *y = b;
	if (x->guid != y->guid)
		return x->guid < y->guid ? -1 : 1;
	if (x->in != y->in)
		return x->in - y->in;
	return x->out - y->out;
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	void *p;
	if (n < *cap)
		return 0;
	*cap = *cap ? *cap * 2 : 1024;
	p = realloc(*arr, *cap * elem);
	if (!p)
		return -1;
	*arr = p;
	return 0;
}

static int hex_after(const char *line, const char *tag, uint64_t *out)
{
	const char *p = strstr(line, tag);
	char *e;
	if (!p)
		return -1;
	p += strlen(tag);
	errno = 0;
	*out = strtoull(p, &e, 16);
	return (e == p || errno) ? -1 : 0;
}

/* opensm-lfts.dump: blocks "Unicast lids [0-MAX] of switch ... guid 0x..",
 * rows "0xLID PORT # <type> portguid 0x..: 'desc'", and "N lids dumped". */
static int parse_lfts(char *text, struct tableset *ts, char *err, size_t errlen)
{
	char *cur = text, *line;
	unsigned ln = 0;
	size_t capsw = 0, caprows = 0, capl = 0;
	int open = 0;
	long max_lid = -1;
	while ((line = next_line(&cur, &ln))) {
		char *p = skip_ws(line);
		if (!strncmp(p, "Unicast lids [", 14)) {
			struct ts_switch *s;
			char *e;
			long m;
			if (open) {
				fail(err, errlen, "%s:%u: a switch block starts before the previous one ended ('lids dumped' missing)",
				     TS_LFTS, ln);
				return -1;
			}
			p += 14;
			if (strncmp(p, "0-", 2)) {
				fail(err, errlen, "%s:%u: expected 'Unicast lids [0-MAX]'", TS_LFTS, ln);
				return -1;
			}
			m = strtol(p + 2, &e, 10);
			if (*e != ']' || m < 1 || m > 0xbfff || (max_lid >= 0 && m != max_lid)) {
				fail(err, errlen, "%s:%u: bad or inconsistent LID range", TS_LFTS, ln);
				return -1;
			}
			max_lid = m;
			if (grow((void **)&ts->sw, &capsw, ts->nsw, sizeof *ts->sw)) {
				fail(err, errlen, "out of memory");
				return -1;
			}
			s = &ts->sw[ts->nsw++];
			if (hex_after(p, " guid 0x", &s->guid)) {
				fail(err, errlen, "%s:%u: no switch GUID in the block header", TS_LFTS, ln);
				return -1;
			}
			s->first = ts->nrows;
			s->count = 0;
			open = 1;
		} else if (!strncmp(p, "0x", 2)) {
			struct ts_lft_row *r;
			struct ts_switch *s;
			char *e;
			unsigned long lid, port;
			uint64_t g;
			if (!open) {
				fail(err, errlen, "%s:%u: an LFT row outside a switch block", TS_LFTS, ln);
				return -1;
			}
			lid = strtoul(p + 2, &e, 16);
			port = strtoul(e, &e, 10);
			if (lid == 0 || (long)lid > max_lid || (port > 254 && port != 255)) {
				fail(err, errlen, "%s:%u: bad LID or port", TS_LFTS, ln);
				return -1;
			}
			if (hex_after(e, "portguid 0x", &g)) {
				fail(err, errlen, "%s:%u: a row without 'portguid 0x...' cannot be matched to a port",
				     TS_LFTS, ln);
				return -1;
			}
			if (grow((void **)&ts->rows, &caprows, ts->nrows, sizeof *ts->rows)) {
				fail(err, errlen, "out of memory");
				return -1;
			}
			r = &ts->rows[ts->nrows++];
			r->dst_guid = g;
			r->port = (uint8_t)port;
			s = &ts->sw[ts->nsw - 1];
			s->count++;
			/* The first block names every LID it routes (a port with
			 * LMC has a row per LID); every block must agree on which
			 * port a LID belongs to. */
			if (ts->nsw == 1) {
				if (grow((void **)&ts->lids, &capl, ts->nlids, sizeof *ts->lids)) {
					fail(err, errlen, "out of memory");
					return -1;
				}
				ts->lids[ts->nlids].guid = g;
				ts->lids[ts->nlids].lid = (uint16_t)lid;
				ts->lids[ts->nlids].lmc = 0;
				ts->nlids++;
				/* The offset is set once the port's range is known. */
				r->offset = 0;
			} else {
				const struct ts_guid_lid *e = ts_file_port(ts, g);
				if (!e || lid < e->lid || lid >= (unsigned long)e->lid + (1u << e->lmc)) {
					fail(err, errlen, "%s:%u: LID 0x%04lx is port 0x%016llx here but not in the first switch's block",
					     TS_LFTS, ln, lid, (unsigned long long)g);
					return -1;
				}
				r->offset = (uint8_t)(lid - e->lid);
			}
		} else if (strstr(p, "lids dumped")) {
			if (!open) {
				fail(err, errlen, "%s:%u: 'lids dumped' outside a block", TS_LFTS, ln);
				return -1;
			}
			open = 0;
			if (ts->nsw == 1 && port_ranges(ts, err, errlen))
				return -1;
		} else if (*p) {
			fail(err, errlen, "%s:%u: unexpected line", TS_LFTS, ln);
			return -1;
		}
	}
	if (open) {
		fail(err, errlen, "%s: the last switch block has no 'lids dumped' line: the file is truncated", TS_LFTS);
		return -1;
	}
	if (!ts->nsw) {
		fail(err, errlen, "%s: no switch tables", TS_LFTS);
		return -1;
	}
	ts->max_lid = (uint16_t)max_lid;
	qsort(ts->sw, ts->nsw, sizeof *ts->sw, ts_cmp_sw);
	for (size_t i = 1; i < ts->nsw; i++)
		if (ts->sw[i].guid == ts->sw[i - 1].guid) {
			fail(err, errlen, "%s: switch 0x%016llx has two blocks", TS_LFTS,
			     (unsigned long long)ts->sw[i].guid);
			return -1;
		}
	return 0;
}

/* opensm-sl2vl.dump: "Switch 0x<guid>, ..." or "Channel Adapter 0x<port
 * guid>, ..." headers, then "in out : vl0 .. vl15" rows. */
static int parse_sl2vl(char *text, struct tableset *ts, char *err, size_t errlen)
{
	char *cur = text, *line;
	unsigned ln = 0;
	size_t cap = 0;
	uint64_t guid = 0;
	int is_switch = 0;
	while ((line = next_line(&cur, &ln))) {
		char *p = skip_ws(line), *e;
		struct ts_sl2vl *r;
		unsigned long in, out;
		int i;
		if (!*p || *p == '#')
			continue;
		if (!strncmp(p, "Switch 0x", 9) || !strncmp(p, "Channel Adapter 0x", 18) ||
		    !strncmp(p, "Router 0x", 9)) {
			is_switch = p[0] == 'S';
			hex_after(p, "0x", &guid);
			if (is_switch ? !ts_find_switch(ts, guid) : !ts_file_lid(ts, guid)) {
				fail(err, errlen, "%s:%u: 0x%016llx is not a %s of the LFT dump: the files are of different routings",
				     TS_SL2VL, ln, (unsigned long long)guid, is_switch ? "switch" : "port");
				return -1;
			}
			continue;
		}
		if (!guid || !isdigit((unsigned char)*p)) {
			fail(err, errlen, "%s:%u: unexpected line", TS_SL2VL, ln);
			return -1;
		}
		in = strtoul(p, &e, 10);
		out = strtoul(e, &e, 10);
		e = skip_ws(e);
		if (*e != ':' || in > 254 || out > 254) {
			fail(err, errlen, "%s:%u: expected 'IN OUT : VL...'", TS_SL2VL, ln);
			return -1;
		}
		e++;
		if (grow((void **)&ts->sl2vl, &cap, ts->nsl2vl, sizeof *ts->sl2vl)) {
			fail(err, errlen, "out of memory");
			return -1;
		}
		r = &ts->sl2vl[ts->nsl2vl];
		r->guid = guid;
		r->in = (uint8_t)in;
		r->out = (uint8_t)out;
		for (i = 0; i < TS_NUM_SLS; i++) {
			char *e2;
			unsigned long v = strtoul(e, &e2, 10);
			if (e2 == e || v > 15) {
				fail(err, errlen, "%s:%u: expected 16 VLs (0-15)", TS_SL2VL, ln);
				return -1;
			}
			r->vl[i] = (uint8_t)v;
			if (v != 15 && v > ts->max_vl)
				ts->max_vl = (uint8_t)v;
			e = e2;
		}
		if (*skip_ws(e)) {
			fail(err, errlen, "%s:%u: more than 16 VLs", TS_SL2VL, ln);
			return -1;
		}
		ts->nsl2vl++;
	}
	qsort(ts->sl2vl, ts->nsl2vl, sizeof *ts->sl2vl, ts_cmp_sv);
	for (size_t i = 1; i < ts->nsl2vl; i++)
		if (!ts_cmp_sv(&ts->sl2vl[i], &ts->sl2vl[i - 1])) {
			fail(err, errlen, "%s: 0x%016llx (%u, %u) given twice", TS_SL2VL,
			     (unsigned long long)ts->sl2vl[i].guid, ts->sl2vl[i].in, ts->sl2vl[i].out);
			return -1;
		}
	return 0;
}

/* path-sl.txt: "# max_lid N", then "0xSRC <one char per LID 0..N>". The
 * rows stay in the file's buffer. */
static int parse_pathsl(char *text, struct tableset *ts, char *err, size_t errlen)
{
	char *cur = text, *line;
	unsigned ln = 0;
	long max_lid = -1;
	size_t width, i;
	ts->pathsl_rows = calloc((size_t)ts->max_lid + 1, sizeof *ts->pathsl_rows);
	if (!ts->pathsl_rows) {
		fail(err, errlen, "out of memory");
		return -1;
	}
	width = (size_t)ts->max_lid + 1;
	while ((line = next_line(&cur, &ln))) {
		char *p = skip_ws(line), *e;
		unsigned long src;
		size_t k;
		if (!strncmp(p, "# max_lid ", 10)) {
			max_lid = strtol(p + 10, NULL, 10);
			if (max_lid != ts->max_lid) {
				fail(err, errlen, "%s:%u: max_lid %ld, the LFT dump has %u: the files are of different routings",
				     TS_PATHSL, ln, max_lid, ts->max_lid);
				return -1;
			}
			continue;
		}
		if (!*p || *p == '#')
			continue;
		if (strncmp(p, "0x", 2)) {
			fail(err, errlen, "%s:%u: expected '0x<source LID> <SLs>'", TS_PATHSL, ln);
			return -1;
		}
		src = strtoul(p + 2, &e, 16);
		if (src == 0 || src > ts->max_lid || !isspace((unsigned char)*e)) {
			fail(err, errlen, "%s:%u: bad source LID", TS_PATHSL, ln);
			return -1;
		}
		e = skip_ws(e);
		if (strlen(e) != width) {
			fail(err, errlen, "%s:%u: %zu SLs, expected %zu (LIDs 0..%u): truncated or of another routing",
			     TS_PATHSL, ln, strlen(e), width, ts->max_lid);
			return -1;
		}
		for (k = 0; k < width; k++)
			if (e[k] != '-' && !isxdigit((unsigned char)e[k])) {
				fail(err, errlen, "%s:%u: bad SL character", TS_PATHSL, ln);
				return -1;
			}
		if (ts->pathsl_rows[src]) {
			fail(err, errlen, "%s:%u: source LID 0x%04lx given twice", TS_PATHSL, ln, src);
			return -1;
		}
		ts->pathsl_rows[src] = e;
	}
	if (max_lid < 0) {
		fail(err, errlen, "%s: no '# max_lid' line", TS_PATHSL);
		return -1;
	}
	i = ts_missing_source(ts);
	if (i < ts->nlids) {
		fail(err, errlen, "%s: no SLs for source LID 0x%04x (port 0x%016llx)", TS_PATHSL,
		     ts->lids[i].lid, (unsigned long long)ts->lids[i].guid);
		return -1;
	}
	return 0;
}

/* Every port of the LID map that is not a switch sends traffic and needs
 * its SLs, from each of its LIDs. (The text dump's map holds the ports its first switch routes;
 * the compact file's, every port with a LID: the same ports in a set that
 * routes every end port.) */
size_t ts_missing_source(const struct tableset *ts)
{
	size_t i;
	unsigned k;
	/* Every LID of a port with LMC sends with its own row. */
	for (i = 0; i < ts->nlids; i++) {
		if (ts_find_switch(ts, ts->lids[i].guid))
			continue;
		for (k = 0; k < (1u << ts->lids[i].lmc); k++)
			if ((size_t)ts->lids[i].lid + k > ts->max_lid || !ts->pathsl_rows[ts->lids[i].lid + k])
				return i;
	}
	return i;
}

/* Reads one listed file and checks it against the manifest. */
static int read_file(const char *dir, struct ts_file *f, char *err, size_t errlen)
{
	char path[4096];
	size_t len = 0;
	uint64_t d;
	join(path, sizeof path, dir, f->name);
	f->data = ts_slurp(path, &len);
	if (!f->data) {
		fail(err, errlen, "%s: %s (the set is incomplete)", path, strerror(errno));
		return -1;
	}
	if (len != f->size) {
		fail(err, errlen, "%s: %zu bytes, the manifest says %llu (partial or replaced)",
		     path, len, f->size);
		return -1;
	}
	d = ts_fnv1a(f->data, len);
	if (d != f->digest) {
		fail(err, errlen, "%s: digest %016llx, the manifest says %016llx (replaced or mixed set)",
		     path, (unsigned long long)d, (unsigned long long)f->digest);
		return -1;
	}
	return 0;
}

static int parse_file(struct ts_file *f, struct tableset *ts, char *err, size_t errlen)
{
	const uint8_t *b = (const uint8_t *)f->data;
	size_t len = (size_t)f->size;
	switch (f->kind) {
	case K_LFTS:
		return f->bin ? ts_parse_lfts_bin(b, len, ts, err, errlen) : parse_lfts(f->data, ts, err, errlen);
	case K_SL2VL:
		ts->has_sl2vl = 1;
		return f->bin ? ts_parse_sl2vl_bin(b, len, ts, err, errlen) : parse_sl2vl(f->data, ts, err, errlen);
	case K_MCAST:
		return ts_parse_mcast_tree(f->data, ts, err, errlen);
	case K_RECORD:	/* what the set was verified with; checked, not applied */
		return 0;
	default:
		ts->has_pathsl = 1;
		ts->pathsl_bin = f->bin;
		if (f->bin ? ts_parse_pathsl_bin(b, len, ts, err, errlen) : parse_pathsl(f->data, ts, err, errlen))
			return -1;
		/* The rows point into the file's buffer. */
		ts->pathsl_buf = f->data;
		f->data = NULL;
		return 0;
	}
}

int ts_load(const char *dir, struct tableset *out, char *err, size_t errlen)
{
	struct ts_file files[MAX_FILES];
	struct tableset ts;
	char path[4096], *mtext;
	size_t mlen;
	int nfiles = 0, i, rc = -1;

	memset(&ts, 0, sizeof ts);
	memset(files, 0, sizeof files);
	join(path, sizeof path, dir, TS_MANIFEST);
	mtext = ts_slurp(path, &mlen);
	if (!mtext) {
		fail(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	snprintf(ts.manifest_digest, sizeof ts.manifest_digest, "%016llx",
		 (unsigned long long)ts_fnv1a(mtext, mlen));
	if (parse_manifest(mtext, &ts, files, &nfiles, err, errlen))
		goto out;
	for (i = 0; i < nfiles; i++)
		if (!files[i].skip && read_file(dir, &files[i], err, errlen))
			goto out;
	/* LFTs first: they give the LIDs the other files are written in. */
	for (i = 0; i < nfiles; i++)
		if (!files[i].skip && files[i].kind == K_LFTS && parse_file(&files[i], &ts, err, errlen))
			goto out;
	for (i = 0; i < nfiles; i++)
		if (!files[i].skip && files[i].kind != K_LFTS && parse_file(&files[i], &ts, err, errlen))
			goto out;
	rc = 0;
out:
	for (i = 0; i < nfiles; i++)
		free(files[i].data);
	free(mtext);
	if (rc)
		ts_free(&ts);
	else
		*out = ts;
	return rc;
}

void ts_free(struct tableset *ts)
{
	free(ts->sw);
	free(ts->rows);
	free(ts->lids);
	free(ts->sl2vl);
	free(ts->pathsl_buf);
	free(ts->pathsl_rows);
	free(ts->mnodes);
	free(ts->mindex);
	memset(ts, 0, sizeof *ts);
}
