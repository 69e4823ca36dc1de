//! The multi-subnet pipeline: route every subnet, pass each routing through
//! the verification gate, and build the view the controller computes
//! inter-subnet routes from. The whole-fabric check
//! ([`crate::verify::global`]) then runs over the result.

use crate::error::{Error, Result};
use crate::intersubnet::GlobalView;
use crate::multi::MultiFabric;
use crate::routing::{EngineKind, EngineOptions, RoutingEngine};
use crate::tables::Routing;
use crate::verify::{self, Policy, Verified};

/// Per-subnet routing of a multi-subnet fabric and the view the controller
/// builds from it.
pub struct Routed {
    /// Subnet `i`'s tables, accepted by the gate (every pair delivered,
    /// deadlock free unless [`route_each_under`] allowed cycles); the
    /// verifier's report is in each.
    pub routings: Vec<Verified<Routing>>,
    pub view: GlobalView,
}

impl Routed {
    /// The tables, subnet by subnet (for [`crate::network::Network::new`]).
    pub fn tables(&self) -> impl Iterator<Item = &Routing> {
        self.routings.iter().map(Verified::get)
    }
}

/// Routes every subnet with `engine`; see [`route_with`].
pub fn route_subnets(m: &MultiFabric, engine: EngineKind) -> Result<Routed> {
    route_each(m, &vec![engine; m.subnets.len()])
}

/// Routes subnet `i` with `engines[i]`; see [`route_with`].
pub fn route_each(m: &MultiFabric, engines: &[EngineKind]) -> Result<Routed> {
    route_each_under(m, engines, Policy::DeadlockFree)
}

/// [`route_each`] under another gate policy: `Policy::AllowCycles` lets
/// the tables of engines that do not claim deadlock freedom through with a
/// cycle (the simulator shows them deadlock); nothing that runs a fabric
/// uses it.
pub fn route_each_under(m: &MultiFabric, engines: &[EngineKind], policy: Policy) -> Result<Routed> {
    let boxed: Vec<Box<dyn RoutingEngine>> = engines.iter().map(|k| k.engine()).collect();
    let refs: Vec<&dyn RoutingEngine> = boxed.iter().map(|b| b.as_ref()).collect();
    route_with_policy(m, &refs, policy)
}

/// Routes subnet `i` with `engines[i]` and passes each result through the
/// gate with [`Policy::DeadlockFree`]: a fabric built on tables that could
/// deadlock or leave pairs unrouted cannot run, whatever the engine. The
/// view carries ISFR's primary destinations of the subnets whose engine
/// defines primary paths.
pub fn route_with(m: &MultiFabric, engines: &[&dyn RoutingEngine]) -> Result<Routed> {
    route_with_policy(m, engines, Policy::DeadlockFree)
}

fn route_with_policy(
    m: &MultiFabric,
    engines: &[&dyn RoutingEngine],
    policy: Policy,
) -> Result<Routed> {
    if engines.len() != m.subnets.len() {
        return Err(Error::Multi(format!(
            "{} engines for {} subnets",
            engines.len(),
            m.subnets.len()
        )));
    }
    let mut view = GlobalView::from_multi(m);
    let mut routings = Vec::with_capacity(m.subnets.len());
    for (s, &e) in m.subnets.iter().zip(engines) {
        let r = e.route(&s.fabric, &EngineOptions::default())?;
        let v =
            verify::accept(&s.fabric, e, r, policy).map_err(|refused| Error::SubnetRefused {
                engine: e.name().to_string(),
                subnet: s.name.clone(),
                refusal: refused.refusal.to_string(),
            })?;
        view.set_primary(
            s.prefix,
            &crate::intersubnet::reported_primary_lids(e, &s.fabric, &v.get().lfts),
        );
        routings.push(v);
    }
    Ok(Routed { routings, view })
}
