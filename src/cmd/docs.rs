//! `ibfabric completions` and `ibfabric man`: generated from the same
//! command definitions `--help` prints, so they cannot drift from it.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

#[derive(Args)]
pub struct ManArgs {
    /// Directory that receives ibfabric.1 and ibfabric-<command>.1.
    #[arg(long, short)]
    out: PathBuf,
}

pub fn completions(a: CompletionsArgs, mut cmd: clap::Command) -> Result<i32> {
    clap_complete::generate(a.shell, &mut cmd, "ibfabric", &mut std::io::stdout());
    Ok(super::exit::OK)
}

pub fn man(a: ManArgs, cmd: clap::Command) -> Result<i32> {
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let cmd = cmd.name("ibfabric");
    let mut pages = vec![(String::from("ibfabric"), cmd.clone())];
    for sub in cmd.get_subcommands() {
        pages.push((format!("ibfabric-{}", sub.get_name()), sub.clone()));
    }
    for (name, page) in pages {
        let mut buf = Vec::new();
        clap_mangen::Man::new(page)
            .title(name.clone())
            .render(&mut buf)
            .with_context(|| format!("rendering {name}.1"))?;
        let p = a.out.join(format!("{name}.1"));
        fabric::fsio::write_bytes(&p, &buf, fabric::fsio::Options::default())
            .with_context(|| format!("writing {}", p.display()))?;
        println!("wrote           {}", p.display());
    }
    Ok(super::exit::OK)
}
