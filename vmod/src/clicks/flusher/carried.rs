//! Clicks taken from the store and not yet tallied, in the queues they
//! were taken in, oldest first: the tally reads each where it lies, and
//! a queue read to its end goes back to the store to be filled again.

use std::collections::VecDeque;

use crate::clicks::click::{Click, Clicks};

#[derive(Default)]
pub(super) struct Carried {
    queues: VecDeque<Clicks>,
    /// The next click's place in the front queue.
    next: usize,
    /// Clicks not yet taken.
    len: usize,
    /// Queues read to their end, for the store to take back.
    emptied: Vec<Clicks>,
}

impl Carried {
    pub(super) fn extend(&mut self, taken: impl IntoIterator<Item = Clicks>) {
        for queue in taken {
            self.len += queue.len();
            self.queues.push_back(queue);
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The oldest click not yet taken, taken.
    pub(super) fn pop_front(&mut self) -> Option<Click<'_>> {
        self.drop_read();
        let index = self.next;
        let click = self.queues.front()?.get(index)?;
        self.next += 1;
        self.len -= 1;
        Some(click)
    }

    /// Every click not yet taken, taken.
    pub(super) fn drain(&mut self) -> impl Iterator<Item = Click<'_>> {
        let mut skip = std::mem::take(&mut self.next);
        self.len = 0;
        let from = self.emptied.len();
        self.emptied.extend(self.queues.drain(..));
        self.emptied[from..].iter().flat_map(move |queue| {
            let skipped = skip.min(queue.len());
            skip -= skipped;
            queue.iter().skip(skipped)
        })
    }

    /// The queues read to their end, taken; each still holds its clicks.
    pub(super) fn take_emptied(&mut self) -> Vec<Clicks> {
        self.drop_read();
        std::mem::take(&mut self.emptied)
    }

    /// Moves the queues read to their end out of the way.
    fn drop_read(&mut self) {
        while self
            .queues
            .front()
            .is_some_and(|front| self.next >= front.len())
        {
            self.emptied.extend(self.queues.pop_front());
            self.next = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clicks::click::Outcome;

    fn queue(keys: &[&str]) -> Clicks {
        keys.iter()
            .map(|key| Click::new(Outcome::Redirect, false, None, key, "", None, None).unwrap())
            .collect()
    }

    fn keys<'c>(clicks: impl Iterator<Item = Click<'c>>) -> Vec<String> {
        clicks.map(|click| click.key().to_owned()).collect()
    }

    /// Clicks come out in the order taken, across queues, and each queue
    /// read to its end is handed back once.
    #[test]
    fn clicks_come_out_in_order_and_read_queues_go_back() {
        let mut carried = Carried::default();
        carried.extend([queue(&["a1", "a2"]), Clicks::default(), queue(&["b1"])]);
        carried.extend([queue(&["c1", "c2"]), queue(&["d1"])]);
        assert_eq!(carried.len(), 6);
        let mut out = Vec::new();
        for _ in 0..3 {
            out.push(carried.pop_front().unwrap().key().to_owned());
        }
        assert_eq!(out, ["a1", "a2", "b1"]);
        assert_eq!(carried.len(), 3);
        assert_eq!(carried.take_emptied().len(), 3, "a, the empty one and b");
        assert!(carried.take_emptied().is_empty(), "each once");
        assert_eq!(carried.pop_front().unwrap().key(), "c1");
        assert_eq!(
            keys(carried.drain()),
            ["c2", "d1"],
            "the rest, from where it was"
        );
        assert!(carried.is_empty());
        assert!(carried.pop_front().is_none());
        assert_eq!(carried.take_emptied().len(), 2, "c and d");
    }
}
