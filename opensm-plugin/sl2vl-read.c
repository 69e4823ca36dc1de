/*
 * ibfabric-sl2vl-read: reads SL-to-VL tables from the ports themselves
 * (SMP Get SLtoVLMappingTable), many in one process: a read-back of a
 * fabric with thousands of switch ports would otherwise start one
 * `smpquery sl2vl` per port.
 *
 * Input (standard input), one port per line:
 *   "<LID> switch <out port> <number of ports>"  every in port 0..N to that out port
 *   "<LID> ca"                                   the CA or router port's one table
 * Output: what `smpquery sl2vl` prints for the same queries
 *   "# SL2VL table: Lid N", the SL header, "ports: in  I, out  O: | v| ...|",
 * which `ibfabric verify --sl2vl` and `ibfabric audit` read.
 *
 * Exit status: 0 when every query was answered, 2 when some were not
 * (printed as "# no answer ..."), 1 on bad input or no local port.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/mad.h>
#include <infiniband/umad.h>

#include "tool-args.h"

static int query(struct ibmad_port *port, int lid, int in, int out)
{
	uint8_t buf[IB_SMP_DATA_SIZE] = { 0 };
	ib_portid_t id = { 0 };
	int sl;
	ib_portid_set(&id, lid, 0, 0);
	if (!smp_query_via(buf, &id, IB_ATTR_SLVL_TABLE, (unsigned)(in << 8 | out), 0, port)) {
		printf("# no answer from LID %d in %d out %d\n", lid, in, out);
		return -1;
	}
	printf("ports: in %2d, out %2d: |", in, out);
	/* Two SLs a byte, the even SL in the high nibble. */
	for (sl = 0; sl < 16; sl++)
		printf("%2u|", (buf[sl / 2] >> (sl % 2 ? 0 : 4)) & 0xf);
	printf("\n");
	return 0;
}

static void header(int lid)
{
	int sl;
	printf("# SL2VL table: Lid %d\n#                 SL: |", lid);
	for (sl = 0; sl < 16; sl++)
		printf("%2d|", sl);
	printf("\n");
}

int main(int argc, char **argv)
{
	int classes[] = { IB_SMI_CLASS, IB_SMI_DIRECT_CLASS };
	struct ibmad_port *port;
	char line[256], kind[16];
	int failed = 0, lineno = 0;

	char *ca;
	int ca_port, a = port_args(argc, argv, &ca, &ca_port);
	if (a < argc && (!strcmp(argv[a], "-h") || !strcmp(argv[a], "--help"))) {
		fprintf(stderr, "usage: %s [-C ca] [-P port] < ports.txt\n"
			"lines: '<lid> switch <out port> <ports>' or '<lid> ca'; prints smpquery sl2vl's format\n",
			argv[0]);
		return 0;
	}
	port = mad_rpc_open_port(ca, ca_port, classes, 2);
	if (!port) {
		fprintf(stderr, "cannot open the local IB port\n");
		return 1;
	}
	while (fgets(line, sizeof line, stdin)) {
		int lid, out, nports, n, in;
		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		n = sscanf(line, "%d %15s %d %d", &lid, kind, &out, &nports);
		if (n >= 2 && !strcmp(kind, "ca")) {
			header(lid);
			failed |= query(port, lid, 0, 0);
		} else if (n == 4 && !strcmp(kind, "switch") && out > 0 && out <= nports && nports < 255) {
			header(lid);
			for (in = 0; in <= nports; in++)
				failed |= query(port, lid, in, out);
		} else {
			fprintf(stderr, "line %d: expected '<lid> switch <out> <ports>' or '<lid> ca'\n", lineno);
			mad_rpc_close_port(port);
			return 1;
		}
	}
	mad_rpc_close_port(port);
	return failed ? 2 : 0;
}
