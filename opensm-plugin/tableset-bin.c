/*
 * Reading the compact table set (docs/table-set-format.md). Every size in
 * these files comes from a count in the file itself: each count is checked
 * against the bytes left (in size_t, overflow included) before anything is
 * read or allocated for it, so a corrupted count is a refusal, not a huge
 * allocation or a read past the end. What the files hold lands in the same
 * struct tableset the text dumps fill, entry for entry, so the plugin
 * applies either form alike. Refusals read "FILE: offset N: cause", as
 * ibfabric's own readers word them.
 */
#include "tableset-int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LFT_MAGIC "IBFLFT01"
#define SL2VL_MAGIC "IBFSL201"
#define PATHSL_MAGIC "IBFPSL01"
#define LFT_DRAIN 0x01
#define LFT_BLOCK 64
#define NO_PATH 255
#define MAX_UNICAST_LID 0xbfff

struct rd {
	const char *file;
	const uint8_t *b;
	size_t len, at;		/* at <= len */
	char *err;
	size_t errlen;
};

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static int bad(struct rd *r, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(struct rd *r, size_t at, const char *fmt, ...)
{
	char cause[TS_ERR_LEN];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cause, sizeof cause, fmt, ap);
	va_end(ap);
	snprintf(r->err, r->errlen, "%s: offset %zu: %s", r->file, at, cause);
	return -1;
}

static const uint8_t *take(struct rd *r, size_t n, const char *what)
{
	const uint8_t *p = r->b + r->at;
	if (n > r->len - r->at) {
		bad(r, r->at, "truncated: %s (%zu bytes) does not fit in the %zu bytes left",
		    what, n, r->len - r->at);
		return NULL;
	}
	r->at += n;
	return p;
}

static int get_u8(struct rd *r, const char *what, uint8_t *v)
{
	const uint8_t *p = take(r, 1, what);
	if (!p)
		return -1;
	*v = *p;
	return 0;
}

static int get_u16(struct rd *r, const char *what, uint16_t *v)
{
	const uint8_t *p = take(r, 2, what);
	if (!p)
		return -1;
	*v = le16(p);
	return 0;
}

static int get_u32(struct rd *r, const char *what, uint32_t *v)
{
	const uint8_t *p = take(r, 4, what);
	if (!p)
		return -1;
	*v = le32(p);
	return 0;
}

static int get_u64(struct rd *r, const char *what, uint64_t *v)
{
	const uint8_t *p = take(r, 8, what);
	if (!p)
		return -1;
	*v = le64(p);
	return 0;
}

/* Reserved bytes: zero, or a later version this reader would misread. */
static int zero(struct rd *r, size_t n, const char *what)
{
	size_t at = r->at, i;
	const uint8_t *p = take(r, n, what);
	if (!p)
		return -1;
	for (i = 0; i < n; i++)
		if (p[i])
			return bad(r, at + i, "%s: byte %u, expected 0", what, p[i]);
	return 0;
}

/* A u32 count of records of at least `size` bytes each, which must fit in
 * the bytes left. */
static int count(struct rd *r, size_t size, const char *what, size_t *n)
{
	size_t at = r->at, bytes;
	uint32_t v;
	if (get_u32(r, what, &v))
		return -1;
	if (__builtin_mul_overflow((size_t)v, size, &bytes) || bytes > r->len - r->at)
		return bad(r, at, "%s %u (%zu bytes each) does not fit in the %zu bytes left: truncated, or a bad count",
			   what, v, size, r->len - r->at);
	*n = v;
	return 0;
}

static int magic(struct rd *r, const char *m)
{
	const uint8_t *p = take(r, 8, "the magic");
	if (!p)
		return -1;
	if (memcmp(p, m, 8))
		return bad(r, 0, "bad magic, expected \"%s\": another file, or another version of the format", m);
	return 0;
}

static int end(struct rd *r)
{
	if (r->at != r->len)
		return bad(r, r->at, "trailing bytes after the last section (%zu)", r->len - r->at);
	return 0;
}

static void *alloc_array(size_t n, size_t size)
{
	size_t bytes;
	if (__builtin_mul_overflow(n, size, &bytes))
		return NULL;
	return malloc(bytes ? bytes : 1);
}

/* What becomes of a LID's LFT entries. */
enum { LID_SKIP, LID_ROUTED, LID_DROPPED };

struct lid_slot {
	uint64_t guid;
	uint8_t use;
	uint8_t offset;		/* within the port's 2^LMC LIDs */
};

