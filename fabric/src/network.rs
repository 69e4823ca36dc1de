//! A routed multi-subnet fabric as its packets see it: every host pair's
//! channels (link, VL) through the emitted LFTs, path SLs, SL-to-VL tables
//! and the routers' relay decisions. The whole-fabric check and the flow
//! simulator both walk it.

use crate::error::{Error, Result};
use crate::intersubnet::{Gid, GlobalView, InterSubnetRoutes, Tracer};
use crate::model::{Fabric, NONE, NodeKind, Slot};
use crate::multi::MultiFabric;
use crate::tables::{Routing, SL_NONE};
use std::collections::HashMap;

/// An end node that sends and receives traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    pub subnet: usize,
    pub slot: Slot,
    pub gid: Gid,
    pub lid: u16,
}

/// A routed fabric, ready to give each (source, destination) host pair the
/// list of directed links its packets cross. Link ids are the sending port
/// slots, offset per subnet, so a link is one direction of one cable.
pub struct Network<'a> {
    m: &'a MultiFabric,
    routings: Vec<&'a Routing>,
    tracer: Tracer<'a>,
    offsets: Vec<u32>,
    num_links: usize,
    hosts: Vec<Host>,
    /// (router GUID, port) -> (subnet, slot of the port there, its LID).
    router_ports: HashMap<(u64, u8), (usize, Slot, u16)>,
}

fn net_err(reason: String) -> Error {
    Error::Invalid(format!("network: {reason}"))
}

impl<'a> Network<'a> {
    /// `routings` yields the routing of each subnet in order; `view` and
    /// `routes` are the controller's inputs and outputs for the same fabric.
    pub fn new(
        m: &'a MultiFabric,
        routings: impl IntoIterator<Item = &'a Routing>,
        view: &'a GlobalView,
        routes: &'a InterSubnetRoutes,
    ) -> Result<Self> {
        let routings: Vec<&'a Routing> = routings.into_iter().collect();
        if routings.len() != m.subnets.len() {
            return Err(net_err(format!(
                "{} subnets but {} routings",
                m.subnets.len(),
                routings.len()
            )));
        }
        let mut offsets = Vec::with_capacity(m.subnets.len());
        let mut num_links = 0usize;
        let mut hosts = Vec::new();
        for (si, s) in m.subnets.iter().enumerate() {
            offsets.push(num_links as u32);
            num_links += s.fabric.num_slots();
            let f = &s.fabric;
            for &e in f.endports() {
                if f.kind(f.node_of(e)) == NodeKind::Ca && f.remote(e) != NONE {
                    hosts.push(Host {
                        subnet: si,
                        slot: e,
                        gid: Gid {
                            prefix: s.prefix,
                            guid: f.port_guid(e),
                        },
                        lid: f.lid_of_slot(e),
                    });
                }
            }
        }
        if num_links > u32::MAX as usize {
            return Err(net_err("more than 2^32 ports".into()));
        }
        let mut router_ports = HashMap::new();
        let index: Vec<HashMap<u64, Slot>> = m
            .subnets
            .iter()
            .map(|s| s.fabric.port_guid_index())
            .collect();
        for r in &m.routers {
            for p in &r.ports {
                let slot = *index[p.subnet].get(&p.port_guid).ok_or_else(|| {
                    net_err(format!(
                        "router '{}' port {} is missing from its subnet",
                        r.name, p.port
                    ))
                })?;
                router_ports.insert((r.guid, p.port), (p.subnet, slot, p.lid));
            }
        }
        Ok(Self {
            m,
            routings,
            tracer: Tracer::new(view, routes),
            offsets,
            num_links,
            hosts,
            router_ports,
        })
    }

    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    pub fn num_subnets(&self) -> usize {
        self.m.subnets.len()
    }

    pub fn num_links(&self) -> usize {
        self.num_links
    }

    fn walk(
        &self,
        s: usize,
        start: Slot,
        slid: u16,
        dlid: u16,
        out: &mut Vec<(u32, u8)>,
    ) -> Result<()> {
        let sub = &self.m.subnets[s];
        walk(
            &sub.fabric,
            self.routings[s],
            &sub.name,
            self.offsets[s],
            start,
            slid,
            dlid,
            out,
        )
    }

