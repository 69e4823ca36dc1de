/*
 * The router port for each remote destination GID: ibfabric's mapping file
 * (`ibfabric-mapping.txt`, the inter-subnet paper's Code 1), which OpenSM's
 * prefix routes cannot express (they match the subnet prefix only).
 */
#ifndef IBFABRIC_GIDROUTES_H
#define IBFABRIC_GIDROUTES_H

#include <stddef.h>
#include <stdint.h>

#define GR_MAPPING "ibfabric-mapping.txt"

struct gr_entry {
	uint64_t prefix, guid;	/* destination GID */
	uint64_t router_port;	/* local router port GUID */
	unsigned order;		/* line order: earlier lines are preferred */
};

struct gidroutes {
	struct gr_entry *e;	/* sorted by (prefix, guid, order) */
	size_t n;
	uint64_t *defaults;	/* '*' lines, in order */
	size_t ndefaults;
};

/* Parses the mapping text. Returns 0, or -1 with `line` and a reason. */
int gr_parse(char *text, struct gidroutes *out, unsigned *line, const char **why);
void gr_free(struct gidroutes *g);
/* The candidates for a destination, best first: `*count` entries from the
 * returned one on (NULL when the mapping has none). */
const struct gr_entry *gr_lookup(const struct gidroutes *g, uint64_t prefix, uint64_t guid, size_t *count);

#endif
