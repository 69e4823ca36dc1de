#include "gidroutes.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
	const struct gr_entry *x = a, *y = b;
	if (x->prefix != y->prefix)
		return x->prefix < y->prefix ? -1 : 1;
	if (x->guid != y->guid)
		return x->guid < y->guid ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

static int hex64(const char *s, uint64_t *v)
{
	char *e;
	if (!strncmp(s, "0x", 2) || !strncmp(s, "0X", 2))
		s += 2;
	if (!isxdigit((unsigned char)*s))
		return -1;
	*v = strtoull(s, &e, 16);
	return *e ? -1 : 0;
}

/* Eight groups of up to four hex digits ("fe80:0000:...:0011", as ibfabric
 * and ibstat write them) or "0x<prefix>:0x<guid>". */
static int parse_gid(const char *s, uint64_t *prefix, uint64_t *guid)
{
	uint64_t hi = 0, lo = 0;
	const char *c = strstr(s, ":0x");
	int g;
	if (!strncmp(s, "0x", 2) && c) {
		char p[32];
		size_t n = (size_t)(c - s);
		if (n >= sizeof p)
			return -1;
		memcpy(p, s, n);
		p[n] = '\0';
		return hex64(p, prefix) || hex64(c + 1, guid) ? -1 : 0;
	}
	for (g = 0; g < 8; g++) {
		char *e;
		unsigned long v;
		if (!isxdigit((unsigned char)*s))
			return -1;
		v = strtoul(s, &e, 16);
		if (e - s > 4 || v > 0xffff)
			return -1;
		if (g < 4)
			hi = hi << 16 | v;
		else
			lo = lo << 16 | v;
		s = e;
		if (g < 7) {
			if (*s != ':')
				return -1;
			s++;
		}
	}
	if (*s)
		return -1;
	*prefix = hi;
	*guid = lo;
	return 0;
}

int gr_parse(char *text, struct gidroutes *out, unsigned *line, const char **why)
{
	struct gidroutes g = { 0 };
	size_t cap = 0, dcap = 0;
	char *l, *cur = text;
	unsigned ln = 0;
	while (cur && *cur) {
		char *nl = strchr(cur, '\n'), a[128], b[64];
		uint64_t rp;
		int n;
		if (nl)
			*nl = '\0';
		l = cur;
		cur = nl ? nl + 1 : NULL;
		ln++;
		while (isspace((unsigned char)*l))
			l++;
		if (!*l || *l == '#')
			continue;
		n = sscanf(l, "%127s %63s", a, b);
		if (n != 2 || hex64(b, &rp) || !rp) {
			*line = ln;
			*why = "expected '<destination GID> <router port GUID>' or '* <router port GUID>'";
			goto fail;
		}
		if (!strcmp(a, "*")) {
			if (g.ndefaults == dcap) {
				uint64_t *d;
				dcap = dcap ? 2 * dcap : 8;
				d = realloc(g.defaults, dcap * sizeof *d);
				if (!d)
					goto oom;
				g.defaults = d;
			}
			g.defaults[g.ndefaults++] = rp;
			continue;
		}
		if (g.n == cap) {
			struct gr_entry *e;
			cap = cap ? 2 * cap : 1024;
			e = realloc(g.e, cap * sizeof *e);
			if (!e)
				goto oom;
			g.e = e;
		}
		if (parse_gid(a, &g.e[g.n].prefix, &g.e[g.n].guid)) {
			*line = ln;
			*why = "bad GID (eight hex groups, or 0x<prefix>:0x<guid>)";
			goto fail;
		}
		g.e[g.n].router_port = rp;
		g.e[g.n].order = ln;
		g.n++;
	}
	qsort(g.e, g.n, sizeof *g.e, cmp);
	*out = g;
	return 0;
oom:
	*line = ln;
	*why = "out of memory";
fail:
	gr_free(&g);
	return -1;
}

void gr_free(struct gidroutes *g)
{
	free(g->e);
	free(g->defaults);
	memset(g, 0, sizeof *g);
}

const struct gr_entry *gr_lookup(const struct gidroutes *g, uint64_t prefix, uint64_t guid, size_t *count)
{
	size_t lo = 0, hi = g->n, k;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct gr_entry *m = &g->e[mid];
		if (m->prefix < prefix || (m->prefix == prefix && m->guid < guid))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (k = lo; k < g->n && g->e[k].prefix == prefix && g->e[k].guid == guid; k++)
		;
	*count = k - lo;
	return *count ? &g->e[lo] : NULL;
}
