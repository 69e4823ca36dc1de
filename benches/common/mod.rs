//! What the control-plane benches share: the report an agent sends for a
//! subnet file, and a subnet some of whose hosts left.

use proto::v1;
use settings::ConfigFile;
use tonic::transport::Channel;

/// `text` (ibnetdiscover) without its last `k` hosts: their blocks and
/// the switch lines that link them, as a discovery run after their cables
/// were pulled sees the subnet.
pub fn without_last_hosts(text: &str, k: usize) -> String {
    let mut blocks: Vec<&str> = text.split("\n\n").collect();
    let mut gone = Vec::new();
    while gone.len() < k {
        let Some(at) = blocks.iter().rposition(|b| {
            b.lines()
                .any(|l| l.starts_with("Ca\t") || l.starts_with("Ca "))
        }) else {
            break;
        };
        let b = blocks.remove(at);
        let name = b
            .lines()
            .find(|l| l.starts_with("Ca"))
            .and_then(|l| l.split('"').nth(1))
            .expect("a host's name");
        gone.push(format!("\"{name}\"["));
    }
    blocks
        .iter()
        .map(|b| {
            b.lines()
                .filter(|l| !(l.starts_with('[') && gone.iter().any(|g| l.contains(g.as_str()))))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// What `name`'s agent reports for the subnet in `net`.
pub fn route(name: &str, prefix: u64, net: &std::path::Path) -> v1::SubnetReport {
    let cfg = agent::config::AgentConfig::parse(
        &format!(
            "agent_id = \"{name}\"\nsubnet_prefix = \"{prefix:#018x}\"\ntopology = \"{}\"\nengine = \"minhop\"\ninsecure = true\n",
            net.display()
        ),
        "bench",
    )
    .expect("config");
    agent::subnet::route_subnet(&cfg).expect("routes").report
}

/// Registers the agent of `prefix` with the controller `client` talks to;
/// the session its reports carry.
pub async fn register(
    client: &mut v1::controller_client::ControllerClient<Channel>,
    prefix: u64,
) -> String {
    client
        .register(v1::RegisterRequest {
            agent_id: format!("agent-{prefix:x}"),
            subnet_prefix: prefix,
            query_addr: String::new(),
        })
        .await
        .expect("register")
        .into_inner()
        .session
}
