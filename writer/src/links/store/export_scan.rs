//! Every link (or one owner's), read for an export a page at a time:
//! `SCAN` and `HSCAN` over the link hashes, or `LRANGE` over an index; one
//! domain's store at a time, chained into one export.

use std::collections::{HashSet, VecDeque};

use crate::redis::master::Connection;
use shortlink_core::{Key, KeyScheme, Owner, Stored};

use super::{Link, LinkStore, StoreError};

impl LinkStore {
    /// Every link in the store, a page at a time (see [`Export`]).
    pub async fn export_all(&self) -> Result<Export, StoreError> {
        let nodes = match &self.connection.get()? {
            Connection::Cluster(cluster) => {
                cluster.primaries().await?.into_iter().map(Some).collect()
            }
            Connection::Master(_) => vec![None],
        };
        Ok(Export::of(Part {
            store: self.clone(),
            from: ExportFrom::Hashes(HashWalk {
                nodes,
                ..HashWalk::default()
            }),
        }))
    }

    /// `owner`'s links (those in its index), oldest first, a page at a time.
    pub fn export_owned(&self, owner: Option<&Owner>) -> Export {
        Export::of(Part {
            store: self.clone(),
            from: ExportFrom::Index {
                index: self.scheme.index(owner),
                owner: owner.cloned(),
                position: 0,
            },
        })
    }
}

/// Links read for an export, a page at a time: however many there are,
/// only one page is held.
pub struct Export {
    /// What is left to read, in order.
    parts: VecDeque<Part>,
}

/// One domain's links, or one owner's of one domain.
struct Part {
    store: LinkStore,
    from: ExportFrom,
}

/// Entries (hash fields or index positions) one export page reads.
const EXPORT_PAGE: usize = 1000;

enum ExportFrom {
    /// Every link hash: links written by hand too, whoever owns them.
    Hashes(HashWalk),
    /// One owner's index, oldest first.
    Index {
        index: String,
        /// Whose links: an entry whose link says otherwise is left out.
        owner: Option<Owner>,
        position: usize,
    },
}

/// Every link hash, found by `SCAN` on each primary in turn, each read
/// with `HSCAN`.
#[derive(Default)]
struct HashWalk {
    /// A slot of each primary still to scan (`None`: the one server).
    nodes: Vec<Option<u16>>,
    /// Where `SCAN` goes on on the last of `nodes`; 0 before it starts.
    scan_cursor: u64,
    /// Link hashes found and not read yet.
    hashes: VecDeque<String>,
    /// Every hash found so far: `SCAN` may name one twice. At most
    /// 64^split names, however many links.
    found: HashSet<String>,
    /// The hash being read, and where `HSCAN` goes on in it.
    reading: Option<(String, u64)>,
    /// The fields of that hash given out, when it takes more than one
    /// `HSCAN` (a hash past the compact encoding): `HSCAN` may name one
    /// twice too.
    given: HashSet<String>,
}

impl Export {
    fn of(part: Part) -> Self {
        Self {
            parts: VecDeque::from([part]),
        }
    }

    /// `exports` one after the other (several domains', say).
    pub fn chain(exports: impl IntoIterator<Item = Export>) -> Self {
        Self {
            parts: exports
                .into_iter()
                .flat_map(|export| export.parts)
                .collect(),
        }
    }

    /// The next page of links (deleted ones left out), `None` once done.
    /// A page may be empty while more follow.
    pub async fn next_page(&mut self) -> Result<Option<Vec<Link>>, StoreError> {
        let Some(part) = self.parts.front_mut() else {
            return Ok(None);
        };
        if let Some(links) = part.next_page().await? {
            return Ok(Some(links));
        }
        self.parts.pop_front();
        Ok(Some(Vec::new()))
    }
}

impl Part {
    async fn next_page(&mut self) -> Result<Option<Vec<Link>>, StoreError> {
        let mut connection = self.store.connection.get()?;
        match &mut self.from {
            ExportFrom::Index {
                index,
                owner,
                position,
            } => {
                let keys: Vec<String> = redis::cmd("LRANGE")
                    .arg(&*index)
                    .arg(*position)
                    .arg(*position + EXPORT_PAGE - 1)
                    .query_async(&mut connection)
                    .await?;
                if keys.is_empty() {
                    return Ok(None);
                }
                *position += keys.len();
                let keys: Vec<Key> = keys
                    .iter()
                    .filter_map(|key| self.store.scheme.key(key).ok())
                    .collect();
                let values = self.store.values_of(&mut connection, &keys).await?;
                Ok(Some(
                    keys.into_iter()
                        .zip(values)
                        .filter_map(|(key, value)| link_of(&self.store, key.to_string(), &value?))
                        .filter(|link| link.record.owner == *owner)
                        .collect(),
                ))
            }
            ExportFrom::Hashes(walk) => {
                if walk.reading.is_none() {
                    walk.reading = walk.hashes.pop_front().map(|hash| (hash, 0));
                }
                if walk.reading.is_some() {
                    return walk.read_hash(&self.store, &mut connection).await.map(Some);
                }
                if walk.nodes.is_empty() {
                    return Ok(None);
                }
                walk.scan(&self.store.scheme, &mut connection).await?;
                Ok(Some(Vec::new()))
            }
        }
    }
}

