//! The subnet model: nodes, ports, links and LIDs as dense integer ids in
//! flat arrays.
//!
//! A *port slot* is the global index of one (node, port number) pair; node
//! `n` owns slots `port_start[n] ..= port_start[n] + num_ports(n)`, where the
//! first one is port 0 (the switch management port; unused on CAs and
//! routers). A *channel* is a directed link and is identified by the slot it
//! leaves from, so channel ids are dense and need no table of their own.

use crate::error::ModelError;

/// Highest unicast LID of an IB subnet (0xBFFF).
pub const MAX_UNICAST_LID: u16 = 0xBFFF;
/// Marker for "no such slot / node".
pub const NONE: u32 = u32::MAX;
/// Default subnet prefix (fe80::/64).
pub const DEFAULT_SUBNET_PREFIX: u64 = 0xfe80_0000_0000_0000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum NodeKind {
    Switch,
    Ca,
    Router,
}

impl NodeKind {
    /// The node type string OpenSM prints (`ib_get_node_type_str`).
    pub fn opensm_str(self) -> &'static str {
        match self {
            NodeKind::Switch => "Switch",
            NodeKind::Ca => "Channel Adapter",
            NodeKind::Router => "Router",
        }
    }
}

/// Node index into the fabric's node arrays.
pub type NodeId = u32;
/// Global port slot index; also the id of the channel leaving that port.
pub type Slot = u32;

/// Incrementally assembles a [`Fabric`]; all checks happen in [`FabricBuilder::build`]
/// or at the call that breaks a rule, so parsers and generators share them.
#[derive(Default, Debug, Clone)]
pub struct FabricBuilder {
    kinds: Vec<NodeKind>,
    guids: Vec<u64>,
    descs: Vec<String>,
    port_start: Vec<u32>,
    remote: Vec<u32>,
    port_guid: Vec<u64>,
    lid: Vec<u16>,
    /// Per slot: the port answers to 2^LMC LIDs from its base LID.
    lmc: Vec<u8>,
    subnet_prefix: Option<u64>,
}

impl FabricBuilder {
    pub fn new() -> Self {
        Self {
            port_start: vec![0],
            ..Default::default()
        }
    }

    pub fn subnet_prefix(&mut self, prefix: u64) -> &mut Self {
        self.subnet_prefix = Some(prefix);
        self
    }

    pub fn num_nodes(&self) -> usize {
        self.kinds.len()
    }

    /// Adds a node with ports `1..=num_ports` (plus port 0). Port GUIDs follow
    /// the ibsim convention: switch ports share the node GUID, CA/router port
    /// `p` gets `guid + p`; [`FabricBuilder::set_port_guid`] overrides them.
    pub fn add_node(
        &mut self,
        kind: NodeKind,
        guid: u64,
        desc: impl Into<String>,
        num_ports: u8,
    ) -> NodeId {
        let id = self.kinds.len() as NodeId;
        self.kinds.push(kind);
        self.guids.push(guid);
        self.descs.push(desc.into());
        for p in 0..=num_ports as u64 {
            self.remote.push(NONE);
            self.port_guid.push(match kind {
                NodeKind::Switch => guid,
                _ => guid.wrapping_add(p),
            });
            self.lid.push(0);
            self.lmc.push(0);
        }
        self.port_start.push(self.remote.len() as u32);
        id
    }

    pub fn kind(&self, node: NodeId) -> NodeKind {
        self.kinds[node as usize]
    }

    pub fn num_ports(&self, node: NodeId) -> u8 {
        let n = node as usize;
        (self.port_start[n + 1] - self.port_start[n] - 1) as u8
    }

    fn slot(&self, node: NodeId, port: u8) -> Result<Slot, ModelError> {
        if node as usize >= self.kinds.len() {
            return Err(ModelError::NoSuchNode(node));
        }
        if port == 0 || port > self.num_ports(node) {
            return Err(ModelError::BadPort {
                node: self.descs[node as usize].clone(),
                port,
                num_ports: self.num_ports(node),
            });
        }
        Ok(self.port_start[node as usize] + port as u32)
    }