/* The LID map, into ts->lids (sorted by GUID as the file is) and `slot`
 * (by LID; LID_SKIP where the map names no port). */
static int read_lid_map(struct rd *r, struct tableset *ts, uint16_t max_lid, struct lid_slot *slot)
{
	size_t n, i;
	if (count(r, 12, "the LID map's count", &n))
		return -1;
	ts->lids = alloc_array(n, sizeof *ts->lids);
	if (!ts->lids)
		return bad(r, r->at, "out of memory for %zu LIDs", n);
	for (i = 0; i < n; i++) {
		size_t at = r->at;
		uint64_t g;
		uint16_t lid;
		uint8_t lmc;
		unsigned k, n;
		if (get_u64(r, "a port GUID", &g) || get_u16(r, "a LID", &lid) ||
		    get_u8(r, "the LMC", &lmc) || zero(r, 1, "the byte after the LMC"))
			return -1;
		if (i && g <= ts->lids[i - 1].guid)
			return bad(r, at, "port 0x%016llx: the LID map is not sorted by GUID or names a port twice",
				   (unsigned long long)g);
		if (lmc > 7 || lid % (1u << lmc))
			return bad(r, at + 10, "port 0x%016llx: LMC %u above 7, or LID %u not aligned to 2^LMC",
				   (unsigned long long)g, lmc, lid);
		n = 1u << lmc;
		if (lid == 0 || (unsigned)lid + n - 1 > max_lid) {
			if (n == 1)
				return bad(r, at + 8, "port 0x%016llx: LID %u out of range (1..%u)",
					   (unsigned long long)g, lid, max_lid);
			return bad(r, at + 8, "port 0x%016llx: LIDs %u..%u out of range (1..%u)",
				   (unsigned long long)g, lid, lid + n - 1, max_lid);
		}
		for (k = 0; k < n; k++)
			if (slot[lid + k].use != LID_SKIP)
				return bad(r, at + 8, "LID %u is named twice (ports 0x%016llx and 0x%016llx)", lid + k,
					   (unsigned long long)slot[lid + k].guid, (unsigned long long)g);
		for (k = 0; k < n; k++) {
			slot[lid + k].guid = g;
			slot[lid + k].use = LID_ROUTED;
			slot[lid + k].offset = (uint8_t)k;
		}
		ts->lids[i].guid = g;
		ts->lids[i].lid = lid;
		ts->lids[i].lmc = lmc;
		ts->nlids = i + 1;
	}
	return 0;
}

/* Checks every switch record; the switches' GUIDs into ts->sw. Ports are
 * not checked against the switch's port count, which the file does not
 * hold: the plugin checks them against the fabric OpenSM found (255 is no
 * route), for both forms. */
static int check_switches(struct rd *r, struct tableset *ts, size_t nsw, uint16_t max_lid, size_t blocks)
{
	size_t i, k;
	for (i = 0; i < nsw; i++) {
		size_t at = r->at, row_at;
		const uint8_t *row;
		uint64_t g;
		uint16_t nb;
		if (get_u64(r, "a switch GUID", &g))
			return -1;
		if (i && g <= ts->sw[i - 1].guid)
			return bad(r, at, "switch 0x%016llx: not sorted by GUID, or given twice", (unsigned long long)g);
		if (get_u16(r, "a switch's block count", &nb))
			return -1;
		if (nb != blocks)
			return bad(r, at + 8, "switch 0x%016llx: %u blocks, max_lid %u needs %zu",
				   (unsigned long long)g, nb, max_lid, blocks);
		if (zero(r, 2, "the bytes after the block count"))
			return -1;
		row_at = r->at;
		row = take(r, blocks * LFT_BLOCK, "a switch's LFT");
		if (!row)
			return -1;
		for (k = (size_t)max_lid + 1; k < blocks * LFT_BLOCK; k++)
			if (row[k] != NO_PATH)
				return bad(r, row_at + k, "switch 0x%016llx: port %u for LID %zu, above max_lid %u",
					   (unsigned long long)g, row[k], k, max_lid);
		ts->sw[i].guid = g;
		ts->sw[i].first = ts->sw[i].count = 0;
		ts->nsw = i + 1;
	}
	return 0;
}

/* The rows of the (checked) switch records at `p`: counted, and written
 * to `rows` unless NULL. In LID order, as the text dump lists them. */
