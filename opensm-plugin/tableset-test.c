/*
 * Checks of the table-set reader without OpenSM: a complete set loads and
 * answers by GUID; a truncated file, a manifest without its end, a file of
 * another set and inconsistent files are refused with a reason. The
 * compact form is written here byte by byte from the spec
 * (docs/table-set-format.md), not by ibfabric, and must answer exactly as
 * the same tables written as text do.
 */
#include "tableset.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *LFTS =
	"Unicast lids [0-3] of switch Lid 1 guid 0x0000000000000001 ('s'):\n"
	"0x0001 000 # Switch portguid 0x0000000000000001: 's'\n"
	"0x0002 001 # Channel Adapter portguid 0x0000000000000011: 'h1'\n"
	"0x0003 002 # Channel Adapter portguid 0x0000000000000021: 'h2'\n"
	"3 lids dumped\n";
static const char *SL2VL =
	"Switch 0x0000000000000001, base LID 1, \"s\"\n"
	"#in out : 0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15\n"
	"0   1   : 0  1  0  1  0  1  0  1  0  1  0  1  0  1  0  1\n"
	"Channel Adapter 0x0000000000000011, base LID 2, \"h1\"\n"
	"0   0   : 0  1  2  3  0  1  2  3  0  1  2  3  0  1  2  3\n";
static const char *PATHSL =
	"# ibfabric path SLs\n"
	"# max_lid 3\n"
	"0x0002 ---1\n"
	"0x0003 --2-\n";

static int failures;

#define CHECK(cond, ...) do { if (!(cond)) { failures++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static void put_bytes(const char *dir, const char *name, const void *data, size_t len)
{
	char p[512];
	FILE *f;
	snprintf(p, sizeof p, "%s/%s", dir, name);
	f = fopen(p, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f)) {
		perror(p);
		exit(1);
	}
}

static void put(const char *dir, const char *name, const char *text)
{
	put_bytes(dir, name, text, strlen(text));
}

struct mfile {
	const char *name;
	const void *data;
	size_t len;
};

/* A manifest naming `f` with their sizes and digests. */
static void manifest_of(const char *dir, const struct mfile *f, int n, int end)
{
	char m[2048];
	int len = snprintf(m, sizeof m, "ibfabric-tables 1\nengine test\ngeneration 7\n");
	for (int i = 0; i < n; i++)
		len += snprintf(m + len, sizeof m - len, "file %s %zu %016llx\n", f[i].name, f[i].len,
				(unsigned long long)ts_fnv1a(f[i].data, f[i].len));
	if (end)
		snprintf(m + len, sizeof m - len, "end\n");
	put(dir, TS_MANIFEST, m);
}

static void manifest(const char *dir, const char *lfts, const char *sl2vl, const char *pathsl, int end)
{
	struct mfile f[3];
	int n = 0;
	f[n++] = (struct mfile){ TS_LFTS, lfts, strlen(lfts) };
	if (sl2vl)
		f[n++] = (struct mfile){ TS_SL2VL, sl2vl, strlen(sl2vl) };
	if (pathsl)
		f[n++] = (struct mfile){ TS_PATHSL, pathsl, strlen(pathsl) };
	manifest_of(dir, f, n, end);
}

/* Writes the files and a manifest that lists them all. */
static void write_set(const char *dir, const struct mfile *f, int n)
{
	for (int i = 0; i < n; i++)
		put_bytes(dir, f[i].name, f[i].data, f[i].len);
	manifest_of(dir, f, n, 1);
}

static void expect_refused(const char *dir, const char *needle, const char *what)
{
	struct tableset ts, before;
	char err[TS_ERR_LEN] = "";
	int rc;
	memset(&ts, 0xa5, sizeof ts);
	before = ts;
	rc = ts_load(dir, &ts, err, sizeof err);
	CHECK(rc != 0, "%s: loaded", what);
	if (rc == 0)
		ts_free(&ts);
	else
		CHECK(!memcmp(&ts, &before, sizeof ts), "%s: the struct was changed on failure", what);
	CHECK(strstr(err, needle) != NULL, "%s: reason '%s' lacks '%s'", what, err, needle);
}