    /// Links `a:pa` with `b:pb`. Relinking the same pair is accepted (files
    /// list every link from both ends); anything else on a used port is an error.
    pub fn connect(&mut self, a: NodeId, pa: u8, b: NodeId, pb: u8) -> Result<(), ModelError> {
        let sa = self.slot(a, pa)?;
        let sb = self.slot(b, pb)?;
        if sa == sb {
            return Err(ModelError::SelfLink(self.descs[a as usize].clone(), pa));
        }
        for (s, other, node, port) in [(sa, sb, a, pa), (sb, sa, b, pb)] {
            let cur = self.remote[s as usize];
            if cur != NONE && cur != other {
                return Err(ModelError::PortInUse {
                    node: self.descs[node as usize].clone(),
                    port,
                });
            }
        }
        self.remote[sa as usize] = sb;
        self.remote[sb as usize] = sa;
        Ok(())
    }

    pub fn set_port_guid(&mut self, node: NodeId, port: u8, guid: u64) -> Result<(), ModelError> {
        let s = self.slot(node, port)?;
        self.port_guid[s as usize] = guid;
        Ok(())
    }

    /// The slot that holds a port's addressing: a switch's port 0 whatever
    /// `port` says (a switch has one LID), else the port's own.
    fn addressed_slot(&self, node: NodeId, port: u8) -> Result<u32, ModelError> {
        match self.kinds.get(node as usize) {
            Some(NodeKind::Switch) => Ok(self.port_start[node as usize]),
            _ => self.slot(node, port),
        }
    }

    /// Sets the LID of a CA/router port, or of a switch (any `port`; switches
    /// have one LID, on port 0).
    pub fn set_lid(&mut self, node: NodeId, port: u8, lid: u16) -> Result<(), ModelError> {
        if lid > MAX_UNICAST_LID {
            return Err(ModelError::LidOutOfRange(lid));
        }
        let s = self.addressed_slot(node, port)?;
        self.lid[s as usize] = lid;
        Ok(())
    }

    /// Sets the LMC of a port (of a switch: its port 0): it answers to the
    /// 2^LMC LIDs from its base LID, which must be a multiple of 2^LMC.
    pub fn set_lmc(&mut self, node: NodeId, port: u8, lmc: u8) -> Result<(), ModelError> {
        if lmc > 7 {
            return Err(ModelError::LmcOutOfRange(lmc));
        }
        let s = self.addressed_slot(node, port)?;
        self.lmc[s as usize] = lmc;
        Ok(())
    }

    /// The slots that get a LID: a switch's port 0, a CA's or router's
    /// connected ports.
    fn addressable(&self, node: usize) -> Vec<usize> {
        let start = self.port_start[node] as usize;
        let end = self.port_start[node + 1] as usize;
        if self.kinds[node] == NodeKind::Switch {
            vec![start]
        } else {
            (start + 1..end)
                .filter(|&s| self.remote[s] != NONE)
                .collect()
        }
    }

    /// The ports that get a LID, with the GUID each answers to: port 0
    /// for a switch (its node GUID), the connected ports of a CA or router.
    pub fn addressable_ports(&self, node: NodeId) -> Vec<(u8, u64)> {
        let n = node as usize;
        self.addressable(n)
            .into_iter()
            .map(|s| {
                (
                    (s - self.port_start[n] as usize) as u8,
                    self.port_guid_of(n, s),
                )
            })
            .collect()
    }

    /// A switch answers to its node GUID on every port.
    fn port_guid_of(&self, node: usize, slot: usize) -> u64 {
        if self.kinds[node] == NodeKind::Switch {
            self.guids[node]
        } else {
            self.port_guid[slot]
        }
    }

    fn port_name(&self, node: usize, slot: usize) -> String {
        if self.kinds[node] == NodeKind::Switch {
            format!("switch '{}'", self.descs[node])
        } else {
            format!(
                "'{}' port {}",
                self.descs[node],
                slot - self.port_start[node] as usize
            )
        }
    }

