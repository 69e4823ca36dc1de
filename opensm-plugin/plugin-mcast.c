/*
 * Multicast trees from the set's plan: OpenSM asks for each MLID's tree
 * through the routing engine's mcast_build_stree hook; the tree is the
 * part of the plan's spanning tree that joins the members' switches
 * (ts_mcast_tree), on the SL the set reserves for multicast.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "plugin-int.h"

#include <opensm/osm_switch.h>
#include <opensm/osm_port.h>
#include <opensm/osm_node.h>
#include <opensm/osm_multicast.h>
#include <opensm/osm_mcast_mgr.h>

struct mft_set {
	struct plugin *p;
	uint16_t mlid;
	int missing;
};

static void set_mft(void *ctx, uint64_t guid, uint8_t port)
{
	struct mft_set *m = ctx;
	osm_switch_t *sw = osm_get_switch_by_guid(&m->p->osm->subn, cl_hton64(guid));
	if (!sw || !osm_switch_supports_mcast(sw)) {
		m->missing++;
		return;
	}
	osm_mcast_tbl_set(&sw->mcast_tbl, m->mlid, port);
}

/* OpenSM's hook for one MLID's tree (its entries are cleared before): the
 * part of the set's spanning tree that joins the members' switches. A
 * group on another SL than the set reserves gets no tree, since on a
 * unicast VL it could close a cycle with the routes. */
static ib_api_status_t build_mcast_tree(void *ctx, osm_mgrp_box_t *mbox)
{
	struct plugin *p = ctx;
	cl_qlist_t list;
	cl_qmap_t map;
	cl_list_item_t *it;
	struct ts_member *m;
	struct mft_set ms = { p, mbox->mlid, 0 };
	size_t n = 0;
	char err[TS_ERR_LEN];
	int rc;

	pthread_mutex_lock(&p->lock);
	for (it = cl_qlist_head(&mbox->mgrp_list); it != cl_qlist_end(&mbox->mgrp_list); it = cl_qlist_next(it)) {
		osm_mgrp_t *g = cl_item_obj(it, g, list_item);
		uint8_t sl, hop;
		uint32_t flow;
		ib_member_get_sl_flow_hop(g->mcmember_rec.sl_flow_hop, &sl, &flow, &hop);
		if (sl != p->active.mcast_sl) {
			LOG(p, OSM_LOG_ERROR, "MLID 0x%04x: the group has SL %u, but the set reserves SL %u "
			    "for multicast (give its partition sl=%u in partitions.conf); no tree built\n",
			    mbox->mlid, sl, p->active.mcast_sl, p->active.mcast_sl);
			pthread_mutex_unlock(&p->lock);
			return IB_ERROR;
		}
	}
	pthread_mutex_unlock(&p->lock);
	if (osm_mcast_make_port_list_and_map(&list, &map, mbox)) {
		osm_mcast_drop_port_list(&list);
		return IB_INSUFFICIENT_MEMORY;
	}
	m = calloc(cl_qlist_count(&list) + 1, sizeof *m);
	if (!m) {
		osm_mcast_drop_port_list(&list);
		return IB_INSUFFICIENT_MEMORY;
	}
	for (it = cl_qlist_head(&list); it != cl_qlist_end(&list); it = cl_qlist_next(it)) {
		osm_port_t *port = ((osm_mcast_work_obj_t *)it)->p_port;
		osm_physp_t *ph = port->p_physp, *r;
		osm_node_t *node = osm_physp_get_node_ptr(ph);
		if (osm_node_get_type(node) == IB_NODE_TYPE_SWITCH) {
			m[n++] = (struct ts_member){ cl_ntoh64(osm_node_get_node_guid(node)), 0 };
			continue;
		}
		r = osm_physp_get_remote(ph);
		if (r && osm_node_get_type(osm_physp_get_node_ptr(r)) == IB_NODE_TYPE_SWITCH)
			m[n++] = (struct ts_member){ cl_ntoh64(osm_node_get_node_guid(osm_physp_get_node_ptr(r))),
						     osm_physp_get_port_num(r) };
	}
	osm_mcast_drop_port_list(&list);
	pthread_mutex_lock(&p->lock);
	rc = n < 2 ? 0 : ts_mcast_tree(&p->active, m, n, set_mft, &ms, err, sizeof err);
	pthread_mutex_unlock(&p->lock);
	free(m);
	if (rc) {
		LOG(p, OSM_LOG_ERROR, "MLID 0x%04x: %s; no tree built\n", mbox->mlid, err);
		return IB_ERROR;
	}
	if (ms.missing)
		LOG(p, OSM_LOG_ERROR, "MLID 0x%04x: %d tree ports on switches OpenSM does not know\n",
		    mbox->mlid, ms.missing);
	LOG(p, OSM_LOG_VERBOSE, "MLID 0x%04x: tree of %zu members from the set's plan\n", mbox->mlid, n);
	return ms.missing ? IB_ERROR : IB_SUCCESS;
}

int mcast_plan_fits(struct plugin *p, const struct tableset *ts, char *err, size_t errlen)
{
	size_t i;
	for (i = 0; i < ts->nmnodes; i++) {
		const struct ts_mnode *v = &ts->mnodes[i];
		osm_switch_t *sw = osm_get_switch_by_guid(&p->osm->subn, cl_hton64(v->guid));
		osm_switch_t *up;
		osm_physp_t *ph, *r;
		if (!sw) {
			snprintf(err, errlen, "the multicast plan names switch 0x%016" PRIx64 ", which is not in the fabric",
				 v->guid);
			return -1;
		}
		if (v->parent == TS_NO_PARENT)
			continue;
		up = osm_get_switch_by_guid(&p->osm->subn, cl_hton64(ts->mnodes[v->parent].guid));
		ph = up ? osm_node_get_physp_ptr(up->p_node, v->down) : NULL;
		r = ph ? osm_physp_get_remote(ph) : NULL;
		if (!r || osm_physp_get_node_ptr(r) != sw->p_node || osm_physp_get_port_num(r) != v->up) {
			snprintf(err, errlen, "the multicast plan's link 0x%016" PRIx64 " port %u to 0x%016" PRIx64
				 " port %u is not in the fabric", ts->mnodes[v->parent].guid, v->down, v->guid, v->up);
			return -1;
		}
	}
	return 0;
}

/* With a multicast plan in the set, every group's tree comes from it;
 * without one OpenSM builds its own trees, which no verification covers. */
void follow_mcast_plan(struct plugin *p)
{
	if (!p->re)
		return;
	if (p->active.has_mcast) {
		if (p->re->mcast_build_stree != build_mcast_tree)
			LOG(p, OSM_LOG_INFO, "multicast trees from the set's plan, on SL %u (VL %u)\n",
			    p->active.mcast_sl, p->active.mcast_vl);
		p->re->mcast_build_stree = build_mcast_tree;
	} else {
		if (p->re->mcast_build_stree == build_mcast_tree || !p->mcast_warned)
			LOG(p, OSM_LOG_INFO, "the set has no multicast plan: OpenSM builds its own multicast "
			    "trees, which the verification did not cover (route with --mcast-groups)\n");
		p->mcast_warned = 1;
		p->re->mcast_build_stree = NULL;
	}
}

