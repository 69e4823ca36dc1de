//! `ibfabric certs`: a private CA for a cluster and one certificate per
//! service identity, for the services' mutual TLS.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use fabric::fsio::{self, Options};
use ibtls::{CaBundle, Identity, generate_ca, issue};
use serde::Serialize;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

#[derive(Args)]
#[command(after_help = "\
Examples:
  ibfabric certs --out pki ca
  ibfabric certs --out pki issue --ca pki/ca.pem --ca-key pki/ca-key.pem controller --dns ctl1.example.org
  ibfabric certs --out pki issue --ca pki/ca.pem --ca-key pki/ca-key.pem agent --prefix 0xfec0000000000001
  ibfabric certs --out pki issue --ca pki/ca.pem --ca-key pki/ca-key.pem router --guid 0x0002c90300000001 --dns localhost --ip 127.0.0.1
  ibfabric certs renew --ca pki/ca.pem --ca-key pki/ca-key.pem --cert /etc/ibfabric/tls/controller.pem

Certificates carry their identity as a URI (ibfabric://controller, ibfabric://agent/0x<prefix>, \
ibfabric://router/0x<guid>, ibfabric://worker/<name>, ibfabric://operator/<name>) and may act as TLS client and server. \
A service that others connect to also needs the names they connect by (--dns, --ip). \
Private keys are written with mode 0600.")]
pub struct CertsArgs {
    /// Directory to write into (created if missing); `renew` writes in
    /// place instead.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Replace files that already exist.
    #[arg(long, global = true)]
    force: bool,
    /// Machine-readable output: the written paths.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: CertsCmd,
}

#[derive(Subcommand)]
enum CertsCmd {
    /// Make a new CA: ca.pem and ca-key.pem (CA for 10 years, ECDSA P-256).
    Ca {
        /// Common name of the CA.
        #[arg(long, default_value = "ibfabric CA")]
        name: String,
    },
    /// Issue a certificate for one identity: <role>[-<id>].pem and
    /// <role>[-<id>]-key.pem (valid for 1 year, ECDSA P-256).
    Issue(IssueArgs),
    /// Renew a certificate in place: the same identity and names, a new
    /// key, valid for 1 year from now. The key is written first, then the
    /// certificate, each crash-safely; SIGHUP (`systemctl reload`) makes
    /// the service use them.
    Renew(RenewArgs),
}

#[derive(Args)]
struct RenewArgs {
    /// CA certificate (PEM).
    #[arg(long)]
    ca: PathBuf,
    /// CA private key (PEM).
    #[arg(long)]
    ca_key: PathBuf,
    /// The certificate to renew (PEM); replaced.
    #[arg(long)]
    cert: PathBuf,
    /// Its private key; replaced (default: the certificate's name with
    /// `-key.pem` for `.pem`, as `issue` names them).
    #[arg(long)]
    key: Option<PathBuf>,
}

#[derive(Args)]
struct IssueArgs {
    /// CA certificate (PEM).
    #[arg(long)]
    ca: PathBuf,
    /// CA private key (PEM).
    #[arg(long)]
    ca_key: PathBuf,
    /// DNS name clients reach this service by (repeatable).
    #[arg(long = "dns", global = true, value_name = "NAME")]
    dns: Vec<String>,
    /// IP address clients reach this service by (repeatable).
    #[arg(long = "ip", global = true, value_name = "ADDR")]
    ip: Vec<IpAddr>,
    #[command(subcommand)]
    role: RoleArg,
}

#[derive(Subcommand)]
enum RoleArg {
    /// A controller (all controllers of a cluster share this identity).
    Controller,
    /// The agent of one subnet.
    Agent {
        /// Subnet prefix in hex (0x optional).
        #[arg(long, value_parser = parse_hex)]
        prefix: u64,
    },
    /// The firmware side of one router.
    Router {
        /// Router node GUID in hex (0x optional).
        #[arg(long, value_parser = parse_hex)]
        guid: u64,
    },
    /// A worker.
    Worker {
        /// Worker name: letters, digits, '-', '_', '.' (at most 64).
        #[arg(long)]
        name: String,
    },
    /// An operator: reads the controller's status page over HTTPS
    /// (`status_listen`) and `ibfabric status`; no service takes its
    /// other calls. Import it into a browser as PKCS#12 (`openssl pkcs12
    /// -export -in operator-NAME.pem -inkey operator-NAME-key.pem`).
    Operator {
        /// Operator name: letters, digits, '-', '_', '.' (at most 64).
        #[arg(long)]
        name: String,
    },
}

fn parse_hex(s: &str) -> Result<u64, String> {
    fabric::formats::parse_hex_u64(s)
        .ok_or_else(|| format!("'{s}' is not a 64-bit hex number (like 0xfec0000000000001)"))
}

impl RoleArg {
    fn identity(&self) -> Identity {
        match self {
            RoleArg::Controller => Identity::Controller,
            RoleArg::Agent { prefix } => Identity::Agent { prefix: *prefix },
            RoleArg::Router { guid } => Identity::Router { guid: *guid },
            RoleArg::Worker { name } => Identity::Worker { name: name.clone() },
            RoleArg::Operator { name } => Identity::Operator { name: name.clone() },
        }
    }
}

#[derive(Serialize)]
struct Written {
    #[serde(skip_serializing_if = "Option::is_none")]
    identity: Option<String>,
    cert: PathBuf,
    key: PathBuf,
}

/// Certificates are public; keys are readable by their owner only.
const CERT_MODE: u32 = 0o644;
const KEY_MODE: u32 = 0o600;

/// Gives the file at `path` (written 0600) the owner and group of the one
/// it replaced, and its group read bit; never any access for others.
fn keep_access(path: &Path, old: &std::fs::Metadata) -> Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    std::os::unix::fs::chown(path, Some(old.uid()), Some(old.gid())).with_context(|| {
        format!(
            "{}: giving it the old key's owner and group",
            path.display()
        )
    })?;
    let mode = KEY_MODE | (old.mode() & 0o040);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("{}: mode {mode:o}", path.display()))
}

