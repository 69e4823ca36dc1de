/*
 * Checks of the multicast plan without OpenSM: a plan parses; a group's
 * tree is the part of the spanning tree between its members' switches,
 * with their ports; a truncated or inconsistent plan is refused with its
 * line.
 *
 * The spanning tree below: r(1) with children a(2) on r's port 1 and b(3)
 * on r's port 2; a has child c(4) on a's port 3. Every switch reaches its
 * parent through its port 9.
 */
#include "tableset.h"
#include "tableset-int.h"

#include <stdio.h>
#include <string.h>

static const char *PLAN =
	"# a comment\n"
	"ibfabric-mcast-tree 1\n"
	"sl 15\n"
	"vl 7\n"
	"switch 0x1 root\n"
	"switch 0x2 parent 0x1 down 1 up 9\n"
	"switch 0x3 parent 0x1 down 2 up 9\n"
	"switch 0x4 parent 0x2 down 3 up 9\n"
	"end\n";

static int failures;

#define CHECK(cond, ...) do { if (!(cond)) { failures++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* What a tree sets: a bit per (switch 1..4, port 0..9). */
struct got {
	unsigned mask[5];
};

static void record(void *ctx, uint64_t guid, uint8_t port)
{
	struct got *g = ctx;
	if (guid >= 1 && guid <= 4 && port < 16)
		g->mask[guid] |= 1u << port;
}

static struct got tree(const struct tableset *ts, const struct ts_member *m, size_t n, int *rc)
{
	struct got g;
	char err[TS_ERR_LEN];
	memset(&g, 0, sizeof g);
	*rc = ts_mcast_tree(ts, m, n, record, &g, err, sizeof err);
	return g;
}

static void refused(const char *text, const char *want_line, const char *want)
{
	struct tableset ts;
	char err[TS_ERR_LEN] = "";
	memset(&ts, 0, sizeof ts);
	CHECK(ts_parse_mcast_tree(text, &ts, err, sizeof err) == -1, "refused: %s", want);
	CHECK(strstr(err, want_line) && strstr(err, want), "'%s' in '%s'", want, err);
	ts_free(&ts);
}

int main(void)
{
	struct tableset ts;
	char err[TS_ERR_LEN];
	int rc;

	memset(&ts, 0, sizeof ts);
	CHECK(ts_parse_mcast_tree(PLAN, &ts, err, sizeof err) == 0, "the plan parses: %s", err);
	CHECK(ts.has_mcast && ts.mcast_sl == 15 && ts.mcast_vl == 7 && ts.nmnodes == 4, "plan fields");
	{
		/* Members on c (port 5) and b (port 6): c-a-r-b, with the ports. */
		struct ts_member m[] = { { 4, 5 }, { 3, 6 } };
		struct got g = tree(&ts, m, 2, &rc);
		CHECK(rc == 0, "tree");
		CHECK(g.mask[4] == ((1u << 5) | (1u << 9)), "c: member and up, got %x", g.mask[4]);
		CHECK(g.mask[2] == ((1u << 3) | (1u << 9)), "a: down to c and up, got %x", g.mask[2]);
		CHECK(g.mask[1] == ((1u << 1) | (1u << 2)), "r: to a and b, got %x", g.mask[1]);
		CHECK(g.mask[3] == ((1u << 6) | (1u << 9)), "b: member and up, got %x", g.mask[3]);
	}
	{
		/* Members on a and c only: r and b stay out. */
		struct ts_member m[] = { { 2, 4 }, { 4, 5 }, { 4, 6 } };
		struct got g = tree(&ts, m, 3, &rc);
		CHECK(rc == 0, "tree");
		CHECK(g.mask[1] == 0 && g.mask[3] == 0, "r and b out: %x %x", g.mask[1], g.mask[3]);
		CHECK(g.mask[2] == ((1u << 4) | (1u << 3)), "a: member and down, got %x", g.mask[2]);
		CHECK(g.mask[4] == ((1u << 5) | (1u << 6) | (1u << 9)), "c: two members and up, got %x", g.mask[4]);
	}
	{
		struct ts_member m[] = { { 4, 5 }, { 7, 1 } };
		(void)tree(&ts, m, 2, &rc);
		CHECK(rc == -1, "a member on a switch the plan lacks is refused");
	}
	ts_free(&ts);

	refused("ibfabric-mcast-tree 1\nsl 15\nvl 7\nswitch 0x1 root\n", ":4:", "truncated");
	refused("ibfabric-mcast-tree 2\n", ":1:", "expected");
	refused("ibfabric-mcast-tree 1\nsl 16\n", ":2:", "unexpected");
	refused("ibfabric-mcast-tree 1\nsl 1\nvl 1\nswitch 0x2 parent 0x1 down 1 up 9\nend\n", ":4:", "root");
	refused("ibfabric-mcast-tree 1\nsl 1\nvl 1\nswitch 0x1 root\nswitch 0x2 root\nend\n", ":5:", "second root");
	refused("ibfabric-mcast-tree 1\nsl 1\nvl 1\nswitch 0x1 root\nswitch 0x2 parent 0x3 down 1 up 9\n"
		"switch 0x3 parent 0x1 down 2 up 9\nend\n", ":5:", "not listed before");
	refused("ibfabric-mcast-tree 1\nsl 1\nvl 1\nswitch 0x1 root\nswitch 0x1 parent 0x1 down 1 up 9\nend\n",
		":5:", "twice");
	refused("ibfabric-mcast-tree 1\nsl 1\nvl 1\nswitch 0x1 root\nswitch 0x2 parent 0x1 down 0 up 9\nend\n",
		":5:", "bad port");
	refused("ibfabric-mcast-tree 1\nsl 1\nvl 1\nswitch 0x1 root\nend\nsl 2\n", ":6:", "after 'end'");
	refused("ibfabric-mcast-tree 1\nsl 1\nswitch 0x1 root\nend\n", ":4:", "'vl'");

	if (failures) {
		fprintf(stderr, "mcast-tree-test: %d failed\n", failures);
		return 1;
	}
	printf("mcast-tree-test: all checks passed\n");
	return 0;
}
