/*
 * The multicast plan of a table set (ibfabric-mcast-tree.txt): the SL and
 * VL multicast has to itself and one spanning tree of the switches. Every
 * group's tree is the part of that spanning tree that joins its members'
 * switches: a packet on a tree never turns back, so the dependencies of
 * all groups together follow paths of one tree and cannot close a cycle
 * on a VL no unicast route uses. That holds for whatever groups members
 * join at run time, which is why the plugin builds trees from the plan and
 * not from a list of groups.
 *
 *   ibfabric-mcast-tree 1
 *   sl 15
 *   vl 7
 *   switch 0x0002c90000000001 root
 *   switch 0x0002c90000000002 parent 0x0002c90000000001 down 3 up 1
 *   end
 */
#include "tableset-int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad(char *err, size_t errlen, unsigned ln, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(err, errlen, "%s:%u: ", TS_MCAST_TREE, ln);
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < errlen)
		vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static int cmp_mindex(const void *a, const void *b)
{
	const struct ts_mindex *x = a, *y = b;
	return x->guid < y->guid ? -1 : x->guid > y->guid;
}

static long find(const struct ts_mindex *ix, size_t n, uint64_t guid)
{
	struct ts_mindex key = { .guid = guid }, *e;
	if (!n)
		return -1;
	e = bsearch(&key, ix, n, sizeof *ix, cmp_mindex);
	return e ? (long)e->idx : -1;
}

/* The parents named by GUID while reading, resolved once all are read. */
struct pending {
	uint64_t parent;
	unsigned line;
};