static void test_text(const char *dir)
{
	struct tableset ts;
	char err[TS_ERR_LEN];
	const struct ts_sl2vl *row;

	put(dir, TS_LFTS, LFTS);
	put(dir, TS_SL2VL, SL2VL);
	put(dir, TS_PATHSL, PATHSL);
	manifest(dir, LFTS, SL2VL, PATHSL, 1);
	CHECK(ts_load(dir, &ts, err, sizeof err) == 0, "complete set: %s", err);
	CHECK(ts.nsw == 1 && ts.sw[0].count == 3, "one switch, three rows");
	CHECK(ts_file_lid(&ts, 0x21) == 3, "LID of h2");
	CHECK(ts_path_sl(&ts, 2, 3) == 1 && ts_path_sl(&ts, 3, 2) == 2, "path SLs");
	CHECK(ts_path_sl(&ts, 2, 1) == -1, "no path to a switch");
	row = ts_find_sl2vl(&ts, 1, 0, 1);
	CHECK(row && row->vl[1] == 1 && row->vl[2] == 0, "switch SL-to-VL row");
	CHECK(ts.max_vl == 3, "max VL");
	ts_free(&ts);

	/* A file shorter than the manifest says: caught mid-write. */
	put(dir, TS_PATHSL, "# ibfabric path SLs\n# max_lid 3\n0x0002 ---1\n");
	expect_refused(dir, "bytes, the manifest says", "truncated path-sl.txt");
	/* Same length, other content: a file of another set. */
	put(dir, TS_PATHSL, "# ibfabric path SLs\n# max_lid 3\n0x0002 ---2\n0x0003 --2-\n");
	expect_refused(dir, "digest", "file of another set");
	put(dir, TS_PATHSL, PATHSL);
	manifest(dir, LFTS, SL2VL, PATHSL, 0);
	expect_refused(dir, "truncated", "manifest without 'end'");
	/* Files that match their digests but not each other. */
	const char *wide = "# max_lid 4\n0x0002 ---1-\n0x0003 --2--\n";
	put(dir, TS_PATHSL, wide);
	manifest(dir, LFTS, SL2VL, wide, 1);
	expect_refused(dir, "different routings", "path SLs for another LID range");
	const char *nosrc = "# max_lid 3\n0x0002 ---1\n";
	put(dir, TS_PATHSL, nosrc);
	manifest(dir, LFTS, SL2VL, nosrc, 1);
	expect_refused(dir, "no SLs for source LID 0x0003", "a source without SLs");
	const char *foreign = "Switch 0x0000000000000009, base LID 1, \"x\"\n0 1 : 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
	put(dir, TS_SL2VL, foreign);
	put(dir, TS_PATHSL, PATHSL);
	manifest(dir, LFTS, foreign, PATHSL, 1);
	expect_refused(dir, "not a switch of the LFT dump", "SL-to-VL of another fabric");
	const char *open_block = "Unicast lids [0-3] of switch Lid 1 guid 0x0000000000000001 ('s'):\n"
		"0x0001 000 # Switch portguid 0x0000000000000001: 's'\n";
	put(dir, TS_LFTS, open_block);
	manifest(dir, open_block, NULL, NULL, 1);
	expect_refused(dir, "truncated", "LFT block without its end");
}

/*
 * One logical set, written in both forms. Two switches, s1 (GUID 1, LID
 * 2) and s2 (GUID 2, LID 1), so that the LID map's GUID order is not its
 * LID order; s1 port 1 h1, port 2 h3, port 3 s2; s2 port 1 h2, port 3 s1;
 * port 4 of both and port 2 of s2 unlinked. LID 5 is no port's.
 */
#define MAX_LID 6
#define NPORTS 4

struct port {
	uint64_t guid;
	uint16_t lid;
	int sw;
	const char *desc;
	unsigned table;		/* an end port's SL-to-VL table */
};

static const struct port PORTS[] = {	/* by GUID */
	{ 0x1, 2, 1, "s1", 0 }, { 0x2, 1, 1, "s2", 0 },
	{ 0x11, 3, 0, "h1", 1 }, { 0x21, 4, 0, "h2", 0 }, { 0x31, 6, 0, "h3", 1 },
};
#define NP ((int)(sizeof PORTS / sizeof PORTS[0]))
static const uint64_t SW[2] = { 0x1, 0x2 };
/* Out port per LID. The entry for LID 5 is one only the compact form can
 * hold (the text dump names rows by port GUID): it must be skipped. */
static const uint8_t LFT[2][MAX_LID + 1] = {
	{ 255, 3, 0, 1, 3, 2, 2 },
	{ 255, 0, 3, 3, 1, 255, 3 },
};
/* A drain stage: s2 drops h3 and s1. */
static const uint8_t DRAIN[2][MAX_LID + 1] = {
	{ 255, 3, 0, 1, 3, 2, 2 },
	{ 255, 0, 255, 3, 1, 255, 255 },
};
static const uint8_t LINKED[2] = { 0x0e, 0x0a };	/* out ports 1-3; 1 and 3 */
static const uint8_t TABLES[2][TS_NUM_SLS] = {
	{ 0 },
	{ 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 15 },
};
/* h1 and h3 share row 0. */
static const uint8_t ROWS[2][MAX_LID + 1] = {
	{ 255, 255, 255, 2, 1, 255, 0 },
	{ 255, 255, 255, 3, 255, 255, 15 },
};
static const struct { uint16_t lid; uint32_t row; } SRCS[] = { { 3, 0 }, { 4, 1 }, { 6, 0 } };

