/*
 * What the text readers (tableset.c) and the compact ones (tableset-bin.c)
 * share; not part of the plugin's interface.
 */
#ifndef IBFABRIC_TABLESET_INT_H
#define IBFABRIC_TABLESET_INT_H

#include "tableset.h"

/* Orders SL-to-VL entries by (guid, in, out), as ts_find_sl2vl searches. */
int ts_cmp_sv(const void *a, const void *b);
/* Order switches and ports by GUID, as the lookups search them. */
int ts_cmp_sw(const void *a, const void *b);
int ts_cmp_gl(const void *a, const void *b);

/* A port of the file's LID map by GUID (its base LID and LMC). */
const struct ts_guid_lid *ts_file_port(const struct tableset *ts, uint64_t guid);

/* The index in ts->lids of an end port without a path SL row, or
 * ts->nlids when every one has its row. */
size_t ts_missing_source(const struct tableset *ts);

/* The compact files, `len` bytes at `b` (checked against the manifest).
 * The LFTs come first: they give the switches and LIDs the others are
 * checked against. Path SL rows keep pointing into `b`. */
int ts_parse_lfts_bin(const uint8_t *b, size_t len, struct tableset *ts, char *err, size_t errlen);
int ts_parse_sl2vl_bin(const uint8_t *b, size_t len, struct tableset *ts, char *err, size_t errlen);
int ts_parse_pathsl_bin(const uint8_t *b, size_t len, struct tableset *ts, char *err, size_t errlen);

/* The multicast plan (ibfabric-mcast-tree.txt), NUL-terminated text. */
int ts_parse_mcast_tree(const char *text, struct tableset *ts, char *err, size_t errlen);

#endif