/// `certs renew`: the identity and names of the certificate in place,
/// issued again by the CA.
fn renew(r: &RenewArgs, json: bool) -> Result<i32> {
    let pem = std::fs::read(&r.cert).with_context(|| format!("reading {}", r.cert.display()))?;
    let id = Identity::from_cert_pem(&pem)
        .with_context(|| format!("{}: no ibfabric identity to renew", r.cert.display()))?;
    let (dns, ips) =
        Identity::names_pem(&pem).with_context(|| format!("{}: its names", r.cert.display()))?;
    let key = match &r.key {
        Some(k) => k.clone(),
        None => {
            let name = r
                .cert
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".pem"))
                .with_context(|| {
                    format!(
                        "{}: give --key (the name does not end in .pem)",
                        r.cert.display()
                    )
                })?;
            r.cert.with_file_name(format!("{name}-key.pem"))
        }
    };
    let ca = CaBundle::load(&r.ca, &r.ca_key)?;
    let leaf = issue(&ca, &id, &dns, &ips)?;
    // A service reads its key as the owner or through the group the
    // site gave it (the package's ibfabric group, 0640): the new key
    // keeps both, or the reload that follows could not read it.
    let access = std::fs::metadata(&key).ok();
    write_atomic(&key, &leaf.key_pem, KEY_MODE, true)?;
    if let Some(m) = access {
        keep_access(&key, &m)?;
    }
    write_atomic(&r.cert, &leaf.cert_pem, CERT_MODE, true)?;
    let written = Written {
        identity: Some(id.to_uri()),
        cert: r.cert.clone(),
        key,
    };
    if json {
        super::print_json("certs", &written)?;
    } else {
        println!("identity  {id} (names kept: {})", dns.len() + ips.len());
        println!("renewed   {}", written.cert.display());
        println!(
            "renewed   {} (private key, mode 0600)",
            written.key.display()
        );
        println!("send the service that uses them SIGHUP (systemctl reload) to use them");
    }
    Ok(0)
}

pub fn run(a: CertsArgs) -> Result<i32> {
    if let CertsCmd::Renew(r) = &a.cmd {
        return renew(r, a.json);
    }
    let Some(out) = a.out.clone() else {
        bail!("give --out DIR: where the new files go");
    };
    let (stem, identity, pair) = match &a.cmd {
        CertsCmd::Ca { name } => {
            let ca = generate_ca(name)?;
            ("ca".to_string(), None, (ca.cert_pem, ca.key_pem))
        }
        CertsCmd::Issue(i) => {
            let id = i.role.identity();
            id.validate()?;
            let ca = CaBundle::load(&i.ca, &i.ca_key)?;
            let leaf = issue(&ca, &id, &i.dns, &i.ip)?;
            (id.file_stem(), Some(id), (leaf.cert_pem, leaf.key_pem))
        }
        CertsCmd::Renew(_) => unreachable_renew()?,
    };
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let cert = out.join(format!("{stem}.pem"));
    let key = out.join(format!("{stem}-key.pem"));
    if !a.force {
        // Both are checked before either is written, so a refusal leaves
        // no half pair behind.
        for p in [&cert, &key] {
            if p.exists() {
                bail!("{} exists; pass --force to replace it", p.display());
            }
        }
    }
    // The key first: a certificate on disk without its key is useless.
    write_atomic(&key, &pair.1, KEY_MODE, a.force)?;
    write_atomic(&cert, &pair.0, CERT_MODE, a.force)?;

    if a.json {
        super::print_json(
            "certs",
            &Written {
                identity: identity.as_ref().map(Identity::to_uri),
                cert,
                key,
            },
        )?;
    } else {
        if let Some(id) = &identity {
            println!("identity  {id}");
        }
        println!("wrote     {}", cert.display());
        println!("wrote     {} (private key, mode 0600)", key.display());
    }
    Ok(0)
}

/// `renew` returns before the match that makes new files.
fn unreachable_renew() -> Result<(String, Option<Identity>, (String, String))> {
    bail!("internal error: renew reached the issuing path")
}

/// Writes `path` crash-safely with its final mode from the start (a key
/// is never readable by others, not even for a moment), without replacing
/// an existing file unless `replace`.
fn write_atomic(path: &Path, text: &str, mode: u32, replace: bool) -> Result<()> {
    let opts = Options {
        mode: Some(mode),
        keep_existing: !replace,
    };
    fsio::write_bytes(path, text.as_bytes(), opts)?;
    Ok(())
}
