//! What a client of a Redis Cluster must know itself: which slot a key is
//! in, which node serves each slot, and what a redirect says.

use redis::{ErrorKind, RedisError, RedisResult};

use crate::target::Address;

/// Slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// The slot of `key`: CRC16 of its hash tag (the text inside its first
/// `{...}`, if not empty) or of the whole key, as Redis Cluster computes it.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&byte| byte == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&byte| byte == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(tagged) % SLOTS
}

/// A short text whose slot is `slot`: `{tag}` in a key's name puts the key
/// in that slot, as a flush of click counts needs one name in each slot it
/// writes to. The same tag for a slot in every process and version: the
/// first of the names `0`, `1`, ... `z`, `00`, ... (base 36) found in it.
pub fn slot_tag(slot: u16) -> &'static str {
    static TAGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let mut tags = vec![String::new(); usize::from(SLOTS)];
        let mut missing = tags.len();
        let mut n: u64 = 0;
        while missing > 0 {
            let tag = base36(n);
            let found = &mut tags[usize::from(key_slot(tag.as_bytes()))];
            if found.is_empty() {
                *found = tag;
                missing -= 1;
            }
            n += 1;
        }
        tags
    });
    &tags[usize::from(slot % SLOTS)]
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut digits = Vec::new();
    loop {
        digits.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

/// Which node serves each slot, as a node last said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotMap {
    nodes: Vec<Address>,
    /// An index into `nodes` per slot; `u16::MAX` for a slot no node serves.
    owners: Vec<u16>,
}

const UNSERVED: u16 = u16::MAX;

impl SlotMap {
    /// The node serving `slot`, if any.
    pub fn node(&self, slot: u16) -> Option<&Address> {
        self.owners
            .get(usize::from(slot))
            .and_then(|&owner| self.nodes.get(usize::from(owner)))
    }

    /// The primaries, each once.
    pub fn nodes(&self) -> &[Address] {
        &self.nodes
    }

    /// Each primary that serves a slot, with the first slot it serves: a
    /// command routed by that slot reaches that primary.
    pub fn primaries_by_slot(&self) -> Vec<(Address, u16)> {
        let mut found: Vec<(Address, u16)> = Vec::new();
        for (slot, &owner) in (0..SLOTS).zip(&self.owners) {
            if let Some(node) = self.nodes.get(usize::from(owner)) {
                if !found.iter().any(|(known, _)| known == node) {
                    found.push((node.clone(), slot));
                }
            }
        }
        found
    }

    /// Takes what a `MOVED` reply says: `slot` is served by `node` now.
    pub fn moved(&mut self, slot: u16, node: &Address) {
        let index = self.index_of(node);
        if let Some(owner) = self.owners.get_mut(usize::from(slot)) {
            *owner = index;
        }
    }

    fn index_of(&mut self, node: &Address) -> u16 {
        if let Some(index) = self.nodes.iter().position(|known| known == node) {
            return u16::try_from(index).unwrap_or(UNSERVED);
        }
        self.nodes.push(node.clone());
        u16::try_from(self.nodes.len() - 1).unwrap_or(UNSERVED)
    }

    /// Reads a `CLUSTER SLOTS` reply from the node at `asked` (which a
    /// node may name by an empty or unknown host: "the one you asked").
    pub fn from_cluster_slots(reply: &redis::Value, asked: &Address) -> RedisResult<Self> {
        let mut map = Self {
            nodes: Vec::new(),
            owners: vec![UNSERVED; usize::from(SLOTS)],
        };
        let redis::Value::Array(ranges) = reply else {
            return Err(bad_reply("CLUSTER SLOTS", reply));
        };
        for range in ranges {
            let redis::Value::Array(fields) = range else {
                return Err(bad_reply("CLUSTER SLOTS", range));
            };
            let (Some(first), Some(last), Some(redis::Value::Array(primary))) =
                (fields.first(), fields.get(1), fields.get(2))
            else {
                return Err(bad_reply("CLUSTER SLOTS", range));
            };
            let (first, last) = (slot_number(first)?, slot_number(last)?);
            let host = match primary.first() {
                Some(redis::Value::BulkString(host)) if !host.is_empty() && host != b"?" => {
                    String::from_utf8_lossy(host).into_owned()
                }
                _ => asked.host.clone(),
            };
            let port = match primary.get(1) {
                Some(redis::Value::Int(port)) => {
                    u16::try_from(*port).map_err(|_| bad_reply("CLUSTER SLOTS", range))?
                }
                _ => return Err(bad_reply("CLUSTER SLOTS", range)),
            };
            let index = map.index_of(&Address { host, port });
            for slot in first..=last.min(SLOTS - 1) {
                map.owners[usize::from(slot)] = index;
            }
        }
        Ok(map)
    }
}

fn slot_number(value: &redis::Value) -> RedisResult<u16> {
    match value {
        redis::Value::Int(slot) => {
            u16::try_from(*slot).map_err(|_| bad_reply("CLUSTER SLOTS", value))
        }
        other => Err(bad_reply("CLUSTER SLOTS", other)),
    }
}

fn bad_reply(command: &str, value: &redis::Value) -> RedisError {
    RedisError::from((
        ErrorKind::Parse,
        "unexpected reply",
        format!("{command} answered {value:?}"),
    ))
}