    /// Finishes the model: checks node GUID, port GUID and LID uniqueness
    /// and assigns LIDs to every addressable port that has none.
    ///
    /// LID assignment (documented behaviour): LIDs given in the input are
    /// kept. The remaining addressable ports (each switch's port 0, each
    /// connected CA/router port) get the lowest free LIDs from 1 upward, in
    /// node order (the order the input lists nodes), ports in ascending order.
    pub fn build(mut self) -> Result<Fabric, ModelError> {
        let n = self.kinds.len();
        let mut seen = std::collections::HashMap::with_capacity(n);
        for (i, &g) in self.guids.iter().enumerate() {
            if let Some(prev) = seen.insert(g, i) {
                return Err(ModelError::DuplicateGuid {
                    guid: g,
                    first: self.descs[prev].clone(),
                    second: self.descs[i].clone(),
                });
            }
        }
        // Readers key LFT rows and SL-to-VL blocks by port GUID: two
        // addressable ports with one GUID would get each other's tables.
        let mut port_seen = std::collections::HashMap::with_capacity(n * 2);
        for node in 0..n {
            for s in self.addressable(node) {
                let g = self.port_guid_of(node, s);
                if let Some(prev) = port_seen.insert(g, (node, s)) {
                    return Err(ModelError::DuplicatePortGuid {
                        guid: g,
                        first: self.port_name(prev.0, prev.1),
                        second: self.port_name(node, s),
                    });
                }
            }
        }
        let mut used = vec![false; MAX_UNICAST_LID as usize + 1];
        let mut owner = vec![NONE; MAX_UNICAST_LID as usize + 1];
        for (s, &l) in self.lid.iter().enumerate() {
            if l == 0 {
                continue;
            }
            let lmc = self.lmc[s];
            let count = 1usize << lmc;
            if !(l as usize).is_multiple_of(count) {
                return Err(ModelError::LidNotAligned { lid: l, lmc });
            }
            for x in l as usize..l as usize + count {
                if x > MAX_UNICAST_LID as usize {
                    return Err(ModelError::LidOutOfRange(x.min(u16::MAX as usize) as u16));
                }
                if used[x] {
                    return Err(ModelError::DuplicateLid(x as u16));
                }
                used[x] = true;
                owner[x] = s as u32;
            }
        }
        // Ports without a LID get the first free range of their 2^LMC,
        // aligned as the base LID must be.
        let mut next = 1usize;
        for node in 0..n {
            for s in self.addressable(node) {
                if self.lid[s] != 0 {
                    continue;
                }
                let count = 1usize << self.lmc[s];
                let mut at = next.next_multiple_of(count);
                while at + count - 1 <= MAX_UNICAST_LID as usize
                    && used[at..at + count].iter().any(|&u| u)
                {
                    at += count;
                }
                if at + count - 1 > MAX_UNICAST_LID as usize {
                    return Err(ModelError::OutOfLids);
                }
                for x in at..at + count {
                    used[x] = true;
                    owner[x] = s as u32;
                }
                self.lid[s] = at as u16;
                while next <= MAX_UNICAST_LID as usize && used[next] {
                    next += 1;
                }
            }
        }
        let max_lid = (1..=MAX_UNICAST_LID as usize)
            .rev()
            .find(|&l| used[l])
            .unwrap_or(0) as u16;
        owner.truncate(max_lid as usize + 1);

        let total_slots = self.remote.len();
        let mut node_of_slot = vec![0u32; total_slots];
        for node in 0..n {
            for s in self.port_start[node]..self.port_start[node + 1] {
                node_of_slot[s as usize] = node as u32;
            }
        }
        let mut switch_index = vec![NONE; n];
        let mut switches = Vec::new();
        for (i, k) in self.kinds.iter().enumerate() {
            if *k == NodeKind::Switch {
                switch_index[i] = switches.len() as u32;
                switches.push(i as NodeId);
            }
        }
        let mut endports = Vec::new();
        for node in 0..n {
            if self.kinds[node] == NodeKind::Switch {
                continue;
            }
            for s in self.port_start[node] + 1..self.port_start[node + 1] {
                if self.remote[s as usize] != NONE {
                    endports.push(s);
                }
            }
        }
        // Nodes by GUID (stable: the first of equal GUIDs first), for
        // lookups by GUID in readers that name a node per line or entry.
        let mut by_guid: Vec<NodeId> = (0..n as NodeId).collect();
        by_guid.sort_by_key(|&i| self.guids[i as usize]);
        let end_lids = lids_of_ports(&endports, &self.lid, &self.lmc);
        Ok(Fabric {
            subnet_prefix: self.subnet_prefix.unwrap_or(DEFAULT_SUBNET_PREFIX),
            by_guid,
            kinds: self.kinds,
            guids: self.guids,
            descs: self.descs,
            port_start: self.port_start,
            remote: self.remote,
            port_guid: self.port_guid,
            max_lmc: self.lmc.iter().copied().max().unwrap_or(0),
            lid: self.lid,
            lmc: self.lmc,
            node_of_slot,
            lid_owner: owner,
            max_lid,
            switches,
            switch_index,
            endports,
            end_lids,
        })
    }
}

