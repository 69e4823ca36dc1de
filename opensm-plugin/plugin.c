/*
 * libibfabric.so: an OpenSM 3.3.23 event plugin that registers the routing
 * engine "ibfabric". On every heavy sweep the engine applies the table set
 * an ibfabric agent (or `ibfabric route`) wrote into one directory:
 *   - LFTs from ibfabric-lfts.bin (or opensm-lfts.dump), rows matched by
 *     port GUID and remapped to the LIDs the SM assigned;
 *   - per-(in, out) SL-to-VL tables from ibfabric-sl2vl.bin (or
 *     opensm-sl2vl.dump) (needs qos on: OpenSM calls update_sl2vl only
 *     then);
 *   - the SL of every SA PathRecord from ibfabric-pathsl.bin (or
 *     path-sl.txt), looked up by the ports' GUIDs, so a LID assignment that
 *     differs from the files' does not change the answer.
 * Both forms load into the same tables (tableset.c, tableset-bin.c); when
 * the manifest lists both, the compact one is read.
 * A set is applied whole or not at all: a missing, partial, mixed or
 * malformed set, or one that does not cover the fabric OpenSM discovered,
 * is refused with the reason in OpenSM's log, and the set in force stays.
 * A watcher thread polls the manifest and asks OpenSM for a heavy sweep
 * when it changes, so writing a new set is all an agent has to do.
 *
 * opensm.conf:
 *   event_plugin_name ibfabric
 *   event_plugin_options ibfabric_dir=/var/lib/ibfabric/tables ibfabric_poll_ms=1000
 *   routing_engine ibfabric,no_fallback
 *   qos TRUE
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <opensm/osm_config.h>
#include <opensm/osm_version.h>
#include <opensm/osm_opensm.h>
#include <opensm/osm_event_plugin.h>
#include <opensm/osm_switch.h>
#include <opensm/osm_port.h>
#include <opensm/osm_node.h>
#include <opensm/osm_log.h>

#include "plugin-int.h"

#include <opensm/osm_sa.h>
#include <sys/stat.h>

/* Exported by the opensm binary, declared in no header. */
void osm_pr_rcv_process(void *context, void *data);

#define DEFAULT_DIR "/var/lib/ibfabric/tables"
#define ENGINE_NAME "ibfabric"
/* Files the plugin writes beside the set: its verdict on the last set, and
 * a count of heavy sweeps (a changed fabric shows up as one). */
#define STATUS_FILE "opensm-plugin-status.txt"
#define SWEEP_FILE "opensm-sweep.txt"


static void parse_options(struct plugin *p)
{
	const char *opts = p->osm->subn.opt.event_plugin_options;
	const char *env = getenv("IBFABRIC_TABLES_DIR");
	snprintf(p->dir, sizeof p->dir, "%s", env && *env ? env : DEFAULT_DIR);
	p->poll_ms = 1000;
	if (!opts)
		return;
	/* The options string is shared by every event plugin: take only our
	 * keys. */
	char *copy = strdup(opts), *save = NULL, *tok;
	if (!copy)
		return;
	for (tok = strtok_r(copy, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save)) {
		if (!strncmp(tok, "ibfabric_dir=", 13))
			snprintf(p->dir, sizeof p->dir, "%s", tok + 13);
		else if (!strncmp(tok, "ibfabric_poll_ms=", 17))
			p->poll_ms = (unsigned)strtoul(tok + 17, NULL, 10);
	}
	free(copy);
}

static uint8_t data_vls(uint8_t vl_cap)
{
	/* VLCap / OperVLs encoding: 1 = VL0, 2 = VL0-1, 3 = VL0-3, 4 = VL0-7,
	 * 5 = VL0-14. */
	static const uint8_t n[] = { 0, 1, 2, 4, 8, 15 };
	return vl_cap < sizeof n ? n[vl_cap] : 15;
}

