/*
 * A table set: the files ibfabric writes for one routing (LFTs, SL-to-VL
 * tables, path SLs) as checked against their manifest. Parsing here knows
 * nothing of OpenSM, so the same code is what the plugin applies and what
 * its tests exercise. Each kind of table comes as OpenSM's text dump or in
 * the compact binary form (docs/table-set-format.md); both fill the same
 * struct, so the plugin cannot tell which it was given.
 */
#ifndef IBFABRIC_TABLESET_H
#define IBFABRIC_TABLESET_H

#include <stddef.h>
#include <stdint.h>

#define TS_MANIFEST "ibfabric-tables.txt"
#define TS_LFTS "opensm-lfts.dump"
#define TS_SL2VL "opensm-sl2vl.dump"
#define TS_PATHSL "path-sl.txt"
#define TS_LFTS_BIN "ibfabric-lfts.bin"
#define TS_SL2VL_BIN "ibfabric-sl2vl.bin"
#define TS_PATHSL_BIN "ibfabric-pathsl.bin"
/* Multicast: the groups and trees the set was verified with (a record,
 * not read), and the plan every group's tree is built from. */
#define TS_MCAST_GROUPS "ibfabric-mcast-groups.txt"
#define TS_MFTS "ibfabric-mfts.txt"
#define TS_MCAST_TREE "ibfabric-mcast-tree.txt"
#define TS_NUM_SLS 16
#define TS_ERR_LEN 512

/* One LFT row: the destination by port GUID (LIDs are remapped to the ones
 * the SM assigned, as OpenSM's own file loader does). */
struct ts_lft_row {
	uint64_t dst_guid;
	uint8_t port;
	/* Which of the port's 2^LMC LIDs: the SM's LID at this offset from
	 * the port's base LID gets the entry. */
	uint8_t offset;
};

struct ts_switch {
	uint64_t guid;
	size_t first;		/* index of its first row in ts->rows */
	size_t count;
};

/* SL-to-VL rows are keyed as opensm-sl2vl.dump keys them: a switch's node
 * GUID with (in, out), or a CA/router port GUID with (0, 0). */
struct ts_sl2vl {
	uint64_t guid;
	uint8_t in, out;
	uint8_t vl[TS_NUM_SLS];
};

/* One switch of the multicast plan's spanning tree, parents first: its
 * parent's index (TS_NO_PARENT at the root), the parent's port down to it
 * and its own port up. */
#define TS_NO_PARENT UINT32_MAX
struct ts_mnode {
	uint64_t guid;
	uint32_t parent;
	uint8_t down, up;
};

struct ts_mindex {
	uint64_t guid;
	uint32_t idx;
};

/* A member of a multicast group: the switch it is linked to and the
 * switch's port (port 0: the switch itself). */
struct ts_member {
	uint64_t sw_guid;
	uint8_t port;
};

/* A port's base LID in the file and its LMC (it answers to 2^LMC LIDs). */
struct ts_guid_lid {
	uint64_t guid;
	uint16_t lid;
	uint8_t lmc;
};

struct tableset {
	char manifest_digest[32];	/* FNV-1a of the manifest text */
	char engine[64];
	char generation[64];
	struct ts_switch *sw;	/* sorted by GUID */
	size_t nsw;
	struct ts_lft_row *rows;
	size_t nrows;
	struct ts_guid_lid *lids;	/* the file's LID of each port, sorted by GUID */
	size_t nlids;
	uint16_t max_lid;
	int has_sl2vl;
	struct ts_sl2vl *sl2vl;	/* sorted by (guid, in, out) */
	size_t nsl2vl;
	uint8_t max_vl;
	int has_pathsl;
	int pathsl_bin;		/* rows are SL bytes (255 = no path), not hex text */
	char *pathsl_buf;	/* the file's contents; rows point into it */
	const char **pathsl_rows;	/* by file source LID; NULL when absent */
	int has_mcast;		/* the set carries a multicast plan */
	uint8_t mcast_sl, mcast_vl;
	struct ts_mnode *mnodes;	/* parents first, the root at 0 */
	size_t nmnodes;
	struct ts_mindex *mindex;	/* sorted by GUID */
};

uint64_t ts_fnv1a(const void *data, size_t len);

/* Reads a whole file, NUL-terminated; NULL with errno set on failure. */
char *ts_slurp(const char *path, size_t *len);

/* Loads the set the manifest in `dir` names; of a kind listed in both
 * forms, the compact file (the text one is then an export). Returns 0, or
 * -1 with a reason in `err` (a missing, partial, mixed or malformed set);
 * `ts` is untouched on failure. */
int ts_load(const char *dir, struct tableset *ts, char *err, size_t errlen);

/* The manifest's digest without loading the set, to tell whether the set
 * changed; -1 when the manifest cannot be read. */
int ts_manifest_digest(const char *dir, char out[32]);

void ts_free(struct tableset *ts);

const struct ts_switch *ts_find_switch(const struct tableset *ts, uint64_t guid);
const struct ts_sl2vl *ts_find_sl2vl(const struct tableset *ts, uint64_t guid,
				     uint8_t in, uint8_t out);
/* The file's LID of a port, 0 when the set does not know it. */
uint16_t ts_file_lid(const struct tableset *ts, uint64_t guid);
/* The LMC of that port in the file (0 when the file does not name it). */
uint8_t ts_file_lmc(const struct tableset *ts, uint64_t guid);
/* The SL from `src` to `dst` (file LIDs); -1 for no path or unknown. */
int ts_path_sl(const struct tableset *ts, uint16_t src, uint16_t dst);

/* The tree of a group with members `m` (n of them): the part of the plan's
 * spanning tree that joins their switches, with the member ports. Calls
 * set(ctx, switch GUID, port) for every port of every switch's entry.
 * Returns 0, or -1 with a reason in `err` (no plan, a member on a switch
 * the plan lacks); nothing is set then. */
int ts_mcast_tree(const struct tableset *ts, const struct ts_member *m, size_t n,
		  void (*set)(void *ctx, uint64_t sw_guid, uint8_t port), void *ctx,
		  char *err, size_t errlen);

#endif
