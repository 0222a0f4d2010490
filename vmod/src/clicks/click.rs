//! A click as the request path hands it over ([`Click`], borrowed from the
//! request), and clicks as a queue holds them ([`Clicks`]): their fixed
//! parts in one vector, their texts one after another in one buffer. So
//! recording a click allocates nothing (a queue's buffers keep their room
//! from one flush to the next), and the flusher frees nothing per click:
//! when each click had a text of its own, freeing on the flusher's thread
//! what the workers' threads had allocated was a quarter of its time.

use std::net::IpAddr;

use shortlink_core::clicks::visits::VisitKind;
use shortlink_core::clicks::ClickTime;
use shortlink_core::rules::Chosen;

/// Most bytes of a user agent kept: enough to classify any real one (uap's
/// rules match near the start; browsers send 100 to 200 bytes), and it
/// keeps a click's text, with a key and a referrer host, under 800 bytes.
pub const AGENT_MAX: usize = 256;

/// What a counted answer was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The link's redirect.
    Redirect,
    /// The redirect of a link with a click limit: its clicks are also held
    /// as pending until Redis has them (see
    /// [`ClickStore::pending`](super::ClickStore::pending)).
    Limited,
    /// A 410, or an expired link's redirect to its fallback.
    Gone,
    /// An orphan visit (its key is the path asked): counted and logged
    /// for its domain, never for a link.
    Orphan(VisitKind),
}

/// One answer: what the request path records, and what the flusher reads
/// back out of a queue, borrowing its text from wherever it lies.
#[derive(Debug, Clone, Copy)]
pub struct Click<'t> {
    /// When, in Unix microseconds: visits sort by it (see [`Click::at`]).
    pub at_us: u64,
    pub outcome: Outcome,
    /// `HEAD` requests are counted as bots: people's browsers `GET`.
    pub head: bool,
    pub client: Option<IpAddr>,
    key: &'t str,
    user_agent: &'t str,
    /// The referrer's host; empty for none.
    referrer: &'t str,
    /// The target a link with rules or a split sent it to, packed (see
    /// [`pack_target`]).
    target: u8,
}

/// Microseconds since the Unix epoch (0 before it).
fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// `target` in a byte: 0 for none, rules from 1, split targets from 65,
/// 255 for the link's own URL.
fn pack_target(target: Option<Chosen>) -> u8 {
    let number = |n: usize, base: u8| u8::try_from(n).map_or(0, |n| base.saturating_add(n));
    match target {
        None => 0,
        Some(Chosen::Rule(n)) => number(n, 0),
        Some(Chosen::Split(n)) => number(n, 64),
        Some(Chosen::Url) => 255,
    }
}

fn unpack_target(byte: u8) -> Option<Chosen> {
    match byte {
        0 => None,
        255 => Some(Chosen::Url),
        1..=64 => Some(Chosen::Rule(usize::from(byte))),
        _ => Some(Chosen::Split(usize::from(byte - 64))),
    }
}

impl<'t> Click<'t> {
    /// The click, its user agent cut to [`AGENT_MAX`] bytes; `None` for a
    /// key or referrer host longer than a queue keeps (255 bytes and 64
    /// KiB: the rules allow far shorter ones).
    pub fn new(
        outcome: Outcome,
        head: bool,
        client: Option<IpAddr>,
        key: &'t str,
        user_agent: &'t str,
        referrer_host: Option<&'t str>,
        target: Option<Chosen>,
    ) -> Option<Self> {
        let referrer = referrer_host.unwrap_or_default();
        u8::try_from(key.len()).ok()?;
        u16::try_from(referrer.len()).ok()?;
        let mut cut = user_agent.len().min(AGENT_MAX);
        while !user_agent.is_char_boundary(cut) {
            cut -= 1;
        }
        Some(Self {
            at_us: now_us(),
            outcome,
            head,
            client,
            key,
            user_agent: &user_agent[..cut],
            referrer,
            target: pack_target(target),
        })
    }

    /// When, in whole seconds, as the counts' buckets see it.
    pub fn at(&self) -> ClickTime {
        ClickTime(self.at_us / 1_000_000)
    }

    /// The target a link with rules or a split sent this click to.
    pub fn target(&self) -> Option<Chosen> {
        unpack_target(self.target)
    }

    /// What the click takes in a queue: its fixed part and its text, twice
    /// (a queue's vector and buffer grow by doubling, so up to half of
    /// each is room not yet used): at most 1,624 bytes. The queues' bound
    /// ([`CountSettings::queue_bytes`](super::CountSettings::queue_bytes))
    /// counts this.
    pub fn bytes(&self) -> usize {
        2 * (size_of::<Stored>() + self.text_len())
    }

    fn text_len(&self) -> usize {
        self.key.len() + self.user_agent.len() + self.referrer.len()
    }

    pub fn key(&self) -> &'t str {
        self.key
    }

    pub fn user_agent(&self) -> &'t str {
        self.user_agent
    }

    /// The referrer's host, or `None` for a click without one.
    pub fn referrer(&self) -> Option<&'t str> {
        (!self.referrer.is_empty()).then_some(self.referrer)
    }
}

/// A click in a queue but its text, which starts at `start` in the queue's
/// buffer: key, user agent, referrer host.
#[derive(Debug, Clone)]
struct Stored {
    at_us: u64,
    client: Option<IpAddr>,
    start: usize,
    referrer_len: u16,
    agent_len: u16,
    key_len: u8,
    outcome: Outcome,
    head: bool,
    target: u8,
}