/* Checks that `ts` routes exactly the fabric OpenSM discovered: a table
 * for every switch, an entry for every port, ports that exist, and VLs the
 * ports have. */
static int fits_fabric(struct plugin *p, const struct tableset *ts, char *err, size_t errlen)
{
	osm_subn_t *subn = &p->osm->subn;
	cl_map_item_t *it;
	size_t ncas = 0, i;
	uint8_t op = subn->opt.max_op_vls;

	if ((ts->has_sl2vl || ts->has_pathsl) && !subn->opt.qos) {
		snprintf(err, errlen,
			 "the set has %s but qos is off: OpenSM would not program them (set 'qos TRUE')",
			 ts->has_sl2vl ? "SL-to-VL tables" : "path SLs");
		return -1;
	}
	/* Every switch must reach every CA port; switches and router ports
	 * may be unreachable from some switches (a router port on one spine,
	 * under Up-Down routing), and the verifier checks only what carries traffic. */
	for (it = cl_qmap_head(&subn->port_guid_tbl); it != cl_qmap_end(&subn->port_guid_tbl);
	     it = cl_qmap_next(it)) {
		osm_port_t *port = (osm_port_t *)it;
		uint64_t g = cl_ntoh64(osm_port_get_guid(port));
		uint16_t lo, hi;
		osm_port_get_lid_range_ho(port, &lo, &hi);
		/* A port's LIDs in the set and in the fabric: as many (the
		 * set's LMC is the SM's), each LID its own row. */
		if (ts_file_lid(ts, g) && (1u << ts_file_lmc(ts, g)) != (unsigned)(hi - lo + 1)) {
			snprintf(err, errlen, "port 0x%016llx (%s) has LMC %u in the set and %u LIDs in the fabric (set 'lmc' as the set was routed)",
				 (unsigned long long)g, port->p_node->print_desc, ts_file_lmc(ts, g), hi - lo + 1);
			return -1;
		}
		if (osm_node_get_type(port->p_node) == IB_NODE_TYPE_CA)
			ncas += hi - lo + 1;
	}
	for (it = cl_qmap_head(&subn->sw_guid_tbl); it != cl_qmap_end(&subn->sw_guid_tbl);
	     it = cl_qmap_next(it)) {
		osm_switch_t *sw = (osm_switch_t *)it;
		osm_node_t *node = sw->p_node;
		uint64_t g = cl_ntoh64(osm_node_get_node_guid(node));
		const struct ts_switch *s = ts_find_switch(ts, g);
		uint8_t np = osm_node_get_num_physp(node), out, in;
		size_t cas = 0;
		if (!s) {
			snprintf(err, errlen, "switch 0x%016llx (%s) has no table in the set: it was computed for another topology",
				 (unsigned long long)g, node->print_desc);
			return -1;
		}
		for (i = 0; i < s->count; i++) {
			const struct ts_lft_row *r = &ts->rows[s->first + i];
			osm_port_t *dp = osm_get_port_by_guid(subn, cl_hton64(r->dst_guid));
			if (!dp) {
				snprintf(err, errlen, "switch 0x%016llx routes to port 0x%016llx, which is not in the fabric",
					 (unsigned long long)g, (unsigned long long)r->dst_guid);
				return -1;
			}
			if (osm_node_get_type(dp->p_node) == IB_NODE_TYPE_CA)
				cas++;
			/* 255: dropped on purpose (a reroute's drain stage). */
			if (r->port >= np && r->port != OSM_NO_PATH) {
				snprintf(err, errlen, "switch 0x%016llx has no port %u", (unsigned long long)g, r->port);
				return -1;
			}
		}
		if (cas != ncas) {
			snprintf(err, errlen, "switch 0x%016llx (%s) routes %zu CA LIDs, the fabric has %zu: another topology",
				 (unsigned long long)g, node->print_desc, cas, ncas);
			return -1;
		}
		if (!ts->has_sl2vl)
			continue;
		for (out = 1; out < np; out++) {
			osm_physp_t *po = osm_node_get_physp_ptr(node, out);
			/* OpenSM's QoS setup skips ports that are down; so do we. */
			if (!po || !osm_physp_get_remote(po) ||
			    ib_port_info_get_port_state(&po->port_info) == IB_LINK_DOWN)
				continue;
			uint8_t have = data_vls(ib_port_info_get_vl_cap(&po->port_info));
			if (op && data_vls(op) < have)
				have = data_vls(op);
			for (in = 0; in < np; in++) {
				const struct ts_sl2vl *e = ts_find_sl2vl(ts, g, in, out);
				int sl;
				if (!e) {
					snprintf(err, errlen, "switch 0x%016llx (%s): no SL-to-VL table for in %u out %u",
						 (unsigned long long)g, node->print_desc, in, out);
					return -1;
				}
				for (sl = 0; sl < TS_NUM_SLS; sl++)
					if (e->vl[sl] != 15 && e->vl[sl] >= have) {
						snprintf(err, errlen,
							 "switch 0x%016llx port %u: SL %d goes to VL %u, the port has %u data VLs",
							 (unsigned long long)g, out, sl, e->vl[sl], have);
						return -1;
					}
			}
		}
	}
	if (ts->has_mcast)
		return mcast_plan_fits(p, ts, err, errlen);
	return 0;
}

