//! What a discovery must be before it is routed. `ibnetdiscover > file`
//! leaves the file empty while discovery runs, and a discovery cut short
//! finds a fraction of the fabric: routed, either gives a table set that is
//! valid for the few nodes it names and routes none of the real fabric's
//! pairs. An empty discovery is never a fabric; a sharp shrink (more than
//! half of the switches or end ports gone at once) is acted on only when
//! it persists (the caller times that).

use crate::model::Fabric;

/// Why a discovery is not routed now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryRefused {
    #[error(
        "the discovery holds {switches} switches and {end_ports} end ports: an empty or partial \
         discovery (a file being written?) is not a fabric"
    )]
    Empty { switches: usize, end_ports: usize },
    #[error(
        "the discovery holds {switches} switches and {end_ports} end ports, the tables in force \
         {had_switches} and {had_end_ports}: more than half gone at once"
    )]
    Shrunk {
        switches: usize,
        end_ports: usize,
        had_switches: usize,
        had_end_ports: usize,
    },
}

impl DiscoveryRefused {
    /// What identifies one shrunken discovery across checks: the same
    /// counts seen again count as the same change persisting.
    pub fn signature(&self) -> (usize, usize) {
        match *self {
            DiscoveryRefused::Empty {
                switches,
                end_ports,
            }
            | DiscoveryRefused::Shrunk {
                switches,
                end_ports,
                ..
            } => (switches, end_ports),
        }
    }
}

/// Checks `found` against the fabric whose tables are in force (`prev`,
/// None at the first routing).
pub fn check(prev: Option<&Fabric>, found: &Fabric) -> Result<(), DiscoveryRefused> {
    let (switches, end_ports) = (found.switches().len(), found.endports().len());
    if switches == 0 || end_ports == 0 {
        return Err(DiscoveryRefused::Empty {
            switches,
            end_ports,
        });
    }
    if let Some(p) = prev {
        let (had_switches, had_end_ports) = (p.switches().len(), p.endports().len());
        if switches * 2 < had_switches || end_ports * 2 < had_end_ports {
            return Err(DiscoveryRefused::Shrunk {
                switches,
                end_ports,
                had_switches,
                had_end_ports,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::ibnetdiscover;
    use crate::generate::{Topology, generate};

    fn fat_tree(leaves: u32) -> Fabric {
        generate(&Topology::FatTree2 {
            leaves,
            spines: 2,
            hosts: 2,
            links: 1,
        })
        .expect("generates")
    }

    #[test]
    fn empty_and_comment_only_discoveries_are_no_fabric() {
        let p = std::path::Path::new("t.net");
        for text in ["", "# ibnetdiscover output\n\n# Topology file\n"] {
            let f = ibnetdiscover::parse(text, p).expect("an empty file parses");
            assert!(matches!(
                check(None, &f),
                Err(DiscoveryRefused::Empty {
                    switches: 0,
                    end_ports: 0
                })
            ));
        }
    }

    #[test]
    fn a_sharp_shrink_is_named_and_a_small_one_passes() {
        let big = fat_tree(8);
        let half = fat_tree(5);
        let small = fat_tree(3);
        assert_eq!(check(None, &small), Ok(()));
        assert_eq!(check(Some(&big), &half), Ok(()), "a few leaves gone");
        let e = check(Some(&big), &small).expect_err("shrunk");
        assert!(matches!(e, DiscoveryRefused::Shrunk { .. }), "{e}");
        assert_eq!(e.signature(), (5, 6));
        assert!(e.to_string().contains("more than half"), "{e}");
        // Growth is not a shrink.
        assert_eq!(check(Some(&small), &big), Ok(()));
    }
}