static unsigned table_of(int s, unsigned in, unsigned out)
{
	return in == out ? 0 : (in + out + (unsigned)s) % 2;
}

static const struct port *port_of_lid(unsigned lid)
{
	for (int i = 0; i < NP; i++)
		if (PORTS[i].lid == lid)
			return &PORTS[i];
	return NULL;
}

static const struct port *port_of_guid(uint64_t g)
{
	for (int i = 0; i < NP; i++)
		if (PORTS[i].guid == g)
			return &PORTS[i];
	return NULL;
}

struct buf {
	uint8_t b[8192];
	size_t n;
};

static void p8(struct buf *b, unsigned v)
{
	b->b[b->n++] = (uint8_t)v;
}

static void p16(struct buf *b, unsigned v)
{
	p8(b, v & 0xff);
	p8(b, v >> 8);
}

static void p32(struct buf *b, uint32_t v)
{
	p16(b, v & 0xffff);
	p16(b, v >> 16);
}

static void p64(struct buf *b, uint64_t v)
{
	p32(b, (uint32_t)v);
	p32(b, (uint32_t)(v >> 32));
}

static void pmagic(struct buf *b, const char *m)
{
	memcpy(b->b + b->n, m, 8);
	b->n += 8;
}

__attribute__((format(printf, 2, 3)))
static void bprintf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	b->n += (size_t)vsnprintf((char *)b->b + b->n, sizeof b->b - b->n, fmt, ap);
	va_end(ap);
}

static void lfts_bin(struct buf *b, const uint8_t lft[2][MAX_LID + 1], int drain)
{
	b->n = 0;
	pmagic(b, "IBFLFT01");
	p32(b, drain ? 1 : 0);
	p16(b, MAX_LID);
	p16(b, 0);
	p32(b, NP);
	for (int i = 0; i < NP; i++) {
		p64(b, PORTS[i].guid);
		p16(b, PORTS[i].lid);
		p16(b, 0);
	}
	p32(b, 2);
	for (int s = 0; s < 2; s++) {
		p64(b, SW[s]);
		p16(b, 1);
		p16(b, 0);
		for (int k = 0; k < 64; k++)
			p8(b, k <= MAX_LID ? lft[s][k] : 255);
	}
}

/* As ibfabric's text writer: 255 rows only toward end ports in a drain
 * stage; no row for a LID without a port. */
static void lfts_text(struct buf *b, const uint8_t lft[2][MAX_LID + 1], int drain)
{
	b->n = 0;
	for (int s = 0; s < 2; s++) {
		const struct port *me = port_of_guid(SW[s]);
		bprintf(b, "Unicast lids [0-%d] of switch Lid %u guid 0x%016llx ('%s'):\n", MAX_LID, me->lid,
			(unsigned long long)me->guid, me->desc);
		for (unsigned lid = 1; lid <= MAX_LID; lid++) {
			const struct port *p = port_of_lid(lid);
			if (!p || (lft[s][lid] == 255 && !(drain && !p->sw)))
				continue;
			bprintf(b, "0x%04x %03u # %s portguid 0x%016llx: '%s'\n", lid, lft[s][lid],
				p->sw ? "Switch" : "Channel Adapter", (unsigned long long)p->guid, p->desc);
		}
		bprintf(b, "%d lids dumped\n", MAX_LID);
	}
}

static void sl2vl_bin(struct buf *b)
{
	b->n = 0;
	pmagic(b, "IBFSL201");
	p32(b, 2);
	for (int t = 0; t < 2; t++)
		for (int sl = 0; sl < TS_NUM_SLS; sl++)
			p8(b, TABLES[t][sl]);
	p32(b, 2);
	for (int s = 0; s < 2; s++) {
		p64(b, SW[s]);
		p8(b, NPORTS);
		p8(b, 0);
		p8(b, LINKED[s]);
		for (unsigned in = 0; in <= NPORTS; in++)
			for (unsigned out = 0; out <= NPORTS; out++)
				p16(b, table_of(s, in, out));
	}
	p32(b, 3);
	for (int i = 2; i < NP; i++) {
		p64(b, PORTS[i].guid);
		p16(b, PORTS[i].table);
		p16(b, 0);
	}
}

