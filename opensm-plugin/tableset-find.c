/*
 * Lookups in a loaded table set: switches, SL-to-VL rows and ports by
 * GUID, path SLs by (source LID, destination LID), as the file numbers
 * them.
 */
#include <stdlib.h>

#include "tableset-int.h"

int ts_cmp_sw(const void *a, const void *b)
{
	const struct ts_switch *x = a, *y = b;
	return x->guid < y->guid ? -1 : x->guid > y->guid;
}

int ts_cmp_gl(const void *a, const void *b)
{
	const struct ts_guid_lid *x = a, *y = b;
	return x->guid < y->guid ? -1 : x->guid > y->guid;
}

const struct ts_switch *ts_find_switch(const struct tableset *ts, uint64_t guid)
{
	struct ts_switch key = { .guid = guid };
	if (!ts->nsw)
		return NULL;
	return bsearch(&key, ts->sw, ts->nsw, sizeof *ts->sw, ts_cmp_sw);
}

const struct ts_sl2vl *ts_find_sl2vl(const struct tableset *ts, uint64_t guid,
				     uint8_t in, uint8_t out)
{
	struct ts_sl2vl key = { .guid = guid, .in = in, .out = out };
	if (!ts->nsl2vl)
		return NULL;
	return bsearch(&key, ts->sl2vl, ts->nsl2vl, sizeof *ts->sl2vl, ts_cmp_sv);
}

const struct ts_guid_lid *ts_file_port(const struct tableset *ts, uint64_t guid)
{
	struct ts_guid_lid key = { .guid = guid };
	if (!ts->nlids)
		return NULL;
	return bsearch(&key, ts->lids, ts->nlids, sizeof *ts->lids, ts_cmp_gl);
}

uint16_t ts_file_lid(const struct tableset *ts, uint64_t guid)
{
	const struct ts_guid_lid *e = ts_file_port(ts, guid);
	return e ? e->lid : 0;
}

uint8_t ts_file_lmc(const struct tableset *ts, uint64_t guid)
{
	const struct ts_guid_lid *e = ts_file_port(ts, guid);
	return e ? e->lmc : 0;
}

int ts_path_sl(const struct tableset *ts, uint16_t src, uint16_t dst)
{
	const char *row;
	char c;
	if (!ts->has_pathsl || src > ts->max_lid || dst > ts->max_lid)
		return -1;
	row = ts->pathsl_rows[src];
	if (!row)
		return -1;
	if (ts->pathsl_bin)
		return (uint8_t)row[dst] == 255 ? -1 : (uint8_t)row[dst];
	c = row[dst];
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
