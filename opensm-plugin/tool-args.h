/*
 * The read-back tools speak through the same local port as the diags:
 * `-C <ca>` and `-P <port>`, before anything else on the command line.
 */
#ifndef IBFABRIC_TOOL_ARGS_H
#define IBFABRIC_TOOL_ARGS_H

#include <stdlib.h>
#include <string.h>

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

#endif
