//! A subnet's dependency summary built from its tables and the CDG of its
//! CA-to-CA walks: the walks between router ports and CAs and between
//! router ports, as chains of vertices (router links per VL, and the
//! switch-to-switch channels they cross), and the CDG's paths between
//! those vertices as direct edges.

use super::*;

/// A channel on a walk: slot << 4 | VL.
type Packed = u32;

fn pack(s: Slot, vl: u8) -> Packed {
    s << 4 | vl as u32 & 15
}

fn unpack(x: Packed) -> (Slot, u8) {
    (x >> 4, (x & 15) as u8)
}

/// One port's walks: its distinct chains (as packed channels) and per CA
/// the index of its chain among them.
struct PortWalks {
    arrive: (Vec<Vec<Packed>>, Vec<u32>),
    depart: (Vec<Vec<Packed>>, Vec<u32>),
}

/// Builds the summary of a subnet from its tables and the CDG of its
/// CA-to-CA walks.
pub(crate) fn build(
    f: &Fabric,
    r: &Routing,
    local: &LocalCdg,
) -> Result<DependencySummary, SummaryError> {
    let (hosts, slots) = ends(f)?;
    let np = slots.len();
    let walker = Walker { f, r };
    let walks: Vec<PortWalks> = slots
        .par_iter()
        .map(|&p| walker.port_walks(p, &hosts))
        .collect::<Result<_, _>>()?;
    let legs: Vec<Result<Vec<Packed>, String>> = (0..np * np)
        .into_par_iter()
        .map(|i| {
            let (a, b) = (slots[i / np], slots[i % np]);
            let mut ch = Vec::new();
            walker
                .walk(a, f.lid_of_slot(a), f.lid_of_slot(b), &mut ch)
                .map(|()| ch.iter().map(|&(s, v)| pack(s, v)).collect())
        })
        .collect();
    let vs = Vertices::new(f, local, &walks, &legs, np)?;
    let (ports, chains) = vs.ports(f, &slots, walks)?;
    let legs = legs
        .into_iter()
        .enumerate()
        .map(|(i, leg)| {
            let (a, b) = (i / np, i % np);
            Leg {
                from: a as u32,
                to: b as u32,
                path: leg.map(|c| {
                    let n = c.len() - 1;
                    let mut v: Chain = vec![vs.enter_id[a][unpack(c[0]).1 as usize]];
                    v.extend(c[1..n].iter().map(|x| vs.mid(x)));
                    v.push(vs.leave_id[b][unpack(c[n]).1 as usize]);
                    v
                }),
            }
        })
        .collect();
    let mut edges = direct_edges(local, &vs.key)?;
    edges.sort_unstable();
    if edges.len() > MAX_EDGES {
        return Err(SummaryError::TooBig {
            what: "edges",
            count: edges.len(),
            bound: MAX_EDGES,
        });
    }
    Ok(DependencySummary {
        host_lids: hosts.iter().map(|h| h.0).collect(),
        ports,
        channels: vs.channels,
        vertices: vs.vertices,
        edges,
        chains,
        legs,
    })
}

/// A CA: its LID and slot.
type Host = (u16, Slot);

/// The subnet's CAs by LID, and its router ports on a switch in (router
/// GUID, port) order. A router port linked straight to a CA or another
/// router leaves every other CA unreachable, which the gate refuses.
fn ends(f: &Fabric) -> Result<(Vec<Host>, Vec<Slot>), SummaryError> {
    if f.max_lmc() > 0 {
        return Err(SummaryError::Lmc(f.max_lmc()));
    }
    let mut hosts: Vec<Host> = f
        .endports()
        .iter()
        .filter(|&&e| f.kind(f.node_of(e)) == NodeKind::Ca && f.remote(e) != NONE)
        .map(|&e| (f.lid_of_slot(e), e))
        .collect();
    hosts.sort_unstable();
    let mut slots: Vec<Slot> = f
        .endports()
        .iter()
        .copied()
        .filter(|&e| {
            f.kind(f.node_of(e)) == NodeKind::Router
                && f.remote(e) != NONE
                && f.switch_index(f.node_of(f.remote(e))).is_some()
        })
        .collect();
    slots.sort_by_key(|&s| (f.guid(f.node_of(s)), f.port_of(s)));
    if slots.is_empty() {
        return Err(SummaryError::NoRouterPorts);
    }
    if slots.len() > MAX_PORTS {
        return Err(SummaryError::TooBig {
            what: "router ports",
            count: slots.len(),
            bound: MAX_PORTS,
        });
    }
    Ok((hosts, slots))
}

