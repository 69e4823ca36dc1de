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

/// A page per subcommand, nested ones too (`ibfabric-gen-multi`): a page
/// names its subcommands' pages as `<its name>-<sub>(1)`, so every page it
/// names is written. The synopsis keeps the words one types.
fn pages_of(cmd: &clap::Command, name: &str, words: &str, out: &mut Vec<(String, clap::Command)>) {
    for sub in cmd.get_subcommands() {
        let n = format!("{name}-{}", sub.get_name());
        let w = format!("{words} {}", sub.get_name());
        // `ibfabric help gen` is for the terminal: no page of its own.
        let page = sub
            .clone()
            .name(n.clone())
            .bin_name(w.clone())
            .disable_help_subcommand(true);
        pages_of(sub, &n, &w, out);
        out.push((n, page));
    }
}

pub fn man(a: ManArgs, cmd: clap::Command) -> Result<i32> {
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let cmd = cmd.name("ibfabric").disable_help_subcommand(true);
    let mut pages = vec![(String::from("ibfabric"), cmd.clone())];
    pages_of(&cmd, "ibfabric", "ibfabric", &mut pages);
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