    /// Appends the channels (link, VL) of the path from host `src` to host
    /// `dst`: the LFT walk to the router port the source subnet's mapping
    /// names, then after each router the walk to the next LID.
    pub fn path_channels(&self, src: usize, dst: usize, out: &mut Vec<(u32, u8)>) -> Result<()> {
        let (hs, hd) = (self.hosts[src], self.hosts[dst]);
        if hs.subnet == hd.subnet {
            return self.walk(hs.subnet, hs.slot, hs.lid, hd.lid, out);
        }
        let crossings = self.tracer.trace(hs.gid, hd.gid)?;
        let port = |c: &crate::intersubnet::Crossing, p: u8| {
            self.router_ports
                .get(&(c.router_guid, p))
                .copied()
                .ok_or_else(|| net_err(format!("router {:#018x} has no port {p}", c.router_guid)))
        };
        let first = crossings
            .first()
            .ok_or_else(|| net_err(format!("no router crossing from {} to {}", hs.gid, hd.gid)))?;
        let (_, _, in_lid) = port(first, first.ingress_port)?;
        self.walk(hs.subnet, hs.slot, hs.lid, in_lid, out)?;
        for c in &crossings {
            let (sn, slot, lid) = port(c, c.egress_port)?;
            self.walk(sn, slot, lid, c.next_lid, out)?;
        }
        Ok(())
    }

    /// Names a channel for reports: the sending port and its VL.
    pub fn describe(&self, link: u32, vl: u8) -> String {
        let s = self
            .offsets
            .partition_point(|&o| o <= link)
            .saturating_sub(1);
        let f = &self.m.subnets[s].fabric;
        let slot = link - self.offsets[s];
        let rem = f.remote(slot);
        let to = if rem == NONE {
            "nothing".to_string()
        } else {
            f.desc(f.node_of(rem)).to_string()
        };
        format!(
            "{}: '{}' port {} -> '{to}' VL {vl}",
            self.m.subnets[s].name,
            f.desc(f.node_of(slot)),
            f.port_of(slot)
        )
    }
}

/// Appends the channels (link, VL) from `start` (a sending end port with
/// LID `slid`) to the end port with `dlid` in one subnet, following the
/// LFTs, the pair's SL and the SL-to-VL tables; link ids are the sending
/// slots plus `off`.
#[allow(clippy::too_many_arguments)]
fn walk(
    f: &Fabric,
    r: &Routing,
    name: &str,
    off: u32,
    start: Slot,
    slid: u16,
    dlid: u16,
    out: &mut Vec<(u32, u8)>,
) -> Result<()> {
    let sl = r.path_sl.as_ref().map_or(0, |p| p.get(slid, dlid));
    if sl == SL_NONE {
        return Err(net_err(format!(
            "subnet '{name}' has no SL for LID {slid} -> {dlid}"
        )));
    }
    let vl = r.port_vl(start, sl);
    walk_channels(f, r, off, start, vl, sl, dlid, out)
        .map_err(|e| net_err(format!("subnet '{name}': {e}")))
}

/// The walk itself, from `start` entered on `vl` with `sl`: what the
/// traffic models and the dependency summary both follow.
#[allow(clippy::too_many_arguments)]
pub(crate) fn walk_channels(
    f: &Fabric,
    r: &Routing,
    off: u32,
    start: Slot,
    vl: u8,
    sl: u8,
    dlid: u16,
    out: &mut Vec<(u32, u8)>,
) -> std::result::Result<(), String> {
    let (mut slot, mut vl) = (start, vl);
    for _ in 0..=f.switches().len() + 1 {
        out.push((off + slot, vl));
        let rem = f.remote(slot);
        if rem == NONE {
            return Err(format!(
                "port {} of '{}' is not linked",
                f.port_of(slot),
                f.desc(f.node_of(slot))
            ));
        }
        let node = f.node_of(rem);
        match f.switch_index(node) {
            None if f.lids_of_slot(rem).contains(&dlid) => return Ok(()),
            None => {
                return Err(format!(
                    "the route to LID {dlid} ends at '{}'",
                    f.desc(node)
                ));
            }
            Some(si) => {
                let p = r.lfts.get(si, dlid);
                if p == 0 || p > f.num_ports(node) {
                    return Err(format!(
                        "switch '{}' has no route to LID {dlid}",
                        f.desc(node)
                    ));
                }
                vl = r.switch_vl(si, f.port_of(rem), p, sl);
                slot = f.slot(node, p);
            }
        }
    }
    Err(format!("the route to LID {dlid} loops"))
}