/// A walk's channels within the summary's bounds: not too long, no
/// management VL.
fn check_walk(f: &Fabric, c: &[Packed]) -> Result<(), SummaryError> {
    if c.len() > MAX_CHAIN_LEN {
        return Err(SummaryError::TooBig {
            what: "channels on one walk",
            count: c.len(),
            bound: MAX_CHAIN_LEN,
        });
    }
    for &x in c {
        let (s, vl) = unpack(x);
        if vl > MAX_DATA_VL {
            return Err(SummaryError::ManagementVl {
                vl,
                at: describe(f, s),
            });
        }
    }
    Ok(())
}

/// The summary's vertices: the router links per VL (entering and
/// leaving), then the switch-to-switch channels on the walks.
struct Vertices {
    vertices: Vec<Vertex>,
    enter_id: Vec<[u32; 16]>,
    leave_id: Vec<[u32; 16]>,
    channels: Vec<String>,
    /// Packed channel -> vertex.
    inner_id: HashMap<Packed, u32>,
    /// CDG vertex -> vertex.
    key: HashMap<u32, u32>,
}

impl Vertices {
    fn new(
        f: &Fabric,
        local: &LocalCdg,
        walks: &[PortWalks],
        legs: &[Result<Vec<Packed>, String>],
        np: usize,
    ) -> Result<Self, SummaryError> {
        let mut enter = vec![0u16; np];
        let mut leave = vec![0u16; np];
        let mut inner: Vec<Packed> = Vec::new();
        for (i, w) in walks.iter().enumerate() {
            for c in &w.arrive.0 {
                check_walk(f, c)?;
                leave[i] |= 1 << unpack(c[c.len() - 1]).1;
                inner.extend_from_slice(&c[..c.len() - 1]);
            }
            for c in &w.depart.0 {
                check_walk(f, c)?;
                enter[i] |= 1 << unpack(c[0]).1;
                inner.extend_from_slice(&c[1..]);
            }
        }
        for (i, leg) in legs.iter().enumerate() {
            let Ok(c) = leg else { continue };
            check_walk(f, c)?;
            enter[i / np] |= 1 << unpack(c[0]).1;
            leave[i % np] |= 1 << unpack(c[c.len() - 1]).1;
            inner.extend_from_slice(&c[1..c.len() - 1]);
        }
        inner.sort_unstable();
        inner.dedup();
        let mut vertices = Vec::new();
        let mut enter_id = vec![[u32::MAX; 16]; np];
        let mut leave_id = vec![[u32::MAX; 16]; np];
        for i in 0..np {
            for vl in 0..16u8 {
                if enter[i] & 1 << vl != 0 {
                    enter_id[i][vl as usize] = vertices.len() as u32;
                    vertices.push(Vertex::Enter { port: i as u32, vl });
                }
                if leave[i] & 1 << vl != 0 {
                    leave_id[i][vl as usize] = vertices.len() as u32;
                    vertices.push(Vertex::Leave { port: i as u32, vl });
                }
            }
        }
        let mut channels = Vec::new();
        let mut channel_of: HashMap<Slot, u32> = HashMap::new();
        let mut inner_id: HashMap<Packed, u32> = HashMap::with_capacity(inner.len());
        let mut key: HashMap<u32, u32> = HashMap::with_capacity(inner.len());
        for &x in &inner {
            let (s, vl) = unpack(x);
            let c = *channel_of.entry(s).or_insert_with(|| {
                channels.push(describe(f, s));
                (channels.len() - 1) as u32
            });
            let id = vertices.len() as u32;
            inner_id.insert(x, id);
            if (vl as usize) < local.vls {
                key.insert((s as usize * local.vls + vl as usize) as u32, id);
            }
            vertices.push(Vertex::Inner { channel: c, vl });
        }
        if vertices.len() > MAX_VERTICES {
            return Err(SummaryError::TooBig {
                what: "vertices",
                count: vertices.len(),
                bound: MAX_VERTICES,
            });
        }
        Ok(Self {
            vertices,
            enter_id,
            leave_id,
            channels,
            inner_id,
            key,
        })
    }