static size_t lft_rows(const uint8_t *p, struct tableset *ts, size_t blocks, uint16_t max_lid,
		       const struct lid_slot *slot, struct ts_lft_row *rows)
{
	size_t n = 0, i, lid;
	for (i = 0; i < ts->nsw; i++) {
		const uint8_t *row = p + i * (12 + blocks * LFT_BLOCK) + 12;
		if (rows)
			ts->sw[i].first = n;
		/* LID 0 is no port's. A LID the map does not name keeps its
		 * number in ibfabric's readers, but a row here names its
		 * destination by port GUID, and that LID has none; the text
		 * dump cannot carry it either (a row without a port GUID is
		 * refused). Its entries are skipped: the SM leaves it
		 * unrouted, as it leaves every LID no row names. */
		for (lid = 1; lid <= max_lid; lid++) {
			if (slot[lid].use == LID_SKIP || (row[lid] == NO_PATH && slot[lid].use != LID_DROPPED))
				continue;
			if (rows) {
				rows[n].dst_guid = slot[lid].guid;
				rows[n].port = row[lid];
				rows[n].offset = slot[lid].offset;
			}
			n++;
		}
		if (rows)
			ts->sw[i].count = n - ts->sw[i].first;
	}
	return n;
}

int ts_parse_lfts_bin(const uint8_t *b, size_t len, struct tableset *ts, char *err, size_t errlen)
{
	struct rd r = { TS_LFTS_BIN, b, len, 0, err, errlen };
	struct lid_slot *slot = NULL;
	size_t nsw, blocks, first, i, n;
	uint16_t max_lid;
	uint8_t flags;
	int rc = -1;

	if (magic(&r, LFT_MAGIC) || get_u8(&r, "the flags", &flags))
		return -1;
	if (flags & ~LFT_DRAIN)
		return bad(&r, 8, "unknown flags 0x%02x", flags);
	if (zero(&r, 3, "the bytes after the flags") || get_u16(&r, "max_lid", &max_lid) ||
	    zero(&r, 2, "the bytes after max_lid"))
		return -1;
	if (max_lid == 0 || max_lid > MAX_UNICAST_LID)
		return bad(&r, 12, "max_lid %u out of range (1..%u)", max_lid, MAX_UNICAST_LID);
	slot = calloc((size_t)max_lid + 1, sizeof *slot);
	if (!slot)
		return bad(&r, 12, "out of memory for %u LIDs", max_lid);
	if (read_lid_map(&r, ts, max_lid, slot))
		goto out;
	blocks = ((size_t)max_lid + LFT_BLOCK) / LFT_BLOCK;
	if (count(&r, 12 + blocks * LFT_BLOCK, "the switch count", &nsw))
		goto out;
	if (!nsw) {
		bad(&r, r.at - 4, "no switch tables");
		goto out;
	}
	first = r.at;
	ts->sw = alloc_array(nsw, sizeof *ts->sw);
	if (!ts->sw) {
		bad(&r, first, "out of memory for %zu switches", nsw);
		goto out;
	}
	if (check_switches(&r, ts, nsw, max_lid, blocks) || end(&r))
		goto out;
	/* A drain stage's 255 toward an end port is a drop on purpose and
	 * stays a row, as the text dump writes it; toward a switch that dump
	 * writes no row, and neither does this. */
	for (i = 1; i <= max_lid && (flags & LFT_DRAIN); i++)
		if (slot[i].use == LID_ROUTED && !ts_find_switch(ts, slot[i].guid))
			slot[i].use = LID_DROPPED;
	n = lft_rows(b + first, ts, blocks, max_lid, slot, NULL);
	ts->rows = alloc_array(n, sizeof *ts->rows);
	if (!ts->rows) {
		bad(&r, first, "out of memory for %zu LFT rows", n);
		goto out;
	}
	ts->nrows = lft_rows(b + first, ts, blocks, max_lid, slot, ts->rows);
	ts->max_lid = max_lid;
	rc = 0;
out:
	free(slot);
	return rc;
}

/* Switch record `i` of the SL-to-VL file: its entries for the linked out
 * ports, counted in *n and written to out[*n...] unless `out` is NULL. */
