/*
 * The read-back tools speak through the same local port as the diags:
 * `-C <ca>` and `-P <port>`, before anything else on the command line.
 */
#ifndef IBFABRIC_TOOL_ARGS_H
#define IBFABRIC_TOOL_ARGS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/mad.h>

/* Returns the index of the first argument after the port options. */
static inline int port_args(int argc, char **argv, char **ca, int *port)
{
	int a;
	*ca = NULL;
	*port = 0;
	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "-C") && a + 1 < argc)
			*ca = argv[++a];
		else if (!strcmp(argv[a], "-P") && a + 1 < argc)
			*port = atoi(argv[++a]);
		else
			break;
	}
	return a;
}

/* One line of port GUIDs on standard input: 0 for a blank or '#' line,
 * 1 with the first GUID in *g and the rest of the line in *rest, -1 (said
 * on stderr) when the line does not start with one. */
static inline int guid_line(char *line, uint64_t *g, char **rest)
{
	char *s = line;
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s == '#' || *s == '\n' || !*s)
		return 0;
	*g = strtoull(s, rest, 16);
	if (*rest == s || !*g) {
		fprintf(stderr, "not a port GUID: %s", line);
		return -1;
	}
	return 1;
}

/* Opens the local port for SMP and SA queries and finds the SM; NULL,
 * with the reason on stderr, when either fails. */
static inline struct ibmad_port *open_sa_port(char *ca, int ca_port, ib_portid_t *sm)
{
	int classes[] = { IB_SMI_CLASS, IB_SMI_DIRECT_CLASS, IB_SA_CLASS };
	struct ibmad_port *port = mad_rpc_open_port(ca, ca_port, classes, 3);
	if (!port) {
		fprintf(stderr, "cannot open the local IB port\n");
		return NULL;
	}
	if (ib_resolve_smlid_via(sm, 0, port) < 0) {
		fprintf(stderr, "cannot find the SM's LID (is a subnet manager running?)\n");
		mad_rpc_close_port(port);
		return NULL;
	}
	return port;
}

#endif