    fn mid(&self, x: &Packed) -> u32 {
        self.inner_id.get(x).copied().unwrap_or(u32::MAX)
    }

    /// The router ports with their walks as chains of vertex ids, the
    /// chains shared between ports.
    fn ports(
        &self,
        f: &Fabric,
        slots: &[Slot],
        walks: Vec<PortWalks>,
    ) -> Result<(Vec<SummaryPort>, Vec<Chain>), SummaryError> {
        let mut chains: Vec<Chain> = Vec::new();
        let mut chain_of: HashMap<Chain, u32> = HashMap::new();
        let mut intern = |c: Chain| -> u32 {
            *chain_of.entry(c).or_insert_with_key(|c| {
                chains.push(c.clone());
                (chains.len() - 1) as u32
            })
        };
        let mut ports = Vec::with_capacity(slots.len());
        for (i, w) in walks.into_iter().enumerate() {
            let arrive: Vec<u32> = w
                .arrive
                .0
                .iter()
                .map(|c| {
                    let n = c.len() - 1;
                    let mut v: Chain = c[..n].iter().map(|x| self.mid(x)).collect();
                    v.push(self.leave_id[i][unpack(c[n]).1 as usize]);
                    intern(v)
                })
                .collect();
            let depart: Vec<u32> = w
                .depart
                .0
                .iter()
                .map(|c| {
                    let mut v: Chain = vec![self.enter_id[i][unpack(c[0]).1 as usize]];
                    v.extend(c[1..].iter().map(|x| self.mid(x)));
                    intern(v)
                })
                .collect();
            let p = slots[i];
            let column = |(_, k): &(Vec<Vec<Packed>>, Vec<u32>), ids: &[u32]| {
                Runs::from_column(&k.iter().map(|&k| ids[k as usize]).collect::<Vec<_>>())
            };
            ports.push(SummaryPort {
                router_guid: f.guid(f.node_of(p)),
                port: f.port_of(p),
                lid: f.lid_of_slot(p),
                arrive: column(&w.arrive, &arrive),
                depart: column(&w.depart, &depart),
            });
        }
        if chains.len() > MAX_CHAINS {
            return Err(SummaryError::TooBig {
                what: "chains",
                count: chains.len(),
                bound: MAX_CHAINS,
            });
        }
        Ok((ports, chains))
    }
}

fn describe(f: &Fabric, s: Slot) -> String {
    let r = f.remote(s);
    let to = if r == NONE {
        "?".to_string()
    } else {
        format!("'{}' port {}", f.desc(f.node_of(r)), f.port_of(r))
    };
    let mut name = format!("'{}' port {} -> {to}", f.desc(f.node_of(s)), f.port_of(s));
    if name.len() > MAX_NAME {
        let mut cut = MAX_NAME;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
    }
    name
}

/// The summary edges: from every `Inner` vertex (the only ones with
/// CA-to-CA dependencies), the vertices its paths in the CA-to-CA CDG
/// reach first. Each CDG vertex's set of first vertices is computed once
/// (depth first, memoized), so shared route tails cost once.
fn direct_edges(
    local: &LocalCdg,
    key: &HashMap<u32, u32>,
) -> Result<Vec<(u32, u32)>, SummaryError> {
    let n = local.start.len().saturating_sub(1);
    let mut fs = FirstSets {
        local,
        key,
        set_of: vec![UNSEEN; n],
        sets: vec![Vec::new()],
        stack: Vec::new(),
        acc: Vec::new(),
    };
    let mut edges = Vec::new();
    let mut roots: Vec<(u32, u32)> = key.iter().map(|(&u, &id)| (u, id)).collect();
    roots.sort_unstable();
    for (u, from) in roots {
        let u = u as usize;
        if u >= n {
            continue;
        }
        // Every successor outside the summary gets its set first.
        for i in 0..fs.succ(u).len() {
            let s = fs.succ(u)[i] as usize;
            if !key.contains_key(&(s as u32)) && fs.set_of[s] == UNSEEN {
                fs.fill(s)?;
            }
        }
        fs.first_of(u);
        edges.extend(fs.acc.iter().map(|&to| (from, to)));
    }
    Ok(edges)
}