static int sl2vl_switch(struct rd *r, const struct tableset *ts, const uint8_t *tables, size_t ntab,
			size_t i, uint64_t *prev, struct ts_sl2vl *out, size_t *n)
{
	size_t at = r->at, bm_at, ix_at, width, in, o;
	const uint8_t *bm, *ix;
	uint64_t g;
	uint8_t np;
	if (get_u64(r, "a switch GUID", &g))
		return -1;
	if (i && g <= *prev)
		return bad(r, at, "switch 0x%016llx: not sorted by GUID, or given twice", (unsigned long long)g);
	*prev = g;
	if (!ts_find_switch(ts, g))
		return bad(r, at, "0x%016llx is not a switch of the LFT file: the files are of different routings",
			   (unsigned long long)g);
	if (get_u8(r, "a switch's port count", &np))
		return -1;
	if (np > 254)
		return bad(r, at + 8, "switch 0x%016llx: %u ports, out port above 254", (unsigned long long)g, np);
	if (zero(r, 1, "the byte after the port count"))
		return -1;
	width = (size_t)np + 1;
	bm_at = r->at;
	bm = take(r, (width + 7) / 8, "a switch's linked-port bitmap");
	if (!bm)
		return -1;
	for (o = width; o < (width + 7) / 8 * 8; o++)
		if (bm[o / 8] & (1u << (o % 8)))
			return bad(r, bm_at + o / 8, "switch 0x%016llx: out port %zu marked linked, the switch has %u ports",
				   (unsigned long long)g, o, np);
	ix_at = r->at;
	ix = take(r, width * width * 2, "a switch's table indices");
	if (!ix)
		return -1;
	for (in = 0; in < width; in++)
		for (o = 0; o < width; o++) {
			uint16_t t = le16(ix + 2 * (in * width + o));
			if (t >= ntab)
				return bad(r, ix_at + 2 * (in * width + o),
					   "switch 0x%016llx in %zu out %zu: table index %u out of range (%zu tables)",
					   (unsigned long long)g, in, o, t, ntab);
			/* Unlinked out ports are not programmed: no entry,
			 * as the text dump has no row for them. */
			if (!(bm[o / 8] & (1u << (o % 8))))
				continue;
			if (out) {
				out[*n].guid = g;
				out[*n].in = (uint8_t)in;
				out[*n].out = (uint8_t)o;
				memcpy(out[*n].vl, tables + (size_t)t * TS_NUM_SLS, TS_NUM_SLS);
			}
			(*n)++;
		}
	return 0;
}

/* The switch and port sections (after the tables), counted in *n and
 * written to `out` unless NULL. */
static int sl2vl_walk(struct rd *r, const struct tableset *ts, const uint8_t *tables, size_t ntab,
		      struct ts_sl2vl *out, size_t *n)
{
	size_t nsw, nports, i;
	uint64_t prev = 0;
	*n = 0;
	/* The smallest switch record: no port but 0, a bitmap byte, one index. */
	if (count(r, 13, "the switch count", &nsw))
		return -1;
	for (i = 0; i < nsw; i++)
		if (sl2vl_switch(r, ts, tables, ntab, i, &prev, out, n))
			return -1;
	if (count(r, 12, "the port count", &nports))
		return -1;
	for (i = 0; i < nports; i++) {
		size_t at = r->at;
		uint64_t g;
		uint16_t t;
		if (get_u64(r, "a port GUID", &g) || get_u16(r, "a port's table index", &t) ||
		    zero(r, 2, "the bytes after a table index"))
			return -1;
		if (i && g <= prev)
			return bad(r, at, "port 0x%016llx: not sorted by GUID, or given twice", (unsigned long long)g);
		prev = g;
		/* A switch's (0, 0) is in its own record: one here would be a
		 * second entry for the same key. */
		if (!ts_file_lid(ts, g) || ts_find_switch(ts, g))
			return bad(r, at, "0x%016llx is not a CA or router port of the LFT file's LID map: the files are of different routings",
				   (unsigned long long)g);
		if (t >= ntab)
			return bad(r, at + 8, "port 0x%016llx: table index %u out of range (%zu tables)",
				   (unsigned long long)g, t, ntab);
		if (out) {
			out[*n].guid = g;
			out[*n].in = out[*n].out = 0;
			memcpy(out[*n].vl, tables + (size_t)t * TS_NUM_SLS, TS_NUM_SLS);
		}
		(*n)++;
	}
	return end(r);
}