/* Fills the switches' new LFTs from `ts` (validated against the fabric). */
static void program_lfts(struct plugin *p, const struct tableset *ts)
{
	osm_subn_t *subn = &p->osm->subn;
	cl_map_item_t *it;
	size_t n = 0, i;
	for (it = cl_qmap_head(&subn->sw_guid_tbl); it != cl_qmap_end(&subn->sw_guid_tbl);
	     it = cl_qmap_next(it)) {
		osm_switch_t *sw = (osm_switch_t *)it;
		uint64_t g = cl_ntoh64(osm_node_get_node_guid(sw->p_node));
		const struct ts_switch *s = ts_find_switch(ts, g);
		memset(sw->new_lft, OSM_NO_PATH, sw->lft_size);
		for (i = 0; s && i < s->count; i++) {
			const struct ts_lft_row *r = &ts->rows[s->first + i];
			osm_port_t *dp = osm_get_port_by_guid(subn, cl_hton64(r->dst_guid));
			uint16_t lid = dp ? cl_ntoh16(osm_port_get_base_lid(dp)) + r->offset : 0;
			if (lid && lid < sw->lft_size) {
				sw->new_lft[lid] = r->port;
				n++;
			}
		}
	}
	LOG(p, OSM_LOG_INFO, "programmed %zu LFT entries of set %s (engine %s) on %u switches\n", n,
	    ts->generation, ts->engine, cl_qmap_count(&subn->sw_guid_tbl));
}

/* Leaves a one-line file for the agent beside the set (written whole,
 * then renamed): STATUS_FILE, the verdict on the last set, and
 * SWEEP_FILE, the count of heavy sweeps. */
static void write_beside(struct plugin *p, const char *name, const char *fmt, ...)
{
	char path[1200], tmp[1300];
	va_list ap;
	FILE *f;
	snprintf(path, sizeof path, "%s/%s", p->dir, name);
	snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
	f = fopen(tmp, "w");
	if (!f)
		return;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		unlink(tmp);
}

/* (Re)reads ibfabric-mapping.txt when it changed; a file that does not
 * parse leaves the mapping in force. One thread only calls it (create,
 * then the watcher, or the sweeps when there is no watcher): `map_seen`
 * is that thread's; `map_lock` guards the mapping the SA threads read. */