static void vls_text(struct buf *b, unsigned in, unsigned out, unsigned t)
{
	bprintf(b, "%-3u %-3u :", in, out);
	for (int sl = 0; sl < TS_NUM_SLS; sl++)
		bprintf(b, " %-2u", TABLES[t][sl]);
	bprintf(b, "\n");
}

static void sl2vl_text(struct buf *b)
{
	b->n = 0;
	for (int i = 0; i < NP; i++) {
		const struct port *p = &PORTS[i];
		bprintf(b, "%s 0x%016llx, base LID %u, \"%s\"\n", p->sw ? "Switch" : "Channel Adapter",
			(unsigned long long)p->guid, p->lid, p->desc);
		if (!p->sw) {
			vls_text(b, 0, 0, p->table);
			continue;
		}
		int s = p->guid == SW[0] ? 0 : 1;
		for (unsigned out = 1; out <= NPORTS; out++)
			for (unsigned in = 0; in <= NPORTS && (LINKED[s] >> out & 1); in++)
				vls_text(b, in, out, table_of(s, in, out));
	}
}

static void pathsl_bin(struct buf *b)
{
	b->n = 0;
	pmagic(b, "IBFPSL01");
	p16(b, MAX_LID);
	p16(b, 0);
	p32(b, 2);
	p32(b, 3);
	for (int i = 0; i < 3; i++) {
		p16(b, SRCS[i].lid);
		p16(b, 0);
		p32(b, SRCS[i].row);
	}
	for (int r = 0; r < 2; r++)
		for (int d = 0; d <= MAX_LID; d++)
			p8(b, ROWS[r][d]);
}

static void pathsl_text(struct buf *b)
{
	b->n = 0;
	bprintf(b, "# ibfabric path SLs\n# max_lid %d\n", MAX_LID);
	for (int i = 0; i < 3; i++) {
		bprintf(b, "0x%04x ", SRCS[i].lid);
		for (int d = 0; d <= MAX_LID; d++)
			bprintf(b, "%c", ROWS[SRCS[i].row][d] == 255 ? '-' : "0123456789abcdef"[ROWS[SRCS[i].row][d]]);
		bprintf(b, "\n");
	}
}

/* Both loads answer every lookup the plugin makes alike. */
static void same_lookups(const struct tableset *a, const struct tableset *b, const char *what)
{
	static const uint64_t guids[] = { 0x1, 0x2, 0x11, 0x21, 0x31, 0x99 };
	CHECK(a->nsw == b->nsw && a->nrows == b->nrows && a->nlids == b->nlids && a->max_lid == b->max_lid &&
	      a->nsl2vl == b->nsl2vl && a->max_vl == b->max_vl && a->has_sl2vl == b->has_sl2vl &&
	      a->has_pathsl == b->has_pathsl, "%s: the sets differ in size", what);
	for (size_t g = 0; g < sizeof guids / sizeof guids[0]; g++) {
		const struct ts_switch *x = ts_find_switch(a, guids[g]), *y = ts_find_switch(b, guids[g]);
		CHECK(ts_file_lid(a, guids[g]) == ts_file_lid(b, guids[g]), "%s: LID of 0x%llx", what,
		      (unsigned long long)guids[g]);
		CHECK(!x == !y, "%s: switch 0x%llx in one only", what, (unsigned long long)guids[g]);
		if (x && y) {
			CHECK(x->count == y->count, "%s: switch 0x%llx rows", what, (unsigned long long)guids[g]);
			for (size_t i = 0; i < x->count && i < y->count; i++) {
				const struct ts_lft_row *r = &a->rows[x->first + i], *q = &b->rows[y->first + i];
				CHECK(r->dst_guid == q->dst_guid && r->port == q->port, "%s: switch 0x%llx row %zu",
				      what, (unsigned long long)guids[g], i);
			}
		}
		for (unsigned in = 0; in <= NPORTS + 1; in++)
			for (unsigned out = 0; out <= NPORTS + 1; out++) {
				const struct ts_sl2vl *e = ts_find_sl2vl(a, guids[g], (uint8_t)in, (uint8_t)out);
				const struct ts_sl2vl *f = ts_find_sl2vl(b, guids[g], (uint8_t)in, (uint8_t)out);
				CHECK(!e == !f && (!e || !memcmp(e->vl, f->vl, TS_NUM_SLS)),
				      "%s: SL-to-VL of 0x%llx in %u out %u", what, (unsigned long long)guids[g], in, out);
			}
	}
	for (unsigned s = 0; s <= MAX_LID + 1; s++)
		for (unsigned d = 0; d <= MAX_LID + 1; d++)
			CHECK(ts_path_sl(a, (uint16_t)s, (uint16_t)d) == ts_path_sl(b, (uint16_t)s, (uint16_t)d),
			      "%s: path SL %u -> %u", what, s, d);
}