/// Every LID of each of `ports`, port by port, each port's ascending.
fn lids_of_ports(ports: &[Slot], lid: &[u16], lmc: &[u8]) -> Vec<(Slot, u16)> {
    ports
        .iter()
        .flat_map(|&e| {
            let base = lid[e as usize];
            (0..1u16 << lmc[e as usize]).map(move |k| (e, base + k))
        })
        .collect()
}

/// An immutable subnet. Cheap to share between threads.
#[derive(Debug, Clone)]
pub struct Fabric {
    pub subnet_prefix: u64,
    kinds: Vec<NodeKind>,
    guids: Vec<u64>,
    descs: Vec<String>,
    port_start: Vec<u32>,
    remote: Vec<u32>,
    port_guid: Vec<u64>,
    lid: Vec<u16>,
    lmc: Vec<u8>,
    max_lmc: u8,
    node_of_slot: Vec<u32>,
    lid_owner: Vec<u32>,
    max_lid: u16,
    switches: Vec<NodeId>,
    switch_index: Vec<u32>,
    endports: Vec<Slot>,
    /// Every LID of every end port, port by port (in `endports` order),
    /// each port's LIDs ascending: the destinations of traffic.
    end_lids: Vec<(Slot, u16)>,
    /// Node ids in ascending GUID order.
    by_guid: Vec<NodeId>,
}

