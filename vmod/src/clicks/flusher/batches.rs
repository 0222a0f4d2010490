//! Batches and replies: a sealed batch as it waits for Redis, the tallies
//! and lane numbers it counts for, and what a node's replies say of the
//! batches sent to it.

use std::collections::HashMap;

use super::args::Args;
use crate::clicks::destination::Lane;
use crate::clicks::store::CountSettings;

/// A sealed batch: sent as it is until Redis answers for it.
pub(super) struct Batch {
    pub(super) lane: Lane,
    /// Its number in its lane, from 1: Redis applies a lane's batches in
    /// this order, each once.
    pub(super) seq: u64,
    /// The hash noting the lane's last applied batch (`KEYS[1]`).
    pub(super) applied: String,
    /// The keys its operations write (`KEYS[2]...`).
    pub(super) keys: Vec<String>,
    pub(super) args: Args,
    pub(super) entries: usize,
    /// The tally it was sealed from.
    pub(super) tally: u64,
}

/// A sealed tally: its clicks count as flushed, and its limited clicks are
/// settled, once Redis has applied all its batches.
pub(super) struct SealedTally {
    pub(super) batches: usize,
    pub(super) clicks: u64,
    pub(super) limited: HashMap<Box<str>, u64>,
}

/// A lane's numbers: the last batch sealed, and the last Redis applied.
#[derive(Default, Clone, Copy)]
pub(super) struct LaneNumbers {
    pub(super) sealed: u64,
    pub(super) applied: u64,
}

/// A node's share of a flush: batches (indices into the sealed ones), and
/// whether the heartbeat goes there too.
#[derive(Default)]
pub(super) struct Share {
    pub(super) batches: Vec<usize>,
    pub(super) beat: bool,
}

/// What Redis said of one batch.
pub(super) enum Answer {
    /// Applied now, or before.
    Applied,
    /// Its lane's batch before it is not applied yet: sent again after it.
    Waiting,
    /// Not applied, for this reason (a `MOVED` among them: the slot map
    /// follows it, and the batch goes to the new node next time).
    Refused(String),
}

impl Share {
    fn waits(&self, settings: &CountSettings) -> bool {
        settings.replicas_to_ack > 0 && !self.batches.is_empty()
    }

    /// Replies to [`Flusher::pipeline`](super::Flusher::pipeline) of this share.
    pub(super) fn replies(&self, settings: &CountSettings) -> usize {
        1 + self.batches.len() + usize::from(self.waits(settings)) + usize::from(self.beat)
    }

    /// What a node's replies say of each batch.
    pub(super) fn outcome(
        &self,
        replies: Vec<redis::Value>,
        script_sha: &str,
        settings: &CountSettings,
    ) -> Result<Vec<Answer>, String> {
        let mut replies = replies.into_iter();
        let loaded = replies
            .next()
            .map(redis::from_redis_value::<String>)
            .transpose()
            .map_err(|e| format!("loading the flush script: {e}"))?;
        if loaded.as_deref() != Some(script_sha) {
            return Err(format!(
                "Redis named the flush script {loaded:?}, not {script_sha}"
            ));
        }
        let mut answers: Vec<Answer> = (self.batches.iter())
            .map(|_| answer_of(replies.next()))
            .collect();
        if self.waits(settings) {
            let confirmed = match replies.next() {
                Some(redis::Value::Int(n)) => n,
                other => return Err(format!("WAIT answered {other:?}")),
            };
            if confirmed < i64::from(settings.replicas_to_ack) {
                let why = format!(
                    "only {confirmed} of {} replicas confirmed the clicks in time; \
                     they will be sent again",
                    settings.replicas_to_ack
                );
                for answer in &mut answers {
                    if matches!(answer, Answer::Applied) {
                        *answer = Answer::Refused(why.clone());
                    }
                }
            }
        }
        Ok(answers)
    }
}

/// What the script's `reply` says of its batch.
pub(super) fn answer_of(reply: Option<redis::Value>) -> Answer {
    match reply {
        Some(redis::Value::Int(0 | 1)) => Answer::Applied,
        Some(redis::Value::Int(-1)) => Answer::Waiting,
        Some(redis::Value::ServerError(error)) => {
            Answer::Refused(format!("applying clicks: {error:?}"))
        }
        other => Answer::Refused(format!("applying clicks: the script answered {other:?}")),
    }
}
