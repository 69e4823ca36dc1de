/*
 * ibfabric-pathrecord-sl: asks the SA for one PathRecord per ordered pair of
 * the port GUIDs read on standard input (hex, '#' comments), or, when the
 * lines hold two GUIDs each, for just those (source, destination) pairs
 * (a sample), and prints
 * "0x<source GUID> 0x<destination GUID> <SLID> <DLID> <SL>" per pair, so the
 * SLs OpenSM hands out can be checked against path-sl.txt. Single-record
 * Gets, one pair at a time: the answer of a GetTable needs RMPP, which the
 * ibsim simulator does not carry.
 *
 * With --lids, the lines are "<source LID> <destination LID>" (decimal) and
 * each asks for the PathRecord between those two LIDs: with LMC a port has
 * 2^LMC LIDs, and the SL may differ between two LIDs of the same ports. The
 * output is the same, with the GUIDs the SA answers.
 *
 * Exit status: 0 when every query was answered, 2 when some were not (each
 * is printed as "# no path ..."), 1 when the SA cannot be reached.
 */
#include <endian.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/mad.h>
#include <infiniband/umad.h>

#include "tool-args.h"

/* PathRecord component mask bits (IBA 15.2.5.16): DLID and SLID. */
#define PR_COMPMASK_DLID (1ULL << 4)
#define PR_COMPMASK_SLID (1ULL << 5)

static void print_record(const uint8_t *rec)
{
	ibmad_gid_t sgid, dgid;
	uint64_t sg, dg;
	mad_decode_field((uint8_t *)rec, IB_SA_PR_SGID_F, sgid);
	mad_decode_field((uint8_t *)rec, IB_SA_PR_DGID_F, dgid);
	memcpy(&sg, sgid + 8, 8);
	memcpy(&dg, dgid + 8, 8);
	printf("0x%016" PRIx64 " 0x%016" PRIx64 " %u %u %u\n", be64toh(sg), be64toh(dg),
	       mad_get_field((void *)rec, 0, IB_SA_PR_SLID_F),
	       mad_get_field((void *)rec, 0, IB_SA_PR_DLID_F),
	       mad_get_field((void *)rec, 0, IB_SA_PR_SL_F));
}

/* The "<slid> <dlid>" lines of `in`, read whole before the SA is asked so
 * that bad input is refused without touching the fabric: 2 LIDs per pair in
 * *lids, the pair count returned, -1 (said on stderr) on a bad line. */
static long read_lid_pairs(FILE *in, uint16_t **lids)
{
	char line[256];
	size_t n = 0, cap = 0, lineno = 0;
	*lids = NULL;
	while (fgets(line, sizeof line, in)) {
		char *s = line, *e1, *e2;
		unsigned long slid, dlid;
		lineno++;
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '#' || *s == '\n' || !*s)
			continue;
		slid = strtoul(s, &e1, 10);
		dlid = strtoul(e1, &e2, 10);
		if (e1 == s || e2 == e1 || !slid || !dlid || slid > 0xbfff || dlid > 0xbfff) {
			fprintf(stderr, "line %zu: not '<source LID> <destination LID>' (unicast, decimal): %s",
				lineno, line);
			return -1;
		}
		if (n == cap) {
			uint16_t *p;
			cap = cap ? 2 * cap : 1024;
			p = realloc(*lids, 2 * cap * sizeof **lids);
			if (!p) {
				fprintf(stderr, "out of memory\n");
				return -1;
			}
			*lids = p;
		}
		(*lids)[2 * n] = (uint16_t)slid;
		(*lids)[2 * n + 1] = (uint16_t)dlid;
		n++;
	}
	return (long)n;
}

/* One PathRecord Get per pair of LIDs; returns the exit status. */
static int by_lids(struct ibmad_port *port, ib_portid_t *sm, const uint16_t *lids, long n)
{
	size_t unanswered = 0;
	long i;
	for (i = 0; i < n; i++) {
		uint8_t buf[IB_SA_DATA_SIZE] = { 0 };
		ib_sa_call_t sa = { 0 };
		uint32_t slid = lids[2 * i], dlid = lids[2 * i + 1];
		uint8_t *rec;
		sa.method = IB_MAD_METHOD_GET;
		sa.attrid = IB_SA_ATTR_PATHRECORD;
		sa.mask = PR_COMPMASK_DLID | PR_COMPMASK_SLID;
		sa.trid = mad_trid();
		mad_encode_field(buf, IB_SA_PR_SLID_F, &slid);
		mad_encode_field(buf, IB_SA_PR_DLID_F, &dlid);
		rec = sa_rpc_call(port, buf, sm, &sa, 0);
		if (!rec) {
			unanswered++;
			printf("# no path LID %u LID %u\n", slid, dlid);
			continue;
		}
		print_record(rec);
	}
	return unanswered ? 2 : 0;
}