static int load(const char *dir, struct tableset *ts, const char *what)
{
	char err[TS_ERR_LEN] = "";
	int rc = ts_load(dir, ts, err, sizeof err);
	CHECK(rc == 0, "%s: %s", what, err);
	return rc;
}

static struct buf blft, bsl, bps, tlft, tsl, tps;

#define BIN_SET(l, s, p) { { TS_LFTS_BIN, (l)->b, (l)->n }, { TS_SL2VL_BIN, (s)->b, (s)->n }, \
	{ TS_PATHSL_BIN, (p)->b, (p)->n } }
#define TEXT_SET(l, s, p) { { TS_LFTS, (l)->b, (l)->n }, { TS_SL2VL, (s)->b, (s)->n }, \
	{ TS_PATHSL, (p)->b, (p)->n } }

static void check_compact_struct(const struct tableset *ts)
{
	const struct ts_switch *s1 = ts_find_switch(ts, 0x1), *s2 = ts_find_switch(ts, 0x2);
	const struct ts_sl2vl *e;
	CHECK(ts->nsw == 2 && ts->max_lid == MAX_LID && ts->nlids == 5, "two switches, 5 LIDs");
	/* LID 5 (no port) skipped: s1 routes LIDs 1-4 and 6. */
	CHECK(s1 && s1->count == 5 && s2 && s2->count == 5, "five rows per switch");
	if (s1 && s1->count == 5) {
		const struct ts_lft_row *r = &ts->rows[s1->first];
		CHECK(r[0].dst_guid == 0x2 && r[0].port == 3 && r[1].dst_guid == 0x1 && r[1].port == 0 &&
		      r[2].dst_guid == 0x11 && r[2].port == 1 && r[4].dst_guid == 0x31 && r[4].port == 2,
		      "s1's rows by LID, named by port GUID");
	}
	CHECK(ts_file_lid(ts, 0x2) == 1 && ts_file_lid(ts, 0x1) == 2 && ts_file_lid(ts, 0x31) == 6 &&
	      ts_file_lid(ts, 0x99) == 0, "the LID map");
	e = ts_find_sl2vl(ts, 0x1, 2, 1);
	CHECK(e && !memcmp(e->vl, TABLES[table_of(0, 2, 1)], TS_NUM_SLS), "s1 in 2 out 1");
	e = ts_find_sl2vl(ts, 0x2, 4, 3);
	CHECK(e && !memcmp(e->vl, TABLES[table_of(1, 4, 3)], TS_NUM_SLS), "s2 from unlinked in 4 to out 3");
	CHECK(!ts_find_sl2vl(ts, 0x1, 1, 4) && !ts_find_sl2vl(ts, 0x2, 1, 2) && !ts_find_sl2vl(ts, 0x2, 0, 0),
	      "no entry toward an unlinked out port, nor out 0");
	e = ts_find_sl2vl(ts, 0x11, 0, 0);
	CHECK(e && !memcmp(e->vl, TABLES[1], TS_NUM_SLS) && ts_find_sl2vl(ts, 0x21, 0, 0), "CA port tables");
	CHECK(ts->nsl2vl == 3 * 5 + 2 * 5 + 3 && ts->max_vl == 1, "SL-to-VL entries, max VL (15 not counted)");
	CHECK(ts_path_sl(ts, 3, 4) == 1 && ts_path_sl(ts, 6, 4) == 1 && ts_path_sl(ts, 6, 6) == 0,
	      "path SLs, row 0 shared by h1 and h3");
	CHECK(ts_path_sl(ts, 4, 6) == 15 && ts_path_sl(ts, 4, 5) == -1 && ts_path_sl(ts, 1, 3) == -1 &&
	      ts_path_sl(ts, 3, MAX_LID + 1) == -1, "SL 15, no path, a switch source, a LID out of range");
}

