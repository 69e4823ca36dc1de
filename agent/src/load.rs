//! The link load of the tables in force, for the controller's status page.

use crate::subnet::RoutedSubnet;
use proto::v1;

/// The link-load report of a routed subnet's tables in brief, for the
/// status page. At the LID limit it takes seconds (2.8 s on Dragonfly
/// p=10), so the agent measures it after the tables are in force.
pub fn load_summary(r: &RoutedSubnet) -> v1::LinkLoadSummary {
    let load = fabric::load::link_load(&r.fabric, &r.routing.get().lfts);
    v1::LinkLoadSummary {
        links: load.links,
        max: load.max,
        mean: load.mean,
        stdev: load.stdev,
        buckets: load
            .histogram
            .iter()
            .map(|b| v1::LoadBucket {
                low: b.low,
                high: b.high,
                links: b.links,
            })
            .collect(),
        unrouted: load.unrouted,
    }
}
