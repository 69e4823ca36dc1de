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
		fprintf(stderr, "usage: %s [-C ca] [-P port] < port-guids.txt\n"
			"One SA PathRecord Get per ordered pair of the GUIDs read (or per line\n"
			"when lines are '<source GUID> <destination GUID>'); prints\n"
			"'0x<sguid> 0x<dguid> <slid> <dlid> <sl>'. Exit 2 if some pair had no answer.\n",
			argv[0]);
		return 0;
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