int main(int argc, char **argv)
{
	struct ibmad_port *port;
	ib_portid_t sm = { 0 };
	uint64_t *guids = NULL, *dsts = NULL, prefix = 0xfe80000000000000ULL;
	size_t n = 0, cap = 0, i, j, unanswered = 0;
	int pairs = -1;	/* unknown until the first line */
	char line[256];

	char *ca;
	int ca_port, a = port_args(argc, argv, &ca, &ca_port);
	if (a < argc && (!strcmp(argv[a], "-h") || !strcmp(argv[a], "--help"))) {
		fprintf(stderr, "usage: %s [-C ca] [-P port] [--lids] < port-guids.txt\n"
			"One SA PathRecord Get per ordered pair of the GUIDs read (or per line\n"
			"when lines are '<source GUID> <destination GUID>'); prints\n"
			"'0x<sguid> 0x<dguid> <slid> <dlid> <sl>'. Exit 2 if some pair had no answer.\n"
			"--lids: lines are '<source LID> <destination LID>' (decimal), one Get each\n"
			"(with LMC, every pair of LIDs can be asked).\n",
			argv[0]);
		return 0;
	}
	if (a < argc && !strcmp(argv[a], "--lids")) {
		uint16_t *lids;
		long np = read_lid_pairs(stdin, &lids);
		int rc;
		if (np < 0)
			return 1;
		port = open_sa_port(ca, ca_port, &sm);
		if (!port) {
			free(lids);
			return 1;
		}
		rc = by_lids(port, &sm, lids, np);
		mad_rpc_close_port(port);
		free(lids);
		return rc;
	}
	if (a < argc) {
		fprintf(stderr, "unknown argument '%s' (see --help)\n", argv[a]);
		return 1;
	}
	while (fgets(line, sizeof line, stdin)) {
		char *e;
		uint64_t g;
		int got = guid_line(line, &g, &e);
		if (got == 0)
			continue;
		if (got < 0)
			return 1;
		{
			char *e2;
			uint64_t d = strtoull(e, &e2, 16);
			int two = e2 != e && d != 0;
			if (pairs < 0)
				pairs = two;
			if (pairs != two) {
				fprintf(stderr, "mixed one- and two-GUID lines: %s", line);
				return 1;
			}
			if (n == cap) {
				uint64_t *p, *q;
				cap = cap ? 2 * cap : 1024;
				p = realloc(guids, cap * sizeof *guids);
				q = p ? realloc(dsts, cap * sizeof *dsts) : NULL;
				if (!p || !q) {
					fprintf(stderr, "out of memory\n");
					return 1;
				}
				guids = p;
				dsts = q;
			}
			dsts[n] = d;
		}
		guids[n++] = g;
	}
	port = open_sa_port(ca, ca_port, &sm);
	if (!port)
		return 1;
	for (i = 0; i < n; i++) {
		for (j = 0; j < (pairs > 0 ? 1 : n); j++) {
			uint8_t buf[IB_SA_DATA_SIZE] = { 0 };
			ibmad_gid_t sgid, dgid;
			uint64_t dst = pairs > 0 ? dsts[i] : guids[j];
			uint64_t p = htobe64(prefix), gs = htobe64(guids[i]), gd = htobe64(dst);
			if (pairs <= 0 && i == j)
				continue;
			memcpy(sgid, &p, 8);
			memcpy(sgid + 8, &gs, 8);
			memcpy(dgid, &p, 8);
			memcpy(dgid + 8, &gd, 8);
			if (ib_path_query_via(port, sgid, dgid, &sm, buf) <= 0) {
				unanswered++;
				printf("# no path 0x%016" PRIx64 " 0x%016" PRIx64 "\n", guids[i], dst);
				continue;
			}
			printf("0x%016" PRIx64 " 0x%016" PRIx64 " %u %u %u\n", guids[i], dst,
			       mad_get_field(buf, 0, IB_SA_PR_SLID_F), mad_get_field(buf, 0, IB_SA_PR_DLID_F),
			       mad_get_field(buf, 0, IB_SA_PR_SL_F));
		}
	}
	mad_rpc_close_port(port);
	free(guids);
	free(dsts);
	return unanswered ? 2 : 0;
}