int ts_parse_sl2vl_bin(const uint8_t *b, size_t len, struct tableset *ts, char *err, size_t errlen)
{
	struct rd r = { TS_SL2VL_BIN, b, len, 0, err, errlen };
	const uint8_t *tables;
	size_t ntab, tab_at, body, n, i, k;

	if (magic(&r, SL2VL_MAGIC) || count(&r, TS_NUM_SLS, "the table count", &ntab))
		return -1;
	tab_at = r.at;
	tables = take(&r, ntab * TS_NUM_SLS, "the tables");
	if (!tables)
		return -1;
	for (k = 0; k < ntab * TS_NUM_SLS; k++)
		if (tables[k] > 15)
			return bad(&r, tab_at + k, "table %zu: SL %zu to VL %u, VLs are 0..15",
				   k / TS_NUM_SLS, k % TS_NUM_SLS, tables[k]);
	body = r.at;
	if (sl2vl_walk(&r, ts, tables, ntab, NULL, &n))
		return -1;
	ts->sl2vl = alloc_array(n, sizeof *ts->sl2vl);
	if (!ts->sl2vl)
		return bad(&r, body, "out of memory for %zu SL-to-VL entries", n);
	r.at = body;
	if (sl2vl_walk(&r, ts, tables, ntab, ts->sl2vl, &n))
		return -1;
	ts->nsl2vl = n;
	/* Switches and ports are each sorted, the two lists are not merged;
	 * keys are distinct (checked above). */
	qsort(ts->sl2vl, n, sizeof *ts->sl2vl, ts_cmp_sv);
	/* Over the entries, not the tables, as the text dump counts them: a
	 * table only unlinked ports use would not be in the dump. */
	for (i = 0; i < n; i++)
		for (k = 0; k < TS_NUM_SLS; k++)
			if (ts->sl2vl[i].vl[k] != 15 && ts->sl2vl[i].vl[k] > ts->max_vl)
				ts->max_vl = ts->sl2vl[i].vl[k];
	return 0;
}

/* Checks the path SL file's source records. */
static int pathsl_sources(struct rd *r, size_t nsrc, uint32_t nrows, uint16_t max_lid)
{
	size_t i;
	uint16_t prev = 0;
	for (i = 0; i < nsrc; i++) {
		size_t at = r->at;
		uint16_t lid;
		uint32_t row;
		if (get_u16(r, "a source LID", &lid) || zero(r, 2, "the bytes after a source LID") ||
		    get_u32(r, "a row index", &row))
			return -1;
		if (i && lid <= prev)
			return bad(r, at, "source LID %u: not sorted by LID, or given twice", lid);
		prev = lid;
		if (lid == 0 || lid > max_lid)
			return bad(r, at, "source LID %u out of range (1..%u)", lid, max_lid);
		if (row >= nrows)
			return bad(r, at + 4, "source LID %u: row index %u out of range (%u rows)", lid, row, nrows);
	}
	return 0;
}

int ts_parse_pathsl_bin(const uint8_t *b, size_t len, struct tableset *ts, char *err, size_t errlen)
{
	struct rd r = { TS_PATHSL_BIN, b, len, 0, err, errlen };
	const uint8_t *src, *rows;
	size_t width, nsrc, src_at, rows_at, bytes, i;
	uint16_t max_lid;
	uint32_t nrows;

	if (magic(&r, PATHSL_MAGIC) || get_u16(&r, "max_lid", &max_lid))
		return -1;
	if (max_lid != ts->max_lid)
		return bad(&r, 8, "max_lid %u, the LFT file has %u: the files are of different routings",
			   max_lid, ts->max_lid);
	if (zero(&r, 2, "the bytes after max_lid") || get_u32(&r, "the row count", &nrows) ||
	    count(&r, 8, "the source count", &nsrc))
		return -1;
	src_at = r.at;
	if (pathsl_sources(&r, nsrc, nrows, max_lid))
		return -1;
	width = (size_t)max_lid + 1;
	rows_at = r.at;
	if (__builtin_mul_overflow((size_t)nrows, width, &bytes))
		return bad(&r, 12, "%u rows of %zu bytes do not fit in memory", nrows, width);
	rows = take(&r, bytes, "the rows");
	if (!rows || end(&r))
		return -1;
	for (i = 0; i < bytes; i++)
		if (rows[i] > 15 && rows[i] != 255)
			return bad(&r, rows_at + i, "row %zu, destination LID %zu: SL %u (0..15, or 255 for no path)",
				   i / width, i % width, rows[i]);
	ts->pathsl_rows = calloc(width, sizeof *ts->pathsl_rows);
	if (!ts->pathsl_rows)
		return bad(&r, rows_at, "out of memory for %zu sources", width);
	for (i = 0, src = b + src_at; i < nsrc; i++, src += 8)
		ts->pathsl_rows[le16(src)] = (const char *)(rows + (size_t)le32(src + 4) * width);
	i = ts_missing_source(ts);
	if (i < ts->nlids)
		return bad(&r, src_at, "no SLs for source LID 0x%04x (port 0x%016llx)", ts->lids[i].lid,
			   (unsigned long long)ts->lids[i].guid);
	return 0;
}
