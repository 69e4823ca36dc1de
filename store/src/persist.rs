//! Where the controller leader keeps what it accepted: fenced writes of
//! values of any size (large ones in parts), and the store's health as the
//! last operation found it.

use crate::{MAX_TXN_BYTES, MAX_TXN_OPS, Op, Revision, Store, StoreError};
use std::sync::Arc;

/// Largest value stored in its key; a larger one is split into parts of
/// this size under [`PARTS_PREFIX`], well inside one transaction.
pub const PART_BYTES: usize = 512 << 10;
/// Where the parts of large values live: `parts/<key>/<nonce>/<index>`.
/// Outside every other prefix, so listing `subnets/` never meets a part.
pub const PARTS_PREFIX: &str = "parts/";

/// Where the controller leader keeps what it accepted. Once given a
/// leadership term ([`StorePersist::fence`]), every write is fenced by it
/// ([`Store::commit_fenced`]): a controller whose term ended writes
/// nothing.
///
/// Values of any size: a value over [`PART_BYTES`] is written as parts
/// first, then a head in its own key naming them (and their SHA-256), so
/// a reader never finds a head whose parts are missing; parts a head no
/// longer names are removed afterwards. Writes are grouped into
/// transactions under etcd's limits ([`MAX_TXN_OPS`], [`MAX_TXN_BYTES`]).
///
/// Every operation's outcome is kept for the controller's status
/// ([`StorePersist::health`]); a failure is logged as an ERROR.
pub struct StorePersist {
    store: Arc<dyn Store>,
    term: std::sync::Mutex<Option<(String, Revision)>>,
    /// Keys whose value lives in parts, with the nonce of the parts in force.
    chunked: std::sync::Mutex<std::collections::HashMap<String, String>>,
    nonces: std::sync::atomic::AtomicU64,
    health: std::sync::Mutex<proto::v1::StoreHealth>,
}