static void load_mapping(struct plugin *p)
{
	char path[1200], *text;
	struct stat st;
	struct gidroutes next;
	unsigned line = 0;
	const char *why = "";
	size_t len;

	snprintf(path, sizeof path, "%s/%s", p->dir, GR_MAPPING);
	if (stat(path, &st) != 0) {
		if (p->has_map) {
			LOG(p, OSM_LOG_INFO, "%s is gone: off-subnet PathRecords follow OpenSM's prefix routes\n", path);
			pthread_mutex_lock(&p->map_lock);
			gr_free(&p->map);
			p->has_map = 0;
			pthread_mutex_unlock(&p->map_lock);
		}
		memset(&p->map_seen, 0, sizeof p->map_seen);
		return;
	}
	if (st.st_ino == p->map_seen.st_ino && st.st_size == p->map_seen.st_size &&
	    st.st_mtim.tv_sec == p->map_seen.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == p->map_seen.st_mtim.tv_nsec)
		return;
	p->map_seen = st;
	text = ts_slurp(path, &len);
	if (!text)
		return;
	if (gr_parse(text, &next, &line, &why) != 0) {
		LOG(p, OSM_LOG_ERROR, "%s:%u: %s; keeping the mapping in force\n", path, line, why);
	} else {
		pthread_mutex_lock(&p->map_lock);
		if (p->has_map)
			gr_free(&p->map);
		p->map = next;
		p->has_map = 1;
		pthread_mutex_unlock(&p->map_lock);
		LOG(p, OSM_LOG_INFO, "off-subnet PathRecords from %s: %zu routes, %zu default router ports\n",
		    path, next.n, next.ndefaults);
	}
	free(text);
}

/* The router port for an off-subnet destination: its mapping lines in
 * order, then the defaults, the first port present in the fabric. Called
 * under the SA's lock. */
static uint64_t router_port_for(struct plugin *p, uint64_t prefix, uint64_t guid)
{
	const struct gr_entry *e;
	size_t n = 0, i;
	uint64_t found = 0;
	pthread_mutex_lock(&p->map_lock);
	if (p->has_map) {
		e = gr_lookup(&p->map, prefix, guid, &n);
		for (i = 0; i < n && !found; i++)
			if (osm_get_port_by_guid(&p->osm->subn, cl_hton64(e[i].router_port)))
				found = e[i].router_port;
		for (i = 0; i < p->map.ndefaults && !found; i++)
			if (osm_get_port_by_guid(&p->osm->subn, cl_hton64(p->map.defaults[i])))
				found = p->map.defaults[i];
	}
	pthread_mutex_unlock(&p->map_lock);
	return found;
}

/* OpenSM's SA matches an off-subnet DGID by its prefix only
 * (prefix-routes.conf). A Get or GetTable that names both GIDs, with a DGID of another
 * subnet that the mapping routes, is answered here with the path to the
 * mapping's router port and the original DGID, through OpenSM's own path
 * computation (osm_pr_process_pair); everything else goes to OpenSM's
 * handler unchanged. */