impl Fabric {
    pub fn num_nodes(&self) -> usize {
        self.kinds.len()
    }
    pub fn num_slots(&self) -> usize {
        self.remote.len()
    }
    pub fn kind(&self, n: NodeId) -> NodeKind {
        self.kinds[n as usize]
    }
    pub fn guid(&self, n: NodeId) -> u64 {
        self.guids[n as usize]
    }
    pub fn desc(&self, n: NodeId) -> &str {
        &self.descs[n as usize]
    }
    pub fn num_ports(&self, n: NodeId) -> u8 {
        (self.port_start[n as usize + 1] - self.port_start[n as usize] - 1) as u8
    }
    /// Slot of `port` on `node` (port 0 included). Callers pass ports they
    /// got from the model, so an out-of-range port is a programming error.
    pub fn slot(&self, n: NodeId, port: u8) -> Slot {
        debug_assert!(port <= self.num_ports(n));
        self.port_start[n as usize] + port as u32
    }
    pub fn node_of(&self, s: Slot) -> NodeId {
        self.node_of_slot[s as usize]
    }
    pub fn port_of(&self, s: Slot) -> u8 {
        (s - self.port_start[self.node_of_slot[s as usize] as usize]) as u8
    }
    /// The slot at the other end of the link, or [`NONE`].
    pub fn remote(&self, s: Slot) -> Slot {
        self.remote[s as usize]
    }
    pub fn port_guid(&self, s: Slot) -> u64 {
        self.port_guid[s as usize]
    }
    /// LID of a slot's port: CA/router ports have their own, switch ports all
    /// answer with the switch's LID.
    pub fn lid_of_slot(&self, s: Slot) -> u16 {
        self.lid[self.addressed(s)]
    }
    /// The slot holding a port's LID and LMC: a switch's port 0 for any
    /// of its ports, else the port's own.
    fn addressed(&self, s: Slot) -> usize {
        let n = self.node_of(s);
        if self.kinds[n as usize] == NodeKind::Switch {
            self.port_start[n as usize] as usize
        } else {
            s as usize
        }
    }
    /// A port's LMC (a switch port: its port 0's): it answers to the
    /// 2^LMC LIDs from [`Self::lid_of_slot`] ([`Self::lids_of_slot`]).
    /// Only readers that count every LID keep LMC > 0
    /// (`ibnetdiscover::parse_with_lmc`).
    pub fn lmc(&self, s: Slot) -> u8 {
        self.lmc[self.addressed(s)]
    }
    /// The largest LMC of any port.
    pub fn max_lmc(&self) -> u8 {
        self.max_lmc
    }
    /// The LIDs a port answers to: its base LID and the 2^LMC - 1 after it.
    pub fn lids_of_slot(&self, s: Slot) -> std::ops::Range<u16> {
        let base = self.lid_of_slot(s);
        base..base + (1u16 << self.lmc(s))
    }
    /// The LID of port `s` at the offset `lid` has in an aligned range of
    /// the port's 2^LMC: where a file's LID lands when the file names its
    /// port by GUID and the port's LIDs may have moved since.
    pub fn lid_like(&self, s: Slot, lid: u16) -> u16 {
        self.lid_of_slot(s) + (lid & ((1u16 << self.lmc(s)) - 1))
    }
    /// Every LID of every connected end port, with the port: the
    /// destinations the verifier walks toward (with LMC 0, one per port,
    /// in [`Self::endports`] order).
    pub fn end_lids(&self) -> &[(Slot, u16)] {
        &self.end_lids
    }
    pub fn switch_lid(&self, n: NodeId) -> u16 {
        self.lid[self.port_start[n as usize] as usize]
    }
    pub fn max_lid(&self) -> u16 {
        self.max_lid
    }
    /// The slot a LID addresses (a switch's port 0 or a CA/router port).
    pub fn lid_owner(&self, lid: u16) -> Option<Slot> {
        match self.lid_owner.get(lid as usize) {
            Some(&s) if s != NONE => Some(s),
            _ => None,
        }
    }
    pub fn switches(&self) -> &[NodeId] {
        &self.switches
    }
    /// Dense switch index of a node, if it is a switch.
    pub fn switch_index(&self, n: NodeId) -> Option<u32> {
        match self.switch_index[n as usize] {
            NONE => None,
            i => Some(i),
        }
    }
    /// Connected CA and router ports: the sources and destinations of traffic.
    pub fn endports(&self) -> &[Slot] {
        &self.endports
    }
    pub fn num_cas(&self) -> usize {
        self.kinds.iter().filter(|k| **k == NodeKind::Ca).count()
    }
    pub fn num_routers(&self) -> usize {
        self.kinds
            .iter()
            .filter(|k| **k == NodeKind::Router)
            .count()
    }
    /// Ports 1..=n of node `n` as slots.
    pub fn port_slots(&self, n: NodeId) -> std::ops::Range<Slot> {
        self.port_start[n as usize] + 1..self.port_start[n as usize + 1]
    }
    /// Number of links (each counted once).
    pub fn num_links(&self) -> usize {
        self.remote
            .iter()
            .enumerate()
            .filter(|&(s, &r)| r != NONE && (s as u32) < r)
            .count()
    }
    /// The slot an LFT entry `port` of node `n` forwards by: a real port
    /// (1..=num_ports, not the no-path value) with a link. `None` is where
    /// a walk ends.
    pub fn linked_port(&self, n: NodeId, port: u8) -> Option<Slot> {
        if port == 0 || port == crate::tables::NO_PATH || port > self.num_ports(n) {
            return None;
        }
        let s = self.slot(n, port);
        (self.remote(s) != NONE).then_some(s)
    }
    /// Links between two switches that are up, one slot (the lower) each.
    pub fn switch_links(&self) -> Vec<Slot> {
        self.switches
            .iter()
            .flat_map(|&sw| self.port_slots(sw))
            .filter(|&s| {
                let r = self.remote(s);
                r != NONE && s < r && self.kind(self.node_of(r)) == NodeKind::Switch
            })
            .collect()
    }

