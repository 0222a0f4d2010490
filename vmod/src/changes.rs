//! Links announced as changed while lookups of them were under way.
//!
//! Varnish's purge skips an object that is still being fetched. Without
//! this, a lookup whose `HGET` read a link just before the writer changed
//! it could finish after the writer's PURGE and put the old answer in the
//! cache for a whole TTL, although the writer had already told its client
//! the change was live. So the VCL notes each PURGE here, and a lookup sent
//! before a note for its key reads the link again.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a note is kept: far longer than any lookup can take (a lookup
/// fails after its command timeout).
const KEEP: Duration = Duration::from_mins(1);

#[derive(Debug, Default)]
pub struct Changes {
    /// Notes taken so far; a lookup reads it before its `HGET`.
    taken: AtomicU64,
    recent: Mutex<Recent>,
}

/// The notes of the last [`KEEP`]: each key's latest number, and every note
/// in the order taken, so that dropping the old ones looks only at them
/// (a writer inserting thousands of links a second notes as many keys).
#[derive(Debug, Default)]
struct Recent {
    latest: HashMap<String, u64>,
    in_order: VecDeque<Note>,
}

#[derive(Debug)]
struct Note {
    number: u64,
    at: Instant,
    key: String,
}

/// Where the notes stood when a lookup was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark(u64);

impl Changes {
    /// Taken just before a lookup of a key is sent.
    pub fn mark(&self) -> Mark {
        Mark(self.taken.load(Ordering::Acquire))
    }

    /// Notes that `key` changed (its PURGE arrived).
    pub fn note(&self, key: &str) {
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        // Numbered under the lock, so a note's number and its entry appear
        // together to `changed_since`.
        let number = self.taken.fetch_add(1, Ordering::AcqRel) + 1;
        let now = Instant::now();
        let recent = &mut *recent;
        while let Some(oldest) = recent
            .in_order
            .pop_front_if(|oldest| now.duration_since(oldest.at) >= KEEP)
        {
            // A later note of the same key stays.
            if recent.latest.get(&oldest.key) == Some(&oldest.number) {
                recent.latest.remove(&oldest.key);
            }
        }
        recent.latest.insert(key.to_owned(), number);
        recent.in_order.push_back(Note {
            number,
            at: now,
            key: key.to_owned(),
        });
    }

    /// Whether `key` was noted as changed after `mark` was taken.
    pub fn changed_since(&self, key: &str, mark: Mark) -> bool {
        // No note at all since the mark: the common case, without the lock.
        if self.taken.load(Ordering::Acquire) == mark.0 {
            return false;
        }
        self.recent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .latest
            .get(key)
            .is_some_and(|&number| number > mark.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_note_of_the_same_key_after_the_mark_counts() {
        let changes = Changes::default();
        changes.note("Lm25");
        let mark = changes.mark();
        assert!(
            !changes.changed_since("Lm25", mark),
            "noted before the mark"
        );
        changes.note("Other");
        assert!(!changes.changed_since("Lm25", mark), "another key");
        changes.note("Lm25");
        assert!(changes.changed_since("Lm25", mark));
        assert!(!changes.changed_since("Lm25", changes.mark()));
    }

    #[test]
    fn old_notes_are_dropped_and_recent_ones_kept() {
        let changes = Changes::default();
        let mark = changes.mark();
        for n in 0..3000 {
            changes.note(&format!("key{n}"));
        }
        changes.note("key1");
        // Every note is recent: none may be dropped.
        assert!(changes.changed_since("key0", mark));
        let stale = Instant::now().checked_sub(KEEP * 2).unwrap();
        {
            let mut recent = changes.recent.lock().unwrap();
            // All but the latest note (key1's second) are old.
            let last = recent.in_order.len() - 1;
            for note in recent.in_order.iter_mut().take(last) {
                note.at = stale;
            }
        }
        changes.note("fresh");
        let recent = changes.recent.lock().unwrap();
        let mut kept: Vec<&str> = recent.latest.keys().map(String::as_str).collect();
        kept.sort_unstable();
        assert_eq!(kept, ["fresh", "key1"], "only the recent notes are kept");
        assert_eq!(recent.in_order.len(), 2);
    }
}
