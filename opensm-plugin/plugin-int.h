/*
 * What the plugin's files share: its state and its log macro.
 */
#ifndef IBFABRIC_PLUGIN_INT_H
#define IBFABRIC_PLUGIN_INT_H

#include <pthread.h>
#include <sys/stat.h>

#include <opensm/osm_config.h>
#include <opensm/osm_opensm.h>
#include <opensm/osm_log.h>

#include "gidroutes.h"
#include "tableset.h"

struct plugin {
	osm_opensm_t *osm;
	char dir[1024];
	unsigned poll_ms;
	pthread_mutex_t lock;	/* guards `active`: SA threads read it */
	struct tableset active;
	int has_active;
	pthread_t watcher;
	int watcher_started;
	volatile int stop;
	char seen_digest[32];
	unsigned long sweeps;
	/* Per-GID router ports for off-subnet PathRecords. */
	pthread_mutex_t map_lock;
	struct gidroutes map;
	int has_map;
	struct stat map_seen;
	int pr_hooked;
	/* Our engine, whose multicast hook follows the set in force. */
	osm_routing_engine_t *re;
	int mcast_warned;
};

#define LOG(p, level, ...) OSM_LOG(&(p)->osm->log, level, "ibfabric: " __VA_ARGS__)

/* Points OpenSM's multicast hook at the set's plan, or back at OpenSM's
 * own trees when the set in force has none (plugin-mcast.c). Called with
 * p->lock held. */
void follow_mcast_plan(struct plugin *p);

/* 0 when every link of the set's multicast plan is in the fabric OpenSM
 * discovered (parent's port down reaches the switch on its port up);
 * else -1 with the first that is not in `err`. */
int mcast_plan_fits(struct plugin *p, const struct tableset *ts, char *err, size_t errlen);

#endif