static void test_compact(const char *dir)
{
	struct tableset bin, text;
	lfts_bin(&blft, LFT, 0);
	sl2vl_bin(&bsl);
	pathsl_bin(&bps);
	lfts_text(&tlft, LFT, 0);
	sl2vl_text(&tsl);
	pathsl_text(&tps);
	struct mfile bset[] = BIN_SET(&blft, &bsl, &bps), tset[] = TEXT_SET(&tlft, &tsl, &tps);
	write_set(dir, bset, 3);
	if (load(dir, &bin, "compact set"))
		return;
	check_compact_struct(&bin);
	write_set(dir, tset, 3);
	if (!load(dir, &text, "text set")) {
		same_lookups(&bin, &text, "text vs compact");
		ts_free(&text);
	}
	/* Both forms listed: the text ones are an export, not even read
	 * (these would not parse). */
	static const char junk[] = "not a dump\n";
	struct mfile both[] = { { TS_LFTS, junk, 11 }, bset[0], { TS_SL2VL, junk, 11 }, bset[1],
				{ TS_PATHSL, junk, 11 }, bset[2] };
	write_set(dir, both, 6);
	if (!load(dir, &text, "both forms")) {
		same_lookups(&bin, &text, "both forms vs compact");
		ts_free(&text);
	}
	/* Per kind: compact LFTs with the text SL-to-VL and path SLs. */
	struct mfile mixed[] = { bset[0], tset[1], tset[2] };
	write_set(dir, mixed, 3);
	if (!load(dir, &text, "mixed forms")) {
		same_lookups(&bin, &text, "mixed forms vs compact");
		ts_free(&text);
	}
	ts_free(&bin);

	/* A drain stage: 255 rows toward h3, none toward the switch s1. */
	lfts_bin(&blft, DRAIN, 1);
	lfts_text(&tlft, DRAIN, 1);
	struct mfile dset[] = BIN_SET(&blft, &bsl, &bps), dtext[] = TEXT_SET(&tlft, &tsl, &tps);
	write_set(dir, dset, 3);
	if (load(dir, &bin, "drain stage"))
		return;
	const struct ts_switch *s2 = ts_find_switch(&bin, 0x2);
	CHECK(s2 && s2->count == 4 && bin.rows[s2->first + 3].dst_guid == 0x31 &&
	      bin.rows[s2->first + 3].port == 255 && bin.rows[s2->first + 1].dst_guid == 0x11,
	      "drain: a 255 row toward h3, none toward s1");
	write_set(dir, dtext, 3);
	if (!load(dir, &text, "drain stage as text")) {
		same_lookups(&bin, &text, "drain text vs compact");
		ts_free(&text);
	}
	ts_free(&bin);
	/* Without the flag, 255 is no route: no row. */
	lfts_bin(&blft, DRAIN, 0);
	struct mfile nset[] = BIN_SET(&blft, &bsl, &bps);
	write_set(dir, nset, 3);
	if (!load(dir, &bin, "no drain")) {
		s2 = ts_find_switch(&bin, 0x2);
		CHECK(s2 && s2->count == 3, "no drain flag: 255 entries are no rows");
		ts_free(&bin);
	}
}

enum { CUT, POKE, APPEND };

static const struct {
	int which;		/* 0 LFTs, 1 SL-to-VL, 2 path SLs */
	int op;
	size_t at;		/* CUT: the length left; POKE: the byte */
	unsigned v;
	size_t off;		/* the offset the refusal must name */
	const char *cause;
} BAD[] = {
	{ 0, CUT, 4, 0, 0, "truncated" },
	{ 0, CUT, 14, 0, 14, "truncated" },
	{ 0, CUT, 50, 0, 16, "does not fit" },
	{ 0, CUT, 200, 0, 80, "does not fit" },
	{ 0, POKE, 0, 'X', 0, "bad magic" },
	{ 0, APPEND, 0, 0, 236, "trailing bytes after the last section (1)" },
	{ 0, POKE, 8, 2, 8, "unknown flags" },
	{ 0, POKE, 10, 1, 10, "expected 0" },
	{ 0, POKE, 12, 0, 12, "max_lid 0 out of range" },
	{ 0, POKE, 32, 0, 32, "not sorted" },			/* port GUID 2 -> 0 */
	{ 0, POKE, 52, 7, 52, "LID 7 out of range" },
	{ 0, POKE, 52, 2, 52, "named twice" },
	{ 0, POKE, 92, 2, 92, "2 blocks" },
	{ 0, POKE, 106, 1, 106, "above max_lid" },		/* s1's LID 10 */
	{ 0, POKE, 160, 1, 160, "not sorted" },			/* s2's GUID -> 1 */
	{ 1, CUT, 6, 0, 0, "truncated" },
	{ 1, CUT, 100, 0, 59, "truncated" },
	{ 1, POKE, 1, 'x', 0, "bad magic" },
	{ 1, APPEND, 0, 0, 210, "trailing" },
	{ 1, POKE, 11, 0xff, 8, "does not fit" },
	{ 1, POKE, 31, 16, 31, "VLs are 0..15" },
	{ 1, POKE, 56, 255, 56, "above 254" },
	{ 1, POKE, 58, 0x2e, 58, "out port 5 marked linked" },
	{ 1, POKE, 73, 2, 73, "table index 2 out of range" },	/* s1 in 1 out 2 */
	{ 1, POKE, 109, 3, 109, "not a switch of the LFT file" },
	{ 1, POKE, 182, 5, 182, "table index 5 out of range" },	/* h1's */
	{ 2, CUT, 30, 0, 16, "does not fit" },
	{ 2, CUT, 50, 0, 44, "truncated" },
	{ 2, POKE, 7, '2', 0, "bad magic" },
	{ 2, APPEND, 0, 0, 58, "trailing" },
	{ 2, POKE, 8, 7, 8, "different routings" },
	{ 2, POKE, 15, 0xff, 44, "truncated" },			/* 4 billion rows */
	{ 2, POKE, 20, 0, 20, "out of range" },			/* source LID 0 */
	{ 2, POKE, 28, 2, 28, "not sorted" },
	{ 2, POKE, 32, 2, 32, "row index 2 out of range" },
	{ 2, POKE, 48, 16, 48, "SL 16" },
};