static void pr_process(void *context, void *data)
{
	struct plugin *p = context;
	osm_sa_t *sa = &p->osm->sa;
	osm_madw_t *madw = data;
	const ib_sa_mad_t *sa_mad = osm_madw_get_sa_mad_ptr(madw);
	ib_path_rec_t *pr = ib_sa_mad_get_payload_ptr(sa_mad);
	const osm_alias_guid_t *src, *dst;
	osm_port_t *requester;
	cl_qlist_t list;
	uint64_t rp;

	if ((sa_mad->method != IB_MAD_METHOD_GET && sa_mad->method != IB_MAD_METHOD_GETTABLE) ||
	    (sa_mad->comp_mask & (IB_PR_COMPMASK_SGID | IB_PR_COMPMASK_DGID)) !=
		    (IB_PR_COMPMASK_SGID | IB_PR_COMPMASK_DGID) ||
	    ib_gid_is_link_local(&pr->dgid) || ib_gid_is_multicast(&pr->dgid) ||
	    ib_gid_get_subnet_prefix(&pr->dgid) == sa->p_subn->opt.subnet_prefix || !p->has_map) {
		osm_pr_rcv_process(sa, data);
		return;
	}
	cl_qlist_init(&list);
	cl_plock_acquire(sa->p_lock);
	rp = router_port_for(p, cl_ntoh64(pr->dgid.unicast.prefix), cl_ntoh64(pr->dgid.unicast.interface_id));
	if (!rp) {
		cl_plock_release(sa->p_lock);
		osm_pr_rcv_process(sa, data);
		return;
	}
	requester = osm_get_port_by_mad_addr(sa->p_log, sa->p_subn, osm_madw_get_mad_addr_ptr(madw));
	src = osm_get_alias_guid_by_guid(sa->p_subn, pr->sgid.unicast.interface_id);
	dst = osm_get_alias_guid_by_guid(sa->p_subn, cl_hton64(rp));
	if (requester && src && dst)
		osm_pr_process_pair(sa, sa_mad, requester, src, dst, &pr->sgid, &pr->dgid, &list);
	cl_plock_release(sa->p_lock);
	OSM_LOG(sa->p_log, OSM_LOG_DEBUG, "ibfabric: DGID 0x%016" PRIx64 ":0x%016" PRIx64
		" via router port 0x%016" PRIx64 " (%u records)\n",
		cl_ntoh64(pr->dgid.unicast.prefix), cl_ntoh64(pr->dgid.unicast.interface_id), rp,
		cl_qlist_count(&list));
	/* An empty list is answered with NO_RECORDS. */
	osm_sa_respond(sa, madw, sizeof(ib_path_rec_t), &list);
}

static void hook_path_records(struct plugin *p)
{
	osm_sa_t *sa = &p->osm->sa;
	cl_disp_unregister(sa->pr_disp_h);
	sa->pr_disp_h = cl_disp_register(sa->p_disp, OSM_MSG_MAD_PATH_RECORD, pr_process, p);
	if (sa->pr_disp_h == CL_DISP_INVALID_HANDLE) {
		OSM_LOG(&p->osm->log, OSM_LOG_ERROR,
			"ibfabric: cannot take the PathRecord handler; OpenSM's stays\n");
		sa->pr_disp_h = cl_disp_register(sa->p_disp, OSM_MSG_MAD_PATH_RECORD, osm_pr_rcv_process, sa);
		return;
	}
	p->pr_hooked = 1;
	OSM_LOG(&p->osm->log, OSM_LOG_INFO, "ibfabric: answering off-subnet PathRecords by destination GID\n");
}

static int build_lid_matrices(void *ctx)
{
	(void)ctx;
	/* > 0: OpenSM computes its min-hop matrices; the SA's hop counts and
	 * multicast use them. */
	return 1;
}

