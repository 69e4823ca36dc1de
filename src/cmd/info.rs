//! `ibfabric info`: counts, diameter and radix of a topology file.

use anyhow::Result;
use clap::Args;
use fabric::Fabric;
use fabric::graph::SwitchGraph;
use serde::Serialize;
use std::path::PathBuf;

#[derive(Args)]
pub struct InfoArgs {
    /// Topology file (ibnetdiscover grammar).
    file: PathBuf,
    /// Machine-readable output: the counts (with --guids, also every node
    /// GUID, sorted: one line per node of the fabric).
    #[arg(long)]
    json: bool,
    /// With --json: list every node GUID too.
    #[arg(long, requires = "json")]
    guids: bool,
}

#[derive(Serialize)]
pub struct Info {
    pub switches: usize,
    pub hcas: usize,
    pub routers: usize,
    pub links: usize,
    /// Connected CA and router ports.
    pub ports: usize,
    pub max_lid: u16,
    /// The largest LMC of any port (each port answers to 2^LMC LIDs).
    pub max_lmc: u8,
    /// Ports with LMC above 0.
    pub ports_with_lmc: usize,
    /// Unicast LIDs the ports answer to, all LMC ranges counted.
    pub lids: usize,
    /// Switch-graph diameter in hops; null when disconnected.
    pub diameter: Option<u32>,
    /// Most ports on one switch.
    pub max_radix: u8,
    pub hosts_per_switch_min: usize,
    pub hosts_per_switch_max: usize,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub guids: Vec<String>,
}

impl Info {
    pub fn of(f: &Fabric, with_guids: bool) -> Info {
        let g = SwitchGraph::new(f);
        let mut hosts = vec![0usize; f.switches().len()];
        for &e in f.endports() {
            let r = f.remote(e);
            if let Some(si) = f.switch_index(f.node_of(r)) {
                hosts[si as usize] += 1;
            }
        }
        let mut guids: Vec<String> = if with_guids {
            (0..f.num_nodes() as u32)
                .map(|n| format!("0x{:016x}", f.guid(n)))
                .collect()
        } else {
            Vec::new()
        };
        guids.sort();
        // Every port with a LID of its own: end ports and switches' port 0.
        let addressed: Vec<u32> = f
            .endports()
            .iter()
            .copied()
            .chain(f.switches().iter().map(|&s| f.slot(s, 0)))
            .collect();
        Info {
            switches: f.switches().len(),
            hcas: f.num_cas(),
            routers: f.num_routers(),
            links: f.num_links(),
            ports: f.endports().len(),
            max_lid: f.max_lid(),
            max_lmc: f.max_lmc(),
            ports_with_lmc: addressed.iter().filter(|&&s| f.lmc(s) > 0).count(),
            lids: addressed.iter().map(|&s| 1usize << f.lmc(s)).sum(),
            diameter: g.diameter(),
            max_radix: f
                .switches()
                .iter()
                .map(|&s| f.num_ports(s))
                .max()
                .unwrap_or(0),
            hosts_per_switch_min: hosts.iter().copied().min().unwrap_or(0),
            hosts_per_switch_max: hosts.iter().copied().max().unwrap_or(0),
            guids,
        }
    }

    fn print(&self) {
        println!("switches        {}", self.switches);
        println!("CAs             {}", self.hcas);
        println!("routers         {}", self.routers);
        println!("links           {}", self.links);
        println!("end ports       {}", self.ports);
        println!("max LID         {}", self.max_lid);
        if self.max_lmc > 0 {
            println!(
                "LMC             up to {} on {} ports, {} LIDs in all (route, verify and \
                 reroute take every LID; `ibfabric engines` says which engines route them)",
                self.max_lmc, self.ports_with_lmc, self.lids
            );
        }
        match self.diameter {
            Some(d) => println!("diameter        {d} (switch hops)"),
            None => println!("diameter        disconnected"),
        }
        println!("max radix       {}", self.max_radix);
        println!(
            "hosts/switch    {}..{}",
            self.hosts_per_switch_min, self.hosts_per_switch_max
        );
    }
}

pub fn run(a: InfoArgs) -> Result<i32> {
    // Any LMC: info only shows the fabric.
    let t = std::time::Instant::now();
    let f = fabric::formats::ibnetdiscover::read_with_lmc(&a.file)?;
    tracing::info!(
        file = %a.file.display(),
        switches = f.switches().len(),
        end_ports = f.endports().len(),
        max_lmc = f.max_lmc(),
        secs = t.elapsed().as_secs_f64(),
        "topology loaded"
    );
    let i = Info::of(&f, a.json && a.guids);
    if a.json {
        super::print_json("info", &i)?;
    } else {
        i.print();
    }
    Ok(0)
}
