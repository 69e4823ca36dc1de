//! A published result as the leader keeps it: encoded, in one buffer.
//!
//! At the LID limit the results are millions of rules (8 subnets of 46k
//! HCAs: 2.9M egress rules and 2.6M mapping entries). Decoded, each rule
//! is a struct with a vector of its own, about 100 bytes and one small
//! allocation; encoded it is about 30 bytes and no allocation. The tiny
//! allocations of two generations interleave on the heap, so the freed
//! one never goes back to the system. A receiver's push decodes its own
//! result once, when it is sent.

use super::publish::Versioned;
use std::marker::PhantomData;

/// One result (a subnet's mapping, a router's egress tables): its version,
/// and its content (version, repair marker and part numbers zeroed)
/// encoded, with the content's SHA-256.
pub struct Held<T> {
    version: u64,
    digest: Vec<u8>,
    content: Vec<u8>,
    of: PhantomData<fn() -> T>,
}

impl<T: Versioned + Default> Held<T> {
    /// Holds `w` at its version.
    pub fn of(mut w: T) -> Self {
        let version = w.version();
        w.strip();
        let content = w.encode_to_vec();
        drop(w);
        use sha2::{Digest, Sha256};
        Self {
            version,
            digest: Sha256::digest(&content).to_vec(),
            content,
            of: PhantomData,
        }
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    pub(super) fn set_version(&mut self, v: u64) {
        self.version = v;
    }

    /// SHA-256 of the content without its version: what the store's head
    /// of the result records.
    pub fn digest(&self) -> &[u8] {
        &self.digest
    }

    /// The result as it is sent: its content at its version.
    pub fn decode(&self) -> Result<T, prost::DecodeError> {
        let mut t = T::decode(self.content.as_slice())?;
        t.set_version(self.version);
        Ok(t)
    }
}

impl<T> std::fmt::Debug for Held<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held")
            .field("version", &self.version)
            .field("bytes", &self.content.len())
            .finish()
    }
}

impl<T> PartialEq for Held<T> {
    fn eq(&self, o: &Self) -> bool {
        self.version == o.version && self.digest == o.digest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::v1;

    #[test]
    fn a_held_result_decodes_to_what_was_held_at_its_version() {
        let m = v1::MappingUpdate {
            version: 7,
            subnet_prefix: 0xfe80,
            algorithm: "issr".into(),
            entries: vec![v1::MappingEntry {
                destination: Some(v1::Gid {
                    prefix: 0xfe81,
                    guid: 3,
                }),
                router_port_guid: 9,
                router_port_lid: 12,
            }],
            default_ports: vec![9],
            replaces: 5,
            part: 1,
            parts: 2,
        };
        let h = Held::of(m.clone());
        assert_eq!(h.version(), 7);
        let back = h.decode().expect("decodes");
        let want = v1::MappingUpdate {
            replaces: 0,
            part: 0,
            parts: 0,
            ..m.clone()
        };
        assert_eq!(
            back, want,
            "content at its version, no part or repair marker"
        );
        // The digest is that of the content, whatever the version.
        let again = Held::of(v1::MappingUpdate {
            version: 9,
            ..m.clone()
        });
        assert_eq!(again.digest(), h.digest());
        assert_ne!(again, h, "another version");
        let other = Held::of(v1::MappingUpdate {
            default_ports: vec![10],
            ..m
        });
        assert_ne!(other.digest(), h.digest());
    }
}