const UNSEEN: u32 = u32::MAX;
const ACTIVE: u32 = u32::MAX - 1;

/// The memo of [`direct_edges`]: per CDG vertex, its set of first summary
/// vertices in `sets` (or [`UNSEEN`] / [`ACTIVE`]).
struct FirstSets<'a> {
    local: &'a LocalCdg,
    key: &'a HashMap<u32, u32>,
    set_of: Vec<u32>,
    sets: Vec<Vec<u32>>,
    stack: Vec<(usize, usize)>,
    acc: Vec<u32>,
}

impl FirstSets<'_> {
    fn succ(&self, u: usize) -> &[u32] {
        &self.local.adj[self.local.start[u] as usize..self.local.start[u + 1] as usize]
    }

    /// The first summary vertices after `u`, into `acc` (sorted, unique),
    /// from its successors' sets.
    fn first_of(&mut self, u: usize) {
        let mut acc = std::mem::take(&mut self.acc);
        acc.clear();
        for &s in self.succ(u) {
            match self.key.get(&s) {
                Some(&id) => acc.push(id),
                None => acc.extend_from_slice(&self.sets[self.set_of[s as usize] as usize]),
            }
        }
        acc.sort_unstable();
        acc.dedup();
        self.acc = acc;
    }

    /// Gives `s` and every vertex outside the summary after it its set,
    /// depth first; a cycle among them is refused.
    fn fill(&mut self, s: usize) -> Result<(), SummaryError> {
        self.set_of[s] = ACTIVE;
        self.stack.push((s, 0));
        while let Some(&(x, i)) = self.stack.last() {
            let len = self.succ(x).len();
            if i < len {
                if let Some(top) = self.stack.last_mut() {
                    top.1 += 1;
                }
                let y = self.succ(x)[i] as usize;
                if self.key.contains_key(&(y as u32)) {
                    continue;
                }
                match self.set_of[y] {
                    UNSEEN => {
                        self.set_of[y] = ACTIVE;
                        self.stack.push((y, 0));
                    }
                    ACTIVE => return Err(SummaryError::Cyclic),
                    _ => {}
                }
            } else {
                self.stack.pop();
                self.set_of[x] = self.set_for(x);
            }
        }
        Ok(())
    }

    /// The set of `x`, whose successors all have theirs: one successor
    /// outside the summary shares its set.
    fn set_for(&mut self, x: usize) -> u32 {
        if let [y] = self.succ(x) {
            if !self.key.contains_key(y) {
                return self.set_of[*y as usize];
            }
        }
        self.first_of(x);
        if self.acc.is_empty() {
            0
        } else {
            self.sets.push(std::mem::take(&mut self.acc));
            (self.sets.len() - 1) as u32
        }
    }
}

/// Walks routes through one subnet's tables, as the whole-fabric check's
/// network does (`crate::network`): the pair's SL, the first VL from the
/// sending port's SL-to-VL row, then per switch the LFT and SL-to-VL.
struct Walker<'a> {
    f: &'a Fabric,
    r: &'a Routing,
}

