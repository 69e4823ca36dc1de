/*
 * ibfabric-mcast-join: joins the port GUIDs read on standard input (hex,
 * '#' comments) to a multicast group as full members, one SA
 * MCMemberRecord Set per port sent from the local port (a proxy join,
 * which OpenSM accepts from a port that shares the group's partition),
 * and prints "0x<port GUID> 0x<MLID> <SL>" per join. What an IPoIB driver
 * or an MPI library does when it starts; here it lets a simulated fabric
 * get groups with members, so that their trees can be read back from the
 * switches and checked.
 *
 * Usage: ibfabric-mcast-join [-C ca] [-P port] [MGID] < port-guids.txt
 * MGID defaults to IPoIB's IPv4 broadcast group of the default partition,
 * ff12:401b:ffff::ffff:ffff.
 *
 * Exit status: 0 when every join was answered, 2 when some were not (each
 * printed as "# not joined ..."), 1 when the SA cannot be reached or the
 * input is bad.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/mad.h>
#include <infiniband/umad.h>

#include "tool-args.h"

/* MCMemberRecord component mask bits (IBA 15.2.5.17). */
#define MCR_MGID (1ULL << 0)
#define MCR_PORT_GID (1ULL << 1)
#define MCR_JOIN_STATE (1ULL << 16)

int main(int argc, char **argv)
{
	struct ibmad_port *port;
	ib_portid_t sm = { 0 };
	uint8_t mgid[16];
	uint64_t prefix = htobe64(0xfe80000000000000ULL);
	const char *mgid_text = "ff12:401b:ffff::ffff:ffff";
	char line[256], *ca;
	int ca_port, a = port_args(argc, argv, &ca, &ca_port), failed = 0;

	if (a < argc && (!strcmp(argv[a], "-h") || !strcmp(argv[a], "--help"))) {
		fprintf(stderr, "usage: %s [-C ca] [-P port] [MGID] < port-guids.txt\n"
			"Joins each port GUID read to the group MGID (default: IPoIB's broadcast\n"
			"group ff12:401b:ffff::ffff:ffff) as a full member; prints\n"
			"'0x<port guid> 0x<mlid> <sl>'. Exit 2 if some join had no answer.\n",
			argv[0]);
		return 0;
	}
	if (a < argc)
		mgid_text = argv[a];
	if (inet_pton(AF_INET6, mgid_text, mgid) != 1 || mgid[0] != 0xff) {
		fprintf(stderr, "not a multicast GID: %s\n", mgid_text);
		return 1;
	}
	port = open_sa_port(ca, ca_port, &sm);
	if (!port)
		return 1;
	sm.qp = 1;
	sm.qkey = IB_DEFAULT_QP1_QKEY;
	while (fgets(line, sizeof line, stdin)) {
		char *e;
		uint8_t buf[IB_SA_DATA_SIZE] = { 0 }, pgid[16];
		ib_sa_call_t sa = { 0 };
		uint64_t g, gbe;
		int got = guid_line(line, &g, &e);
		if (got == 0)
			continue;
		if (got < 0) {
			mad_rpc_close_port(port);
			return 1;
		}
		gbe = htobe64(g);
		memcpy(pgid, &prefix, 8);
		memcpy(pgid + 8, &gbe, 8);
		mad_set_array(buf, 0, IB_SA_MCM_MGID_F, mgid);
		mad_set_array(buf, 0, IB_SA_MCM_PORTGID_F, pgid);
		mad_set_field(buf, 0, IB_SA_MCM_JOIN_STATE_F, 1);
		sa.attrid = IB_SA_ATTR_MCRECORD;
		sa.method = IB_MAD_METHOD_SET;
		sa.mask = MCR_MGID | MCR_PORT_GID | MCR_JOIN_STATE;
		if (!sa_rpc_call(port, buf, &sm, &sa, 0)) {
			failed++;
			printf("# not joined 0x%016" PRIx64 " to %s\n", g, mgid_text);
			continue;
		}
		printf("0x%016" PRIx64 " 0x%04x %u\n", g, mad_get_field(buf, 0, IB_SA_MCM_MLID_F),
		       mad_get_field(buf, 0, IB_SA_MCM_SL_F));
	}
	mad_rpc_close_port(port);
	return failed ? 2 : 0;
}