/// What a traffic model needs of a routed fabric: its hosts, its directed
/// links, and the channels (link, VL) of each host pair's path.
pub trait Paths: Sync {
    fn hosts(&self) -> &[Host];
    fn num_links(&self) -> usize;
    /// Appends the channels of the path from host `src` to host `dst`.
    fn path_channels(&self, src: usize, dst: usize, out: &mut Vec<(u32, u8)>) -> Result<()>;
}

impl Paths for Network<'_> {
    fn hosts(&self) -> &[Host] {
        Network::hosts(self)
    }
    fn num_links(&self) -> usize {
        Network::num_links(self)
    }
    fn path_channels(&self, src: usize, dst: usize, out: &mut Vec<(u32, u8)>) -> Result<()> {
        Network::path_channels(self, src, dst, out)
    }
}

/// Which of a port's LIDs a pair of hosts sends between, on a fabric with
/// LMC (with LMC 0 both are the one LID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LidChoice {
    /// Base LIDs: one path per pair of ports, as a client that asks one
    /// PathRecord per pair sends.
    #[default]
    Base,
    /// Per pair, the destination's LID at offset `source index mod 2^LMC`
    /// and the source's at offset `destination index mod 2^LMC`: the
    /// sources of one destination spread over its LIDs, as clients that
    /// open a connection per path do.
    Spread,
}

/// One routed subnet as its packets see it, without routers: link ids are
/// the sending port slots, as the verifier numbers its channels.
pub struct SubnetPaths<'a> {
    f: &'a Fabric,
    r: &'a Routing,
    hosts: Vec<Host>,
    lids: LidChoice,
}

impl<'a> SubnetPaths<'a> {
    /// Every linked CA port is a host.
    pub fn new(f: &'a Fabric, r: &'a Routing) -> Self {
        let hosts = f
            .endports()
            .iter()
            .filter(|&&e| f.kind(f.node_of(e)) == NodeKind::Ca && f.remote(e) != NONE)
            .map(|&e| Host {
                subnet: 0,
                slot: e,
                gid: Gid {
                    prefix: f.subnet_prefix,
                    guid: f.port_guid(e),
                },
                lid: f.lid_of_slot(e),
            })
            .collect();
        Self {
            f,
            r,
            hosts,
            lids: LidChoice::Base,
        }
    }

    /// The same, sending between the LIDs `lids` picks.
    pub fn with_lids(self, lids: LidChoice) -> Self {
        Self { lids, ..self }
    }
}

impl Paths for SubnetPaths<'_> {
    fn hosts(&self) -> &[Host] {
        &self.hosts
    }
    fn num_links(&self) -> usize {
        self.f.num_slots()
    }
    fn path_channels(&self, src: usize, dst: usize, out: &mut Vec<(u32, u8)>) -> Result<()> {
        let (hs, hd) = (self.hosts[src], self.hosts[dst]);
        let (slid, dlid) = match self.lids {
            LidChoice::Base => (hs.lid, hd.lid),
            // `lid_like` keeps the offset bits: the index modulo 2^LMC.
            LidChoice::Spread => (
                self.f.lid_like(hs.slot, dst as u16),
                self.f.lid_like(hd.slot, src as u16),
            ),
        };
        walk(self.f, self.r, "subnet", 0, hs.slot, slid, dlid, out)
    }
}