impl HashWalk {
    /// The next page of the hash being read.
    async fn read_hash(
        &mut self,
        store: &LinkStore,
        connection: &mut Connection,
    ) -> Result<Vec<Link>, StoreError> {
        let scheme = &store.scheme;
        let Some((hash, cursor)) = self.reading.take() else {
            return Ok(Vec::new());
        };
        let (next, entries): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
            .arg(&hash)
            .arg(cursor)
            .arg("COUNT")
            .arg(EXPORT_PAGE)
            .query_async(connection)
            .await?;
        let head = hash.strip_prefix(scheme.prefix()).unwrap_or_default();
        let whole = cursor == 0 && next == 0;
        let given = &mut self.given;
        let links = entries
            .into_iter()
            .filter(|(field, _)| whole || given.insert(field.clone()))
            .filter_map(
                |(field, value)| match scheme.key(&format!("{head}{field}")) {
                    Ok(key) => link_of(store, key.to_string(), &value),
                    Err(error) => {
                        log::warn!("export: {head}{field:?} is no key ({error}); left out");
                        None
                    }
                },
            )
            .collect();
        if next == 0 {
            self.given.clear();
        } else {
            self.reading = Some((hash, next));
        }
        Ok(links)
    }

    /// Finds more link hashes on the primary being scanned.
    async fn scan(
        &mut self,
        scheme: &KeyScheme,
        connection: &mut Connection,
    ) -> Result<(), StoreError> {
        let Some(&node) = self.nodes.last() else {
            return Ok(());
        };
        let pattern = format!(
            "{}{}",
            glob_escape(scheme.prefix()),
            "?".repeat(scheme.split())
        );
        let mut scan = redis::cmd("SCAN");
        scan.arg(self.scan_cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(EXPORT_PAGE)
            .arg("TYPE")
            .arg("hash");
        let (next, names): (u64, Vec<String>) = match (&*connection, node) {
            (Connection::Cluster(cluster), Some(slot)) => {
                cluster.on_primary_of(slot, &scan).await?
            }
            _ => scan.query_async(connection).await?,
        };
        let found = &mut self.found;
        self.hashes.extend(
            names
                .into_iter()
                .filter(|name| is_link_hash(scheme, name) && found.insert(name.clone())),
        );
        if next == 0 {
            self.nodes.pop();
        }
        self.scan_cursor = next;
        Ok(())
    }
}

/// Whether `name`, found by the pattern of `scheme`'s hashes, is one: a
/// `?` of the pattern matches `:` too, and a name with a `:` after the
/// prefix belongs to another domain's key space (or to click counts).
fn is_link_hash(scheme: &KeyScheme, name: &str) -> bool {
    name.strip_prefix(scheme.prefix())
        .is_some_and(|head| !head.contains([':', '@']))
}

/// The link `value` stores under `key`; `None` for a deleted link, and for
/// a value that is no link (logged: fix it with redis-cli).
fn link_of(store: &LinkStore, key: String, value: &str) -> Option<Link> {
    match Stored::parse(value) {
        Ok(Stored::Link(record)) => Some(store.link(key, record)),
        Ok(Stored::Deleted) => None,
        Err(error) => {
            log::warn!("export: {key:?} holds no link ({error}); left out");
            None
        }
    }
}

/// `text` as a `SCAN` pattern that matches it alone.
fn glob_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use shortlink_core::DomainName;

    #[test]
    fn a_domain_scan_takes_its_own_hashes_alone() {
        let default = KeyScheme::default();
        let go = default.for_domain(&DomainName::try_from("go.example").unwrap());
        assert!(is_link_hash(&default, "short:Lm"));
        // Another domain's hash, or a name a `?` matched with its `:`.
        assert!(!is_link_hash(&default, "short:go.example:Lm"));
        assert!(!is_link_hash(&default, "short:a:"));
        assert!(!is_link_hash(&default, "short:@a"));
        assert!(is_link_hash(&go, "short:go.example:Lm"));
        assert!(!is_link_hash(&go, "short:Lm"));
    }
}
