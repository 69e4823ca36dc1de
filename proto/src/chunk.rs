//! Pushes larger than a receiver decodes travel as parts: [`split_mapping`]
//! and [`split_egress`] cut one version into messages no larger than a
//! bound, [`Assembler`] puts them back together on the other side and
//! hands out only whole versions, so a receiver never applies half a
//! table.

use crate::v1;
use prost::Message;

/// What any part may hold besides its slice of the content: the header
/// fields, the part numbers and the field tags, with room to spare.
const HEADER_SLACK: usize = 256;
/// The most parts one version may have: bounds what a receiver buffers.
pub const MAX_PARTS: u32 = 1 << 16;
/// The smallest part bound [`split_mapping`] and [`split_egress`] accept.
pub const MIN_PART_BYTES: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    #[error("part bound {0} bytes is below the minimum of {MIN_PART_BYTES}")]
    BoundTooSmall(usize),
    #[error("one item needs {need} bytes, more than the part bound of {bound}")]
    ItemTooLarge { need: usize, bound: usize },
    #[error("{0} parts is over the limit of {MAX_PARTS}")]
    TooManyParts(u32),
    #[error("part {got} of {parts} arrived while part {want} was expected")]
    OutOfOrder { got: u32, want: u32, parts: u32 },
    #[error("part {part} does not belong to the version being assembled ({what} differs)")]
    Mismatch { part: u32, what: &'static str },
    #[error("part {part} is out of range of {parts} parts")]
    OutOfRange { part: u32, parts: u32 },
    #[error("part {0} continues a context but no context came before it")]
    DanglingContinuation(u32),
}

/// Encoded size of one element of a repeated message field.
fn field_len<M: Message>(m: &M) -> usize {
    let n = m.encoded_len();
    1 + prost::length_delimiter_len(n) + n
}

fn check_bound(max_bytes: usize) -> Result<usize, ChunkError> {
    if max_bytes < MIN_PART_BYTES {
        return Err(ChunkError::BoundTooSmall(max_bytes));
    }
    Ok(max_bytes)
}

fn numbered<T>(mut parts: Vec<T>, set: impl Fn(&mut T, u32, u32)) -> Result<Vec<T>, ChunkError> {
    let n = u32::try_from(parts.len()).unwrap_or(u32::MAX);
    if n > MAX_PARTS {
        return Err(ChunkError::TooManyParts(n));
    }
    for (i, p) in parts.iter_mut().enumerate() {
        set(p, i as u32, n);
    }
    Ok(parts)
}

/// Cuts `m` into parts that each encode to at most `max_bytes`; one part
/// (numbered 0 of 1) when it fits whole.
pub fn split_mapping(
    m: &v1::MappingUpdate,
    max_bytes: usize,
) -> Result<Vec<v1::MappingUpdate>, ChunkError> {
    let bound = check_bound(max_bytes)?;
    let header = v1::MappingUpdate {
        entries: Vec::new(),
        default_ports: Vec::new(),
        ..m.clone()
    };
    let budget = bound.saturating_sub(header.encoded_len() + HEADER_SLACK);
    let defaults = v1::MappingUpdate {
        default_ports: m.default_ports.clone(),
        ..Default::default()
    }
    .encoded_len();
    if defaults > budget {
        return Err(ChunkError::ItemTooLarge {
            need: defaults,
            bound,
        });
    }
    let mut parts = Vec::new();
    let mut cur = header.clone();
    let mut used = 0usize;
    for e in &m.entries {
        let n = field_len(e);
        if n > budget {
            return Err(ChunkError::ItemTooLarge { need: n, bound });
        }
        if used + n > budget {
            parts.push(std::mem::replace(&mut cur, header.clone()));
            used = 0;
        }
        cur.entries.push(*e);
        used += n;
    }
    // The defaults ride in the last part, where the receiver has every
    // entry already.
    if used + defaults > budget {
        parts.push(std::mem::replace(&mut cur, header.clone()));
    }
    cur.default_ports = m.default_ports.clone();
    parts.push(cur);
    numbered(parts, |p, i, n| {
        p.part = i;
        p.parts = n;
    })
}

/// Cuts `t` into parts that each encode to at most `max_bytes`; a context
/// whose rules do not fit continues in the next part (`continued`).
pub fn split_egress(
    t: &v1::EgressTables,
    max_bytes: usize,
) -> Result<Vec<v1::EgressTables>, ChunkError> {
    let bound = check_bound(max_bytes)?;
    let header = v1::EgressTables {
        contexts: Vec::new(),
        ..t.clone()
    };
    let budget = bound.saturating_sub(header.encoded_len() + HEADER_SLACK);
    let mut parts = Vec::new();
    let mut cur = header.clone();
    let mut used = 0usize;
    for c in &t.contexts {
        let shell = v1::IngressContext {
            ingress_ports: c.ingress_ports.clone(),
            rules: Vec::new(),
            continued: true,
        };
        // A context's own bytes: its ports, flag, tag and a length prefix
        // that grows with its rules (bounded by 5 bytes).
        let shell_len = shell.encoded_len() + 1 + 5;
        if shell_len + HEADER_SLACK > budget {
            return Err(ChunkError::ItemTooLarge {
                need: shell_len,
                bound,
            });
        }
        if used + shell_len > budget {
            parts.push(std::mem::replace(&mut cur, header.clone()));
            used = 0;
        }
        cur.contexts.push(v1::IngressContext {
            continued: false,
            ..shell.clone()
        });
        used += shell_len;
        for r in &c.rules {
            let n = field_len(r);
            if n + shell_len > budget {
                return Err(ChunkError::ItemTooLarge { need: n, bound });
            }
            if used + n > budget {
                parts.push(std::mem::replace(&mut cur, header.clone()));
                cur.contexts.push(shell.clone());
                used = shell_len;
            }
            if let Some(last) = cur.contexts.last_mut() {
                last.rules.push(r.clone());
            }
            used += n;
        }
    }
    parts.push(cur);
    numbered(parts, |p, i, n| {
        p.part = i;
        p.parts = n;
    })
}

