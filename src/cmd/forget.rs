//! `ibfabric forget`: an operator removes a subnet from the controllers'
//! view (a subnet the fabric no longer has, or a report that should not
//! have been accepted, such as another prefix squatting on its GUIDs).

use anyhow::{Context, Result, bail};
use clap::Args;
use proto::v1;

#[derive(Args)]
#[command(
    after_help = "The call needs the controllers' own identity (their certificate, \
    or --insecure on a plaintext control plane): it is an operator's act. The leader removes \
    the subnet's stored report, its claims on GUIDs and router ports and its mapping, then \
    recomputes the routes. An agent that still runs for the prefix registers and reports again \
    as a newcomer. Exit status: 0 when forgotten, 1 on error, 6 when the leader held nothing \
    for the prefix."
)]
pub struct ForgetArgs {
    /// Controller addresses (https://host:port; http:// for plaintext services), repeated or comma-separated;
    /// the one that leads does it.
    #[arg(long = "controller", short, value_delimiter = ',', required = true)]
    controllers: Vec<String>,
    /// The subnet prefix to forget (0x and 16 hex digits, or decimal).
    #[arg(long, value_parser = parse_prefix)]
    prefix: u64,
    #[command(flatten)]
    tls: super::runtime::ClientTls,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

fn parse_prefix(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("'{s}' is not a subnet prefix: {e}"))
}

#[derive(serde::Serialize)]
struct ForgetJson {
    prefix: String,
    controller: String,
    forgotten: bool,
}

pub fn run(a: ForgetArgs) -> Result<i32> {
    let transport = a.tls.transport()?;
    super::runtime::runtime()?.block_on(forget(a, transport))
}

async fn forget(a: ForgetArgs, transport: ibtls::Transport) -> Result<i32> {
    let mut errors = Vec::new();
    for addr in &a.controllers {
        let reply = async {
            let mut c = proto::client::controller(addr, &transport).await?;
            let r = c
                .forget(proto::client::unary(v1::ForgetRequest {
                    subnet_prefix: a.prefix,
                }))
                .await?;
            anyhow::Ok(r.into_inner())
        }
        .await
        .with_context(|| format!("controller {addr}"));
        let r = match reply {
            Ok(r) => r,
            Err(e) => {
                errors.push(super::error_text(&e));
                continue;
            }
        };
        let out = ForgetJson {
            prefix: format!("{:#018x}", a.prefix),
            controller: addr.clone(),
            forgotten: r.forgotten,
        };
        if a.json {
            super::print_json("forget", &out)?;
        } else if r.forgotten {
            println!("subnet {} forgotten by the leader at {addr}", out.prefix);
        } else {
            println!(
                "the leader at {addr} holds nothing for subnet {}",
                out.prefix
            );
        }
        return Ok(if r.forgotten {
            super::exit::OK
        } else {
            super::exit::DEGRADED
        });
    }
    bail!("no controller did it: {}", errors.join("; "))
}
