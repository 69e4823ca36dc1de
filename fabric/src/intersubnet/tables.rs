//! What an inter-subnet algorithm emits: one mapping file per subnet (which
//! local router port a host uses for a remote destination) and one table
//! per router (how it relays).

use super::Gid;

/// The router-port choice per remote destination for one subnet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    pub dest: Gid,
    pub router_port_guid: u64,
    pub router_port_lid: u16,
}

/// The mapping file of one subnet (ISSR paper, Code 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub prefix: u64,
    pub entries: Vec<MapEntry>,
    /// Router port GUIDs for destinations without an entry ('*' lines).
    pub defaults: Vec<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Match {
    Gid(Gid),
    Prefix(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// ISSR: a deterministic hash of (source LID, next LID) over the ports.
    Hash,
    /// ISFR and the prefix baseline: the first (only) port.
    First,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub matches: Match,
    pub next_lid: u16,
    pub ports: Vec<u8>,
    pub choice: Choice,
}

impl Rule {
    /// The relay decision for a packet from `slid` (ISSR paper, Algorithm 1,
    /// with a fixed mixing hash in place of `srand`/`rand`: the same pair
    /// always takes the same port, so packets stay in order).
    pub fn egress_port(&self, slid: u16) -> Option<u8> {
        if self.ports.is_empty() {
            return None;
        }
        Some(match self.choice {
            Choice::First => self.ports[0],
            Choice::Hash => {
                let h = mix((slid as u64) << 16 | self.next_lid as u64);
                self.ports[(h % self.ports.len() as u64) as usize]
            }
        })
    }
}

/// SplitMix64 finalizer: cheap, and spreads consecutive LIDs evenly.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Rules for packets entering on `ingress_ports` (empty = any port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub ingress_ports: Vec<u8>,
    pub rules: Vec<Rule>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterTable {
    pub router_guid: u64,
    pub contexts: Vec<Context>,
}

impl RouterTable {
    /// The rule for a destination: a full-GID rule first, then a prefix
    /// rule, in the first context that accepts the ingress port.
    pub fn lookup(&self, ingress_port: u8, dest: Gid) -> Option<&Rule> {
        let ctx = self
            .contexts
            .iter()
            .find(|c| c.ingress_ports.is_empty() || c.ingress_ports.contains(&ingress_port))?;
        ctx.rules
            .iter()
            .find(|r| r.matches == Match::Gid(dest))
            .or_else(|| {
                ctx.rules
                    .iter()
                    .find(|r| r.matches == Match::Prefix(dest.prefix))
            })
    }
}

/// What an inter-subnet algorithm produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterSubnetRoutes {
    pub algorithm: String,
    /// One per subnet, in the view's order.
    pub mappings: Vec<Mapping>,
    /// One per router, ascending GUID.
    pub routers: Vec<RouterTable>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_choice_is_deterministic_and_spreads() {
        let rule = Rule {
            matches: Match::Prefix(1),
            next_lid: 7,
            ports: vec![1, 2, 3, 4],
            choice: Choice::Hash,
        };
        let mut used = [0u32; 5];
        for slid in 1..=400u16 {
            let p = rule.egress_port(slid).expect("port");
            assert_eq!(Some(p), rule.egress_port(slid));
            used[p as usize] += 1;
        }
        for &n in &used[1..] {
            assert!((60..=140).contains(&n), "uneven spread {used:?}");
        }
    }
}