static int build_fwd_tables(void *ctx)
{
	struct plugin *p = ctx;
	struct tableset next;
	char err[TS_ERR_LEN], digest[32];
	int have_digest = ts_manifest_digest(p->dir, digest) == 0;

	if (!p->watcher_started)
		load_mapping(p);
	pthread_mutex_lock(&p->lock);
	if (have_digest && p->has_active && !strcmp(digest, p->active.manifest_digest)) {
		/* Same set: reapply it if it still fits (the sweep may be for a
		 * topology change). */
	} else if (ts_load(p->dir, &next, err, sizeof err) != 0) {
		LOG(p, OSM_LOG_ERROR, "refusing the set in %s: %s; keeping the tables in force\n", p->dir, err);
		write_beside(p, STATUS_FILE, "refused %s: %s\n", have_digest ? digest : "-", err);
	} else if (fits_fabric(p, &next, err, sizeof err) != 0) {
		LOG(p, OSM_LOG_ERROR, "refusing set %s (engine %s) in %s: %s; keeping the tables in force\n",
		    next.generation, next.engine, p->dir, err);
		write_beside(p, STATUS_FILE, "refused generation %s: %s\n", next.generation, err);
		ts_free(&next);
	} else {
		if (p->has_active)
			ts_free(&p->active);
		p->active = next;
		p->has_active = 1;
		LOG(p, OSM_LOG_INFO, "loaded set %s (engine %s): %zu switches, max LID %u%s%s\n",
		    p->active.generation, p->active.engine, p->active.nsw, p->active.max_lid,
		    p->active.has_sl2vl ? ", SL-to-VL tables" : "", p->active.has_pathsl ? ", path SLs" : "");
	}
	if (!p->has_active) {
		pthread_mutex_unlock(&p->lock);
		LOG(p, OSM_LOG_ERROR, "no table set in force: routing fails rather than guessing\n");
		return -1;
	}
	if (fits_fabric(p, &p->active, err, sizeof err) != 0) {
		pthread_mutex_unlock(&p->lock);
		LOG(p, OSM_LOG_ERROR, "the set in force (%s) no longer fits the fabric: %s\n", p->active.generation, err);
		return -1;
	}
	program_lfts(p, &p->active);
	follow_mcast_plan(p);
	write_beside(p, STATUS_FILE, "applied generation %s\n", p->active.generation);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

static void update_sl2vl(void *ctx, osm_physp_t *port, uint8_t in, uint8_t out, ib_slvl_table_t *t)
{
	struct plugin *p = ctx;
	osm_node_t *node = osm_physp_get_node_ptr(port);
	int sw = osm_node_get_type(node) == IB_NODE_TYPE_SWITCH;
	const struct ts_sl2vl *e;
	uint64_t key = cl_ntoh64(sw ? osm_node_get_node_guid(node) : osm_physp_get_port_guid(port));
	int sl;

	pthread_mutex_lock(&p->lock);
	if (p->has_active && p->active.has_sl2vl) {
		e = ts_find_sl2vl(&p->active, key, sw ? in : 0, sw ? out : 0);
		if (e) {
			memset(t, 0, sizeof *t);
			for (sl = 0; sl < TS_NUM_SLS; sl++)
				ib_slvl_table_set(t, (uint8_t)sl, e->vl[sl]);
		} else if (sw && out) {
			/* Enhanced port 0 (out 0) keeps OpenSM's table: the set
			 * routes nothing out of a switch's management port. */
			LOG(p, OSM_LOG_ERROR, "no SL-to-VL table for switch 0x%016llx in %u out %u\n",
			    (unsigned long long)key, in, out);
		}
	}
	pthread_mutex_unlock(&p->lock);
}

/* The set's LID for the SM's LID `lid` of `port`: the same offset from
 * the port's base LID in both; 0 when the set has no such LID. */
static uint16_t file_lid_of(const struct tableset *ts, osm_port_t *port, uint16_t lid)
{
	uint64_t g = cl_ntoh64(osm_port_get_guid(port));
	uint16_t base = ts_file_lid(ts, g), off = lid - cl_ntoh16(osm_port_get_base_lid(port));
	if (!base || off >= (1u << ts_file_lmc(ts, g)))
		return 0;
	return base + off;
}

static uint8_t path_sl(void *ctx, uint8_t hint, const ib_net16_t slid, const ib_net16_t dlid)
{
	struct plugin *p = ctx;
	osm_port_t *sp, *dp;
	int sl = -1;

	pthread_mutex_lock(&p->lock);
	if (p->has_active && p->active.has_pathsl) {
		sp = osm_get_port_by_lid(&p->osm->subn, slid);
		dp = osm_get_port_by_lid(&p->osm->subn, dlid);
		/* Each LID at its offset in its port's range: with LMC the
		 * set's path SLs are per (source LID, destination LID). */
		if (sp && dp)
			sl = ts_path_sl(&p->active,
					file_lid_of(&p->active, sp, cl_ntoh16(slid)),
					file_lid_of(&p->active, dp, cl_ntoh16(dlid)));
	}
	if (sl < 0)
		sl = hint;
	/* The multicast SL's VL is multicast's alone: a partition's SL (the
	 * hint) may be that SL, for its IPoIB group; its unicast paths take
	 * SL 0 then, which every engine's tables carry. */
	if (p->has_active && p->active.has_mcast && sl == p->active.mcast_sl)
		sl = 0;
	pthread_mutex_unlock(&p->lock);
	return (uint8_t)sl;
}

/* Polls the manifest; a new one means a new set: ask for a heavy sweep,
 * which runs build_fwd_tables and the SL-to-VL programming. */
static void *watch(void *arg)
{
	struct plugin *p = arg;
	char digest[32];
	while (!p->stop) {
		struct timespec ts = { p->poll_ms / 1000, (long)(p->poll_ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
		if (p->stop)
			break;
		load_mapping(p);
		if (ts_manifest_digest(p->dir, digest) != 0 || !strcmp(digest, p->seen_digest))
			continue;
		snprintf(p->seen_digest, sizeof p->seen_digest, "%s", digest);
		LOG(p, OSM_LOG_INFO, "new table set in %s: requesting a heavy sweep\n", p->dir);
		p->osm->subn.force_heavy_sweep = TRUE;
		osm_opensm_sweep(p->osm);
	}
	return NULL;
}

static int setup(osm_routing_engine_t *re, osm_opensm_t *osm)
{
	struct plugin *p = re->context;
	(void)osm;
	if (p)
		p->re = re;
	re->build_lid_matrices = build_lid_matrices;
	re->ucast_build_fwd_tables = build_fwd_tables;
	re->update_sl2vl = update_sl2vl;
	re->path_sl = path_sl;
	return 0;
}

static void *create(osm_opensm_t *osm)
{
	struct plugin *p = calloc(1, sizeof *p);
	external_routing_engine_module_t m = { ENGINE_NAME, setup, NULL };
	if (!p)
		return NULL;
	p->osm = osm;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->map_lock, NULL);
	parse_options(p);
	m.context = p;
	if (osm_register_external_routing_engine(osm, &m, p) != CL_SUCCESS) {
		OSM_LOG(&osm->log, OSM_LOG_ERROR, "ibfabric: cannot register the routing engine\n");
		free(p);
		return NULL;
	}
	ts_manifest_digest(p->dir, p->seen_digest);
	/* The SA is initialised before plugins load and bound after: the
	 * handler is ours before the first PathRecord arrives. */
	hook_path_records(p);
	load_mapping(p);
	if (p->poll_ms) {
		if (pthread_create(&p->watcher, NULL, watch, p) == 0)
			p->watcher_started = 1;
		else
			OSM_LOG(&osm->log, OSM_LOG_ERROR, "ibfabric: cannot start the watcher: %s\n", strerror(errno));
	}
	OSM_LOG(&osm->log, OSM_LOG_INFO, "ibfabric: routing engine '%s' registered; tables from %s, polled every %u ms\n",
		ENGINE_NAME, p->dir, p->poll_ms);
	return p;
}

static void destroy(void *ctx)
{
	struct plugin *p = ctx;
	if (!p)
		return;
	p->stop = 1;
	if (p->watcher_started)
		pthread_join(p->watcher, NULL);
	if (p->has_active)
		ts_free(&p->active);
	if (p->has_map)
		gr_free(&p->map);
	pthread_mutex_destroy(&p->map_lock);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static void report(void *ctx, osm_epi_event_id_t id, void *data)
{
	struct plugin *p = ctx;
	(void)data;
	/* After discovery, before routing: an agent that rediscovers now sees
	 * what OpenSM saw. */
	if (id != OSM_EVENT_ID_HEAVY_SWEEP_DONE)
		return;
	p->sweeps++;
	write_beside(p, SWEEP_FILE, "heavy sweeps %lu\n", p->sweeps);
}

osm_event_plugin_t osm_event_plugin = {
	OSM_VERSION, create, destroy, report
};