static void refuse(const char *dir, int which, const struct buf *bad, const char *needle, const char *cause,
		   const char *what)
{
	struct mfile f[] = BIN_SET(&blft, &bsl, &bps);
	char err[TS_ERR_LEN] = "";
	struct tableset ts, before;
	int rc;
	f[which].data = bad->b;
	f[which].len = bad->n;
	write_set(dir, f, 3);
	memset(&ts, 0xa5, sizeof ts);
	before = ts;
	rc = ts_load(dir, &ts, err, sizeof err);
	CHECK(rc != 0, "%s: loaded", what);
	if (rc == 0)
		ts_free(&ts);
	else
		CHECK(!memcmp(&ts, &before, sizeof ts), "%s: the struct was changed on failure", what);
	CHECK(strstr(err, needle) && strstr(err, cause), "%s: reason '%s' lacks '%s' or '%s'", what, err, needle,
	      cause);
}

static void test_refusals(const char *dir)
{
	static const char *names[] = { TS_LFTS_BIN, TS_SL2VL_BIN, TS_PATHSL_BIN };
	static struct buf bad;
	const struct buf *good[] = { &blft, &bsl, &bps };
	char needle[128], what[160];

	lfts_bin(&blft, LFT, 0);
	sl2vl_bin(&bsl);
	pathsl_bin(&bps);
	CHECK(blft.n == 236 && bsl.n == 210 && bps.n == 58, "file sizes the offsets below assume");
	for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
		bad = *good[BAD[i].which];
		if (BAD[i].op == CUT)
			bad.n = BAD[i].at;
		else if (BAD[i].op == POKE)
			bad.b[BAD[i].at] = (uint8_t)BAD[i].v;
		else
			bad.b[bad.n++] = 0;
		snprintf(needle, sizeof needle, "%s: offset %zu: ", names[BAD[i].which], BAD[i].off);
		snprintf(what, sizeof what, "%s %s %zu", names[BAD[i].which],
			 BAD[i].op == CUT ? "cut at" : BAD[i].op == POKE ? "byte" : "appended", BAD[i].at);
		refuse(dir, BAD[i].which, &bad, needle, BAD[i].cause, what);
	}
	/* h3 (LID 6) without a row: an end port with no SLs. */
	bad = bps;
	bad.b[16] = 2;
	memmove(bad.b + 36, bad.b + 44, bad.n - 44);
	bad.n -= 8;
	refuse(dir, 2, &bad, TS_PATHSL_BIN ": offset 20: ", "no SLs for source LID 0x0006", "a source without SLs");
	/* A manifest must list LFTs in one form or the other. */
	struct mfile nolft[] = { { TS_SL2VL_BIN, bsl.b, bsl.n } };
	write_set(dir, nolft, 1);
	expect_refused(dir, "lists no " TS_LFTS_BIN " or " TS_LFTS, "a set without LFTs");
}

/* A port with LMC 1 in the text dump (a row per LID): one base LID and
 * LMC in the map, each row the offset of its LID; the binary map's LMC
 * byte is covered by the interop test, which loads sets `route` wrote. */
