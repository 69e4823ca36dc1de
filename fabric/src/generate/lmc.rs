//! A generated fabric with LMC: every CA and router port answers to
//! 2^LMC LIDs.

use crate::error::{Error, ModelError, Result};
use crate::model::{Fabric, FabricBuilder, NONE, NodeKind};

/// `f` with every CA and router port given LMC `lmc` (2^LMC LIDs each):
/// the same nodes, GUIDs and links, every LID assigned afresh, a port's
/// range aligned, switches keeping one LID.
pub fn with_lmc(f: &Fabric, lmc: u8) -> Result<Fabric> {
    let inv = |e: ModelError| Error::Invalid(e.to_string());
    let mut b = FabricBuilder::new();
    b.subnet_prefix(f.subnet_prefix);
    for n in 0..f.num_nodes() as u32 {
        b.add_node(f.kind(n), f.guid(n), f.desc(n), f.num_ports(n));
    }
    for n in 0..f.num_nodes() as u32 {
        for s in f.port_slots(n) {
            let p = f.port_of(s);
            b.set_port_guid(n, p, f.port_guid(s)).map_err(inv)?;
            if f.kind(n) != NodeKind::Switch {
                b.set_lmc(n, p, lmc).map_err(inv)?;
            }
            let r = f.remote(s);
            if r != NONE && s < r {
                b.connect(n, p, f.node_of(r), f.port_of(r)).map_err(inv)?;
            }
        }
    }
    b.build().map_err(inv)
}