    /// This fabric with the links at `slots` (either end) down: nodes,
    /// ports, GUIDs, LIDs and switch indices stay as they are, so tables
    /// computed for this fabric index the result the same way. An end port
    /// that loses its link is no longer an end port.
    pub fn without_links(&self, slots: &[Slot]) -> Fabric {
        let mut f = self.clone();
        for &s in slots {
            if let Some(&r) = f.remote.get(s as usize) {
                if r != NONE {
                    f.remote[r as usize] = NONE;
                }
                f.remote[s as usize] = NONE;
            }
        }
        f.endports.retain(|&e| f.remote[e as usize] != NONE);
        f.end_lids = lids_of_ports(&f.endports, &f.lid, &f.lmc);
        f
    }
    /// This fabric with the links `(a, b)` up (slots of two ports without a
    /// link, as [`Fabric::without_links`] leaves them); end ports that
    /// regain a link are end ports again.
    pub fn with_links(&self, links: &[(Slot, Slot)]) -> Result<Fabric, ModelError> {
        let mut f = self.clone();
        for &(a, b) in links {
            let ok = |s: Slot| (s as usize) < f.remote.len() && f.remote[s as usize] == NONE;
            if let Some(&bad) = [a, b].iter().find(|&&s| a == b || !ok(s)) {
                let (node, port) = if (bad as usize) < f.remote.len() {
                    (f.descs[f.node_of(bad) as usize].clone(), f.port_of(bad))
                } else {
                    (format!("slot {bad}"), 0)
                };
                return Err(ModelError::PortInUse { node, port });
            }
            f.remote[a as usize] = b;
            f.remote[b as usize] = a;
        }
        f.endports = (0..f.num_nodes() as NodeId)
            .filter(|&n| f.kind(n) != NodeKind::Switch)
            .flat_map(|n| f.port_slots(n))
            .filter(|&s| f.remote[s as usize] != NONE)
            .collect();
        f.end_lids = lids_of_ports(&f.endports, &f.lid, &f.lmc);
        Ok(f)
    }
    pub fn find_node_by_guid(&self, guid: u64) -> Option<NodeId> {
        // A binary search: readers look up a node per line (an LFT dump's
        // switch blocks, an audit's entries), a scan per lookup was
        // quadratic at the LID limit.
        let at = self
            .by_guid
            .partition_point(|&n| self.guids[n as usize] < guid);
        self.by_guid
            .get(at)
            .copied()
            .filter(|&n| self.guids[n as usize] == guid)
    }
    /// Map from port GUID to slot for every addressable port (switch port 0
    /// and connected CA/router ports); used by readers that key entries by
    /// port GUID. [`FabricBuilder::build`] made these GUIDs unique, so no
    /// port shadows another; unconnected ports have no LID and no tables.
    pub fn port_guid_index(&self) -> std::collections::HashMap<u64, Slot> {
        let mut m = std::collections::HashMap::with_capacity(self.num_nodes() * 2);
        for n in 0..self.num_nodes() as NodeId {
            if self.kind(n) == NodeKind::Switch {
                m.insert(self.guid(n), self.slot(n, 0));
            } else {
                for s in self.port_slots(n).filter(|&s| self.remote(s) != NONE) {
                    m.insert(self.port_guid(s), s);
                }
            }
        }
        m
    }
}