/// A message that may travel in parts.
pub trait Part: Sized {
    fn part(&self) -> u32;
    fn parts(&self) -> u32;
    /// Names the first header field in which `next` differs from `self`
    /// (then it is not a part of the same version).
    fn differs(&self, next: &Self) -> Option<&'static str>;
    /// Appends `next`'s content to `self`.
    fn absorb(&mut self, next: Self) -> Result<(), ChunkError>;
    /// Clears the part numbers of an assembled whole.
    fn whole(self) -> Self;
    /// Refuses a first part that claims to continue something.
    fn check_first(&self) -> Result<(), ChunkError> {
        Ok(())
    }
    /// Records the last part absorbed.
    fn set_part(&mut self, part: u32);
}

impl Part for v1::MappingUpdate {
    fn part(&self) -> u32 {
        self.part
    }
    fn parts(&self) -> u32 {
        self.parts
    }
    fn differs(&self, n: &Self) -> Option<&'static str> {
        if self.version != n.version {
            Some("version")
        } else if self.subnet_prefix != n.subnet_prefix {
            Some("subnet")
        } else if self.algorithm != n.algorithm {
            Some("algorithm")
        } else if self.replaces != n.replaces {
            Some("replaces")
        } else if self.parts != n.parts {
            Some("parts")
        } else {
            None
        }
    }
    fn absorb(&mut self, n: Self) -> Result<(), ChunkError> {
        self.entries.extend(n.entries);
        self.default_ports.extend(n.default_ports);
        Ok(())
    }
    fn whole(self) -> Self {
        Self {
            part: 0,
            parts: 0,
            ..self
        }
    }
    fn set_part(&mut self, part: u32) {
        self.part = part;
    }
}

impl Part for v1::EgressTables {
    fn part(&self) -> u32 {
        self.part
    }
    fn parts(&self) -> u32 {
        self.parts
    }
    fn differs(&self, n: &Self) -> Option<&'static str> {
        if self.version != n.version {
            Some("version")
        } else if self.router_guid != n.router_guid {
            Some("router")
        } else if self.algorithm != n.algorithm {
            Some("algorithm")
        } else if self.replaces != n.replaces {
            Some("replaces")
        } else if self.parts != n.parts {
            Some("parts")
        } else {
            None
        }
    }
    fn absorb(&mut self, n: Self) -> Result<(), ChunkError> {
        let part = n.part;
        for c in n.contexts {
            if c.continued {
                let last = self
                    .contexts
                    .last_mut()
                    .filter(|l| l.ingress_ports == c.ingress_ports)
                    .ok_or(ChunkError::DanglingContinuation(part))?;
                last.rules.extend(c.rules);
            } else {
                self.contexts.push(c);
            }
        }
        Ok(())
    }
    fn whole(mut self) -> Self {
        self.part = 0;
        self.parts = 0;
        for c in &mut self.contexts {
            c.continued = false;
        }
        self
    }
    fn check_first(&self) -> Result<(), ChunkError> {
        if self.contexts.first().is_some_and(|c| c.continued) {
            return Err(ChunkError::DanglingContinuation(self.part));
        }
        Ok(())
    }
    fn set_part(&mut self, part: u32) {
        self.part = part;
    }
}

/// Puts parts back together, in order. A part that does not follow the
/// one before it drops what was gathered (the error says why); a part 0
/// always starts afresh, so a sender that restarts a version after a
/// reconnect is followed.
#[derive(Debug)]
pub struct Assembler<T> {
    pending: Option<T>,
}

impl<T> Default for Assembler<T> {
    fn default() -> Self {
        Self { pending: None }
    }
}

impl<T: Part> Assembler<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// True while a version is half gathered.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Takes the next part: `Ok(Some(whole))` once a version is complete,
    /// `Ok(None)` while more parts are due.
    pub fn push(&mut self, p: T) -> Result<Option<T>, ChunkError> {
        let parts = p.parts().max(1);
        if parts > MAX_PARTS {
            self.pending = None;
            return Err(ChunkError::TooManyParts(parts));
        }
        if p.part() >= parts {
            self.pending = None;
            return Err(ChunkError::OutOfRange {
                part: p.part(),
                parts,
            });
        }
        if p.part() == 0 {
            self.pending = None;
            p.check_first()?;
            if parts == 1 {
                return Ok(Some(p.whole()));
            }
            self.pending = Some(p);
            return Ok(None);
        }
        let Some(mut acc) = self.pending.take() else {
            return Err(ChunkError::OutOfOrder {
                got: p.part(),
                want: 0,
                parts,
            });
        };
        if let Some(what) = acc.differs(&p) {
            return Err(ChunkError::Mismatch {
                part: p.part(),
                what,
            });
        }
        // `acc.part()` is the last part absorbed.
        let want = acc.part() + 1;
        if p.part() != want {
            return Err(ChunkError::OutOfOrder {
                got: p.part(),
                want,
                parts,
            });
        }
        let last = p.part() + 1 == parts;
        let at = p.part();
        acc.absorb(p)?;
        acc.set_part(at);
        if last {
            Ok(Some(acc.whole()))
        } else {
            self.pending = Some(acc);
            Ok(None)
        }
    }
}