impl Walker<'_> {
    fn sl(&self, slid: u16, dlid: u16) -> u8 {
        self.r.path_sl.as_ref().map_or(0, |p| p.get(slid, dlid))
    }

    /// Appends the channels (slot, VL) from `start` to the end port `dlid`.
    fn walk(
        &self,
        start: Slot,
        slid: u16,
        dlid: u16,
        out: &mut Vec<(Slot, u8)>,
    ) -> Result<(), String> {
        let sl = self.sl(slid, dlid);
        if sl == SL_NONE || sl as usize >= NUM_SLS {
            return Err(format!("no SL for LID {slid} -> {dlid}"));
        }
        let vl = self.r.port_vl(start, sl);
        self.walk_on(start, vl, sl, dlid, out)
    }

    fn walk_on(
        &self,
        start: Slot,
        vl: u8,
        sl: u8,
        dlid: u16,
        out: &mut Vec<(Slot, u8)>,
    ) -> Result<(), String> {
        crate::network::walk_channels(self.f, self.r, 0, start, vl, sl, dlid, out)
    }

    /// Router port `p`'s walks from and to every CA, deduplicated: CAs
    /// behind one switch that agree on SL and first VL share the rest of
    /// their walk to `p`.
    fn port_walks(&self, p: Slot, hosts: &[(u16, Slot)]) -> Result<PortWalks, SummaryError> {
        let f = self.f;
        let plid = f.lid_of_slot(p);
        let mut arrive: (Vec<Vec<Packed>>, Vec<u32>) =
            (Vec::new(), Vec::with_capacity(hosts.len()));
        let mut depart: (Vec<Vec<Packed>>, Vec<u32>) =
            (Vec::new(), Vec::with_capacity(hosts.len()));
        let mut seen_arrive: HashMap<Vec<Packed>, u32> = HashMap::new();
        let mut seen_depart: HashMap<Vec<Packed>, u32> = HashMap::new();
        // (switch, SL, VL leaving it) -> chain of the walk to `p`.
        let mut memo: HashMap<(u32, u8, u8), u32> = HashMap::new();
        let mut ch = Vec::new();
        let mut buf: Vec<Packed> = Vec::new();
        // Looked up by slice: a chain is allocated only when it is new.
        let intern =
            |seen: &mut HashMap<Vec<Packed>, u32>, list: &mut Vec<Vec<Packed>>, c: &[Packed]| {
                if let Some(&id) = seen.get(c) {
                    return id;
                }
                let id = list.len() as u32;
                list.push(c.to_vec());
                seen.insert(c.to_vec(), id);
                id
            };
        for &(hlid, h) in hosts {
            // From the port to the CA: the CA's own link depends on nothing.
            ch.clear();
            self.walk(p, plid, hlid, &mut ch)
                .map_err(|why| SummaryError::Unrouted {
                    src: plid,
                    dst: hlid,
                    why,
                })?;
            buf.clear();
            buf.extend(ch[..ch.len() - 1].iter().map(|&(s, v)| pack(s, v)));
            let id = intern(&mut seen_depart, &mut depart.0, &buf);
            depart.1.push(id);

            // From the CA to the port, from the channel leaving its switch.
            let unrouted = |why: String| SummaryError::Unrouted {
                src: hlid,
                dst: plid,
                why,
            };
            let sl = self.sl(hlid, plid);
            if sl == SL_NONE || sl as usize >= NUM_SLS {
                return Err(unrouted("no SL".into()));
            }
            let rem = f.remote(h);
            let node = f.node_of(rem);
            let Some(si) = f.switch_index(node) else {
                return Err(unrouted(format!("'{}' is no switch", f.desc(node))));
            };
            let out = self.r.lfts.get(si, plid);
            if out == 0 || out > f.num_ports(node) {
                return Err(unrouted(format!("switch '{}' has no route", f.desc(node))));
            }
            let vo = self.r.switch_vl(si, f.port_of(rem), out, sl);
            let id = match memo.get(&(si, sl, vo)) {
                Some(&id) => id,
                None => {
                    ch.clear();
                    self.walk_on(f.slot(node, out), vo, sl, plid, &mut ch)
                        .map_err(unrouted)?;
                    buf.clear();
                    buf.extend(ch.iter().map(|&(s, v)| pack(s, v)));
                    let id = intern(&mut seen_arrive, &mut arrive.0, &buf);
                    memo.insert((si, sl, vo), id);
                    id
                }
            };
            arrive.1.push(id);
        }
        Ok(PortWalks { arrive, depart })
    }
}