impl StorePersist {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            term: std::sync::Mutex::new(None),
            chunked: std::sync::Mutex::new(std::collections::HashMap::new()),
            nonces: std::sync::atomic::AtomicU64::new(0),
            health: std::sync::Mutex::new(proto::v1::StoreHealth {
                ok: true,
                ..Default::default()
            }),
        }
    }

    /// The store as the last operation found it.
    pub fn health(&self) -> proto::v1::StoreHealth {
        self.health
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Records an operation's outcome for [`Self::health`]. Only a write
    /// that lands clears a failure: the reads the leader makes every few
    /// hundred milliseconds (complaints) succeed while writes fail on a
    /// full disk, and must not show the store as healthy.
    fn record<T>(&self, op: &str, r: Result<T, StoreError>) -> Result<T, StoreError> {
        let mut h = self.health.lock().unwrap_or_else(|p| p.into_inner());
        let write = matches!(op, "write" | "remove" | "note");
        match &r {
            Ok(_) if write => h.ok = true,
            Ok(_) => {}
            Err(e) => {
                tracing::error!(store = %self.store.describe(), "{op} failed: {e}");
                h.ok = false;
                h.failures += 1;
                h.last_error = format!("{op}: {e}");
                h.last_error_unix_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
            }
        }
        r
    }

    /// Fences the saves from now on by the term of `election` that began
    /// at `term`.
    pub fn fence(&self, election: &str, term: Revision) {
        *self.term.lock().unwrap_or_else(|p| p.into_inner()) = Some((election.to_string(), term));
    }

    /// Writes `key`; [`StoreError::TermOver`] when the fencing term ended.
    pub async fn save(&self, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.save_all(vec![(key.to_string(), value)]).await
    }

    /// Writes every `(key, value)`: parts first, then the heads, then the
    /// removal of parts no head names any more. A failure part way leaves
    /// every head either old or new, never one without its parts.
    pub async fn save_all(&self, writes: Vec<(String, Vec<u8>)>) -> Result<(), StoreError> {
        let r = self.save_all_inner(writes).await;
        self.record("write", r)
    }

    async fn save_all_inner(&self, writes: Vec<(String, Vec<u8>)>) -> Result<(), StoreError> {
        use prost::Message;
        use proto::v1::{StoredParts, StoredValue, stored_value::Kind};
        use sha2::{Digest, Sha256};
        let mut parts = Vec::new();
        let mut heads = Vec::with_capacity(writes.len());
        let mut now_chunked = Vec::new();
        let mut replaced = Vec::new();
        let known = self
            .chunked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for (key, value) in writes {
            if known.contains_key(&key) {
                replaced.push(key.clone());
            }
            let kind = if value.len() <= PART_BYTES {
                Kind::Inline(value)
            } else {
                let n = self
                    .nonces
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // Unique across leaders too: a term's revision is never
                // reused, so two writers never share a nonce.
                let term = self
                    .term
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                    .map_or(0, |t| t.1);
                let nonce = format!("{term:x}-{n:x}");
                let chunks: Vec<&[u8]> = value.chunks(PART_BYTES).collect();
                for (i, c) in chunks.iter().enumerate() {
                    parts.push(Op::Put {
                        key: part_key(&key, &nonce, i),
                        value: c.to_vec(),
                    });
                }
                now_chunked.push((key.clone(), nonce.clone()));
                Kind::Parts(StoredParts {
                    nonce,
                    count: chunks.len() as u32,
                    length: value.len() as u64,
                    sha256: Sha256::digest(&value).to_vec(),
                })
            };
            heads.push(Op::Put {
                key,
                value: StoredValue { kind: Some(kind) }.encode_to_vec(),
            });
        }
        self.commit(parts).await?;
        self.commit(heads).await?;
        {
            let mut c = self.chunked.lock().unwrap_or_else(|p| p.into_inner());
            for k in &replaced {
                c.remove(k);
            }
            c.extend(now_chunked);
        }
        // Parts of values that were replaced: no head names them now.
        let mut stale = Vec::new();
        for key in replaced {
            let keep = self
                .chunked
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&key)
                .cloned();
            for (k, _) in self.store.list_keys(&parts_dir(&key)).await? {
                let nonce = k[parts_dir(&key).len()..].split('/').next();
                if nonce != keep.as_deref() {
                    stale.push(Op::Delete { key: k });
                }
            }
        }
        self.commit(stale).await
    }

    /// Removes `keys` and the parts of those stored in parts, fenced like
    /// every write.
    pub async fn remove(&self, keys: Vec<String>) -> Result<(), StoreError> {
        let r = async {
            let mut ops = Vec::new();
            for key in &keys {
                for (k, _) in self.store.list_keys(&parts_dir(key)).await? {
                    ops.push(Op::Delete { key: k });
                }
                ops.push(Op::Delete { key: key.clone() });
            }
            self.commit(ops).await?;
            let mut c = self.chunked.lock().unwrap_or_else(|p| p.into_inner());
            for key in &keys {
                c.remove(key);
            }
            Ok(())
        }
        .await;
        self.record("remove", r)
    }

    /// Applies `ops` in transactions within the store's limits, each
    /// fenced by the term when there is one.
    async fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        let term = self.term.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut batch = Vec::new();
        let mut bytes = 0;
        let mut batches = Vec::new();
        for op in ops {
            if !batch.is_empty()
                && (batch.len() >= MAX_TXN_OPS || bytes + op.size() > MAX_TXN_BYTES)
            {
                batches.push(std::mem::take(&mut batch));
                bytes = 0;
            }
            bytes += op.size();
            batch.push(op);
        }
        if !batch.is_empty() {
            batches.push(batch);
        }
        for b in batches {
            match &term {
                Some((election, term)) => {
                    self.store
                        .commit_fenced(b, election, *term)
                        .await?
                        .ok_or(StoreError::TermOver { term: *term })?;
                }
                // Unfenced (before any term: tools and tests): one write
                // at a time.
                None => {
                    for op in b {
                        match op {
                            Op::Put { key, value } => {
                                self.store.put(&key, value).await?;
                            }
                            Op::Delete { key } => {
                                self.store.delete(&key).await?;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Every key under `prefix` with its whole value, sorted by key.
    pub async fn load(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let r = self.load_inner(prefix).await;
        self.record("read", r)
    }

    async fn load_inner(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        use prost::Message;
        use proto::v1::{StoredValue, stored_value::Kind};
        use sha2::{Digest, Sha256};
        let mut out = Vec::new();
        // Keys first, then each value: one listing of large values would
        // not fit a response.
        for (key, _) in self.store.list_keys(prefix).await? {
            if key.starts_with(PARTS_PREFIX) {
                continue;
            }
            let Some((raw, _)) = self.store.get(&key).await? else {
                // Removed between the listing and the read.
                continue;
            };
            let corrupt = |detail: String| StoreError::Corrupt {
                key: key.clone(),
                detail,
            };
            let v = StoredValue::decode(raw.as_slice())
                .map_err(|e| corrupt(format!("undecodable: {e}")))?;
            let value = match v.kind {
                Some(Kind::Inline(b)) => {
                    self.chunked
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&key);
                    b
                }
                Some(Kind::Parts(p)) => {
                    if u64::from(p.count) > p.length.div_ceil(PART_BYTES as u64) + 1 {
                        return Err(corrupt(format!("{} parts for {} bytes", p.count, p.length)));
                    }
                    let mut value = Vec::with_capacity(p.length.min(1 << 30) as usize);
                    for i in 0..p.count as usize {
                        let pk = part_key(&key, &p.nonce, i);
                        let (b, _) = self
                            .store
                            .get(&pk)
                            .await?
                            .ok_or_else(|| corrupt(format!("part {pk} is missing")))?;
                        value.extend_from_slice(&b);
                    }
                    if value.len() as u64 != p.length
                        || Sha256::digest(&value).as_slice() != p.sha256
                    {
                        return Err(corrupt(
                            "the parts do not match the head's length and SHA-256".into(),
                        ));
                    }
                    self.chunked
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(key.clone(), p.nonce);
                    value
                }
                None => return Err(corrupt("empty value".into())),
            };
            out.push((key, value));
        }
        Ok(out)
    }

    /// Writes `key` outside any term: what a follower notes for the
    /// leader (it never holds a term).
    pub async fn note(&self, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        let r = self.store.put(key, value).await.map(|_| ());
        self.record("note", r)
    }

    /// The small values under `prefix` (notes), in one listing.
    pub async fn notes(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let r = self.store.list(prefix).await;
        Ok(self
            .record("reading notes", r)?
            .into_iter()
            .map(|e| (e.key, e.value))
            .collect())
    }

    /// Removes the notes under `prefix`.
    pub async fn forget(&self, prefix: &str) -> Result<(), StoreError> {
        for (k, _) in self.store.list_keys(prefix).await? {
            self.store.delete(&k).await?;
        }
        Ok(())
    }

    /// Removes parts that no loaded head names (left by a writer that
    /// stopped between its parts and its head); call after loading every
    /// prefix that may hold large values.
    pub async fn collect_parts(&self) -> Result<usize, StoreError> {
        let r = async {
            let keep = self
                .chunked
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let mut stale = Vec::new();
            for (k, _) in self.store.list_keys(PARTS_PREFIX).await? {
                // `parts/<key>/<nonce>/<index>`: the key may hold '/'.
                let named = k
                    .strip_prefix(PARTS_PREFIX)
                    .and_then(|rest| {
                        let mut it = rest.rsplitn(3, '/');
                        let (_index, nonce, key) = (it.next()?, it.next()?, it.next()?);
                        Some(keep.get(key).is_some_and(|n| n == nonce))
                    })
                    .unwrap_or(false);
                if !named {
                    stale.push(Op::Delete { key: k });
                }
            }
            let n = stale.len();
            self.commit(stale).await?;
            Ok(n)
        }
        .await;
        self.record("removing stale parts", r)
    }
}

fn parts_dir(key: &str) -> String {
    format!("{PARTS_PREFIX}{key}/")
}

fn part_key(key: &str, nonce: &str, i: usize) -> String {
    format!("{}{nonce}/{i:06}", parts_dir(key))
}