/// What a cluster node's error reply tells the client to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// `MOVED slot host:port`: the slot lives there now; ask there.
    Moved { slot: u16, node: Address },
    /// `ASK slot host:port`: this key is being migrated there; ask there
    /// once, after `ASKING`.
    Ask { slot: u16, node: Address },
    /// `TRYAGAIN`: the keys of a call are split by a migration; try later.
    TryAgain,
}

impl Redirect {
    /// The redirect an error reply from the node at `answered` carries, if
    /// any. Redis writes the node as `host:port` with no brackets around
    /// an IPv6 host, and with no host at all when it does not know its
    /// own: then it is `answered`'s.
    pub fn of(error: &redis::ServerError, answered: &Address) -> Option<Self> {
        let code = error.code();
        if code == "TRYAGAIN" {
            return Some(Self::TryAgain);
        }
        let (slot, node) = error.details()?.split_once(' ')?;
        let slot = slot.parse().ok()?;
        let (host, port) = node.trim().rsplit_once(':')?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let node = Address {
            host: if host.is_empty() {
                answered.host.clone()
            } else {
                host.to_owned()
            },
            port: port.parse().ok().filter(|&port| port != 0)?,
        };
        match code {
            "MOVED" => Some(Self::Moved { slot, node }),
            "ASK" => Some(Self::Ask { slot, node }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{key_slot, slot_tag, Redirect, SlotMap, SLOTS};
    use crate::Address;

    fn address(host: &str, port: u16) -> Address {
        Address {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn slots_are_those_redis_computes() {
        // As `CLUSTER KEYSLOT` answers.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        // An empty tag is no tag: the whole key counts.
        assert_eq!(key_slot(b"{}x"), 10595);
        assert_ne!(key_slot(b"{}x"), key_slot(b""));
    }

    #[test]
    fn redirects_are_read_from_error_replies() {
        let error = |text: &[u8]| match redis::parse_redis_value(text).unwrap() {
            redis::Value::ServerError(error) => error,
            other => panic!("{other:?}"),
        };
        let answered = address("10.0.0.5", 7005);
        let of = |text: &[u8]| Redirect::of(&error(text), &answered);
        assert_eq!(
            of(b"-MOVED 3999 127.0.0.1:6381\r\n"),
            Some(Redirect::Moved {
                slot: 3999,
                node: address("127.0.0.1", 6381)
            })
        );
        // IPv6 as Redis writes it, without brackets.
        assert_eq!(
            of(b"-ASK 12 ::1:7000\r\n"),
            Some(Redirect::Ask {
                slot: 12,
                node: address("::1", 7000)
            })
        );
        // A node that does not know its own address names none.
        assert_eq!(
            of(b"-MOVED 7 :7001\r\n"),
            Some(Redirect::Moved {
                slot: 7,
                node: address("10.0.0.5", 7001)
            })
        );
        assert_eq!(
            of(b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"),
            Some(Redirect::TryAgain)
        );
        assert_eq!(of(b"-WRONGTYPE not a hash\r\n"), None);
        assert_eq!(of(b"-MOVED 7 10.0.0.1:0\r\n"), None);
    }

    #[test]
    fn a_slot_map_is_read_from_cluster_slots() {
        let node = |host: &str, port: i64| {
            redis::Value::Array(vec![
                redis::Value::BulkString(host.as_bytes().to_vec()),
                redis::Value::Int(port),
                redis::Value::BulkString(b"id".to_vec()),
            ])
        };
        let range = |first: i64, last: i64, primary| {
            redis::Value::Array(vec![
                redis::Value::Int(first),
                redis::Value::Int(last),
                primary,
            ])
        };
        let reply = redis::Value::Array(vec![
            range(0, 5460, node("10.0.0.1", 7000)),
            range(5461, 10922, node("", 7001)),
            range(10923, 16383, node("10.0.0.1", 7000)),
        ]);
        let asked = address("10.0.0.9", 7009);
        let mut map = SlotMap::from_cluster_slots(&reply, &asked).unwrap();
        assert_eq!(map.node(0), Some(&address("10.0.0.1", 7000)));
        assert_eq!(map.node(5461), Some(&address("10.0.0.9", 7001)));
        assert_eq!(map.node(16383), Some(&address("10.0.0.1", 7000)));
        assert_eq!(map.nodes().len(), 2);
        assert_eq!(
            map.primaries_by_slot(),
            [
                (address("10.0.0.1", 7000), 0),
                (address("10.0.0.9", 7001), 5461)
            ]
        );
        map.moved(16383, &address("10.0.0.2", 7002));
        assert_eq!(map.node(16383), Some(&address("10.0.0.2", 7002)));
        assert_eq!(map.node(16382), Some(&address("10.0.0.1", 7000)));
        let partial = redis::Value::Array(vec![range(0, 10, node("h", 1))]);
        assert_eq!(
            SlotMap::from_cluster_slots(&partial, &asked)
                .unwrap()
                .node(11),
            None
        );
    }

    #[test]
    fn every_slot_has_a_short_tag_of_its_own() {
        for slot in 0..SLOTS {
            let tag = slot_tag(slot);
            assert_eq!(key_slot(tag.as_bytes()), slot, "{tag}");
            assert_eq!(
                key_slot(format!("short:applied:{{{tag}}}").as_bytes()),
                slot
            );
            assert!(tag.len() <= 4, "{tag}");
        }
        assert_eq!(slot_tag(0), slot_tag(SLOTS), "slots wrap");
    }
}