int ts_parse_mcast_tree(const char *text, struct tableset *ts, char *err, size_t errlen)
{
	struct ts_mnode *nodes = NULL;
	struct pending *par = NULL;
	struct ts_mindex *ix = NULL;
	size_t n = 0, cap = 0, i;
	int header = 0, ended = 0, sl = -1, vl = -1, rc = -1;
	unsigned ln = 0;
	const char *p = text;

	while (*p) {
		char line[512], *c;
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		unsigned long long g, pg;
		unsigned d, u, v;
		char word[16];
		ln++;
		if (len >= sizeof line) {
			bad(err, errlen, ln, "line too long");
			goto out;
		}
		memcpy(line, p, len);
		line[len] = 0;
		p += len + (e ? 1 : 0);
		if ((c = strchr(line, '#')))
			*c = 0;
		for (c = line; *c == ' ' || *c == '\t' || *c == '\r'; c++)
			;
		if (!*c)
			continue;
		if (ended) {
			bad(err, errlen, ln, "text after 'end'");
			goto out;
		}
		if (!header) {
			if (strncmp(c, "ibfabric-mcast-tree 1", 21) || c[21 + strspn(c + 21, " \t\r")]) {
				bad(err, errlen, ln, "expected 'ibfabric-mcast-tree 1'");
				goto out;
			}
			header = 1;
			continue;
		}
		if (sscanf(c, "sl %u %1s", &v, word) == 1 && sl < 0 && v <= 15) {
			sl = (int)v;
		} else if (sscanf(c, "vl %u %1s", &v, word) == 1 && vl < 0 && v <= 14) {
			vl = (int)v;
		} else if (!strncmp(c, "end", 3) && !c[3 + strspn(c + 3, " \t\r")]) {
			ended = 1;
		} else if (!strncmp(c, "switch", 6) && (c[6] == ' ' || c[6] == '\t')) {
			int end1 = -1, end2 = -1, root, child;
			/* %n is set only when the whole pattern before it matched. */
			sscanf(c, "switch %llx root%n", &g, &end1);
			root = end1 > 0 && !c[end1 + strspn(c + end1, " \t\r")];
			sscanf(c, "switch %llx parent %llx down %u up %u%n", &g, &pg, &d, &u, &end2);
			child = !root && end2 > 0 && !c[end2 + strspn(c + end2, " \t\r")];
			if (!root && !child) {
				bad(err, errlen, ln, "expected 'switch GUID root' or 'switch GUID parent GUID down P up Q'");
				goto out;
			}
			if (root != (n == 0)) {
				bad(err, errlen, ln, root ? "a second root" : "the root must come first");
				goto out;
			}
			if (child && (!d || d > 254 || !u || u > 254)) {
				bad(err, errlen, ln, "bad port");
				goto out;
			}
			if (n == cap) {
				size_t nc = cap ? 2 * cap : 256;
				struct ts_mnode *a = realloc(nodes, nc * sizeof *nodes);
				struct pending *b = a ? realloc(par, nc * sizeof *par) : NULL;
				if (a)
					nodes = a;
				if (!a || !b) {
					bad(err, errlen, ln, "out of memory");
					goto out;
				}
				par = b;
				cap = nc;
			}
			nodes[n] = (struct ts_mnode){ g, TS_NO_PARENT, (uint8_t)(child ? d : 0), (uint8_t)(child ? u : 0) };
			par[n] = (struct pending){ child ? pg : 0, ln };
			n++;
		} else {
			bad(err, errlen, ln, "unexpected line '%s'", c);
			goto out;
		}
	}
	if (!ended || sl < 0 || vl < 0 || !n) {
		bad(err, errlen, ln ? ln : 1, ended ? "the plan needs 'sl', 'vl' and a root switch"
						: "no 'end' line: the file is truncated");
		goto out;
	}
	ix = malloc(n * sizeof *ix);
	if (!ix) {
		bad(err, errlen, ln, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++)
		ix[i] = (struct ts_mindex){ nodes[i].guid, (uint32_t)i };
	qsort(ix, n, sizeof *ix, cmp_mindex);
	for (i = 1; i < n; i++)
		if (ix[i].guid == ix[i - 1].guid) {
			bad(err, errlen, par[ix[i].idx].line, "switch 0x%016" PRIx64 " is listed twice", ix[i].guid);
			goto out;
		}
	for (i = 1; i < n; i++) {
		long q = find(ix, n, par[i].parent);
		if (q < 0 || (size_t)q >= i) {
			bad(err, errlen, par[i].line, "parent 0x%016" PRIx64 " is not listed before", par[i].parent);
			goto out;
		}
		nodes[i].parent = (uint32_t)q;
	}
	ts->has_mcast = 1;
	ts->mcast_sl = (uint8_t)sl;
	ts->mcast_vl = (uint8_t)vl;
	ts->mnodes = nodes;
	ts->nmnodes = n;
	ts->mindex = ix;
	nodes = NULL;
	ix = NULL;
	rc = 0;
out:
	free(nodes);
	free(par);
	free(ix);
	return rc;
}

int ts_mcast_tree(const struct tableset *ts, const struct ts_member *m, size_t n,
		  void (*set)(void *ctx, uint64_t sw_guid, uint8_t port), void *ctx,
		  char *err, size_t errlen)
{
	uint32_t *count, total = 0;
	size_t i;
	if (!ts->has_mcast) {
		snprintf(err, errlen, "the set has no multicast plan (%s)", TS_MCAST_TREE);
		return -1;
	}
	count = calloc(ts->nmnodes, sizeof *count);
	if (!count) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < n; i++) {
		long k = find(ts->mindex, ts->nmnodes, m[i].sw_guid);
		if (k < 0) {
			snprintf(err, errlen, "a member is on switch 0x%016" PRIx64 ", which the plan does not hold",
				 m[i].sw_guid);
			free(count);
			return -1;
		}
		if (!count[k]) {
			count[k] = 1;
			total++;
		}
	}
	for (i = 0; i < n; i++)
		set(ctx, m[i].sw_guid, m[i].port);
	/* Children before parents: count[i] becomes the member switches below
	 * i; the link to the parent carries the group when members are on both
	 * sides of it. */
	for (i = ts->nmnodes; i-- > 1;) {
		const struct ts_mnode *v = &ts->mnodes[i];
		uint32_t c = count[i];
		if (c > 0 && c < total) {
			set(ctx, v->guid, v->up);
			set(ctx, ts->mnodes[v->parent].guid, v->down);
		}
		count[v->parent] += c;
	}
	free(count);
	return 0;
}