/// Clicks as a queue holds them, in the order recorded.
#[derive(Debug, Default)]
#[cfg_attr(test, derive(Clone))]
pub struct Clicks {
    stored: Vec<Stored>,
    text: String,
}

impl Clicks {
    pub fn push(&mut self, click: &Click<'_>) {
        let start = self.text.len();
        self.text.push_str(click.key);
        self.text.push_str(click.user_agent);
        self.text.push_str(click.referrer);
        self.stored.push(Stored {
            at_us: click.at_us,
            client: click.client,
            start,
            // Within bounds: `Click::new` refused longer ones.
            referrer_len: u16::try_from(click.referrer.len()).unwrap_or(u16::MAX),
            agent_len: u16::try_from(click.user_agent.len()).unwrap_or(u16::MAX),
            key_len: u8::try_from(click.key.len()).unwrap_or(u8::MAX),
            outcome: click.outcome,
            head: click.head,
            target: click.target,
        });
    }

    pub fn len(&self) -> usize {
        self.stored.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stored.is_empty()
    }

    /// The click at `index` in the order recorded.
    pub fn get(&self, index: usize) -> Option<Click<'_>> {
        let stored = self.stored.get(index)?;
        let key_end = stored.start + usize::from(stored.key_len);
        let agent_end = key_end + usize::from(stored.agent_len);
        let referrer_end = agent_end + usize::from(stored.referrer_len);
        Some(Click {
            at_us: stored.at_us,
            outcome: stored.outcome,
            head: stored.head,
            client: stored.client,
            key: self.text.get(stored.start..key_end)?,
            user_agent: self.text.get(key_end..agent_end)?,
            referrer: self.text.get(agent_end..referrer_end)?,
            target: stored.target,
        })
    }

    pub fn iter(&self) -> impl Iterator<Item = Click<'_>> {
        (0..self.len()).filter_map(|index| self.get(index))
    }

    /// Empties the queue, its room kept.
    pub fn clear(&mut self) {
        self.stored.clear();
        self.text.clear();
    }

    /// Bytes of room the queue holds, used or not.
    pub fn room(&self) -> usize {
        self.stored.capacity() * size_of::<Stored>() + self.text.capacity()
    }
}

impl<'t> FromIterator<Click<'t>> for Clicks {
    fn from_iter<I: IntoIterator<Item = Click<'t>>>(clicks: I) -> Self {
        let mut queue = Self::default();
        for click in clicks {
            queue.push(&click);
        }
        queue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_click_keeps_its_parts_apart() {
        let click = Click::new(
            Outcome::Redirect,
            false,
            None,
            "Lm25",
            "Firefox",
            Some("example.org"),
            None,
        )
        .unwrap();
        assert_eq!(
            (click.key(), click.user_agent(), click.referrer()),
            ("Lm25", "Firefox", Some("example.org"))
        );
        let long_agent = "é".repeat(AGENT_MAX);
        let click = Click::new(Outcome::Gone, true, None, "Lm25", &long_agent, None, None).unwrap();
        assert!(click.user_agent().len() <= AGENT_MAX);
        assert_eq!(click.referrer(), None);
    }

    #[test]
    fn keys_and_referrers_past_a_queues_fields_are_refused() {
        let key = "K".repeat(256);
        assert!(Click::new(Outcome::Redirect, false, None, &key, "", None, None).is_none());
        let referrer = "r".repeat(usize::from(u16::MAX) + 1);
        let refused = Click::new(
            Outcome::Redirect,
            false,
            None,
            "Lm25",
            "",
            Some(&referrer),
            None,
        );
        assert!(refused.is_none());
    }

    /// Clicks come back out of a queue as they went in, each with its own
    /// parts, whatever their lengths.
    #[test]
    fn a_queue_gives_back_each_click_whole() {
        let agents = ["Firefox", "", "curl/8.0"];
        let referrers = [Some("example.org"), None, Some("a.example")];
        let keys: Vec<String> = (0..3).map(|n| format!("Key{}", "x".repeat(n))).collect();
        let targets = [None, Some(Chosen::Rule(3)), Some(Chosen::Split(2))];
        let clicks: Vec<Click> = (0..3)
            .map(|n| {
                let client = Some(IpAddr::from([192, 0, 2, u8::try_from(n).unwrap()]));
                let outcome = [Outcome::Redirect, Outcome::Limited, Outcome::Gone][n];
                Click::new(
                    outcome,
                    n == 1,
                    client,
                    &keys[n],
                    agents[n],
                    referrers[n],
                    targets[n],
                )
                .unwrap()
            })
            .collect();
        let queue: Clicks = clicks.iter().copied().collect();
        assert_eq!(queue.len(), 3);
        for (given, back) in clicks.iter().zip(queue.iter()) {
            assert_eq!(
                (
                    given.key(),
                    given.user_agent(),
                    given.referrer(),
                    given.target()
                ),
                (
                    back.key(),
                    back.user_agent(),
                    back.referrer(),
                    back.target()
                )
            );
            assert_eq!(
                (given.at_us, given.outcome, given.head, given.client),
                (back.at_us, back.outcome, back.head, back.client)
            );
        }
        assert!(queue.get(3).is_none());
        let mut queue = queue;
        let room = queue.room();
        queue.clear();
        assert!(queue.is_empty());
        assert_eq!(queue.room(), room, "emptied, its room kept");
    }
}