static void test_lmc(const char *dir)
{
	static const char *lfts =
		"Unicast lids [0-3] of switch Lid 1 guid 0x0000000000000001 ('s'):\n"
		"0x0001 000 # Switch portguid 0x0000000000000001: 's'\n"
		"0x0002 001 # Channel Adapter portguid 0x0000000000000011: 'h1'\n"
		"0x0003 002 # Channel Adapter portguid 0x0000000000000011: 'h1'\n"
		"3 lids dumped\n"
		"Unicast lids [0-3] of switch Lid 4 guid 0x0000000000000002 ('t'):\n"
		"0x0002 003 # Channel Adapter portguid 0x0000000000000011: 'h1'\n"
		"0x0003 004 # Channel Adapter portguid 0x0000000000000011: 'h1'\n"
		"2 lids dumped\n";
	static const char *unaligned =
		"Unicast lids [0-3] of switch Lid 1 guid 0x0000000000000001 ('s'):\n"
		"0x0001 001 # Channel Adapter portguid 0x0000000000000011: 'h1'\n"
		"0x0002 001 # Channel Adapter portguid 0x0000000000000011: 'h1'\n"
		"2 lids dumped\n";
	struct tableset ts;
	char err[TS_ERR_LEN] = "";
	put(dir, TS_LFTS, lfts);
	manifest(dir, lfts, NULL, NULL, 1);
	CHECK(ts_load(dir, &ts, err, sizeof err) == 0, "LMC set: %s", err);
	CHECK(ts_file_lid(&ts, 0x11) == 2 && ts_file_lmc(&ts, 0x11) == 1 && ts.nlids == 2, "base LID and LMC");
	const struct ts_switch *s = ts_find_switch(&ts, 0x1), *t = ts_find_switch(&ts, 0x2);
	CHECK(s && s->count == 3 && t && t->count == 2, "rows per switch");
	if (s && s->count == 3 && t && t->count == 2) {
		const struct ts_lft_row *r = &ts.rows[s->first], *q = &ts.rows[t->first];
		CHECK(r[1].offset == 0 && r[1].port == 1 && r[2].offset == 1 && r[2].port == 2,
		      "the first block's rows by offset");
		CHECK(q[0].offset == 0 && q[0].port == 3 && q[1].offset == 1 && q[1].port == 4,
		      "a later block's rows by offset");
	}
	ts_free(&ts);
	put(dir, TS_LFTS, unaligned);
	manifest(dir, unaligned, NULL, NULL, 1);
	expect_refused(dir, "not one aligned range of 2^LMC", "LIDs 1-2 of one port");

	/* Path SLs: each LID of a port sends with its own row; a set with a
	 * row for the base LID only is refused. */
	static const char *lfts2 =
		"Unicast lids [0-4] of switch Lid 1 guid 0x0000000000000001 ('s'):\n"
		"0x0001 000 # Switch portguid 0x0000000000000001: 's'\n"
		"0x0002 001 # Channel Adapter portguid 0x0000000000000011: 'h1'\n"
		"0x0003 001 # Channel Adapter portguid 0x0000000000000011: 'h1'\n"
		"0x0004 002 # Channel Adapter portguid 0x0000000000000021: 'h2'\n"
		"4 lids dumped\n";
	static const char *sls_whole = "# ibfabric path SLs\n# max_lid 4\n"
		"0x0002 ----1\n0x0003 ----2\n0x0004 --34-\n";
	static const char *sls_base = "# ibfabric path SLs\n# max_lid 4\n"
		"0x0002 ----1\n0x0004 --34-\n";
	put(dir, TS_LFTS, lfts2);
	put(dir, TS_PATHSL, sls_whole);
	manifest(dir, lfts2, NULL, sls_whole, 1);
	CHECK(ts_load(dir, &ts, err, sizeof err) == 0, "LMC set with path SLs: %s", err);
	CHECK(ts_path_sl(&ts, 3, 4) == 2 && ts_path_sl(&ts, 4, 3) == 4, "path SLs per LID");
	ts_free(&ts);
	put(dir, TS_PATHSL, sls_base);
	manifest(dir, lfts2, NULL, sls_base, 1);
	expect_refused(dir, "no SLs for source LID", "a row for the base LID only");
}

int main(void)
{
	char dir[] = "/tmp/ibfabric-tableset-XXXXXX";

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	/* FNV-1a 64 known answers, as the Rust side checks them. */
	CHECK(ts_fnv1a("", 0) == 0xcbf29ce484222325ULL, "fnv empty");
	CHECK(ts_fnv1a("foobar", 6) == 0x85944171f73967e8ULL, "fnv foobar");

	test_text(dir);
	test_compact(dir);
	test_refusals(dir);
	test_lmc(dir);
	{
		char cmd[600];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	if (failures) {
		fprintf(stderr, "tableset-test: %d failed\n", failures);
		return 1;
	}
	printf("tableset-test: all checks passed\n");
	return 0;
}
