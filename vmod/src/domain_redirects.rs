//! The short domains' redirects for visits to no link that were set while
//! the writer runs ([`NotFoundRedirects`], in each domain's
//! `<prefix>domain:redirects` hash), held in memory: the VCL asks for one
//! at every bare-domain, regular-404 or unknown-key answer, and no request
//! waits for Redis for it.
//!
//! A thread of the VCL object reads every domain's hash in one pipeline
//! as soon as the VCL has loaded, and again when an answer asks for a
//! redirect [`REFRESH`] or more after the last read (changes made by
//! hand): a VCL nobody asks makes no command at all, and a cached link
//! never waits for it. The writer's purge of a domain's bare path reads
//! them at once (`.reload_redirects()`), so a change it made is live when
//! it answers. While Redis is away the last table read stays.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use shortlink_core::{NotFoundKind, NotFoundRedirects, Slot, ValidUrl};

use varnish::vcl::{Ctx, LogTag, VclError};

use crate::backend::KeySpaces;
use crate::lookups::RedisPool;
use crate::{redirector, without_panic};

/// How old the table may be when an answer asks for a redirect before it
/// is read again (in the background: that answer takes the table as it is).
pub const REFRESH: Duration = Duration::from_secs(10);

pub struct DomainRedirects {
    shared: Arc<Shared>,
    refresher: Option<JoinHandle<()>>,
}

struct Shared {
    pool: Arc<RedisPool>,
    /// Each domain's name (`""`: the default one) and its hash.
    hashes: Vec<(String, String)>,
    table: RwLock<HashMap<String, NotFoundRedirects>>,
    /// The configuration's, given in `vcl_init`: what a kind not set in
    /// Redis answers.
    defaults: RwLock<HashMap<String, NotFoundRedirects>>,
    /// Held across a whole read and its store, so that a refresh that
    /// read before the writer's change never stores after the read its
    /// purge asked for.
    reading: Mutex<()>,
    /// When the table was last read (or tried), Unix milliseconds.
    read_at_ms: AtomicU64,
    /// Whether an answer found the table old and the thread is to read it.
    wanted: AtomicBool,
    stopping: Mutex<bool>,
    wake: Condvar,
}

impl DomainRedirects {
    /// Starts the thread that keeps the table of the domains of `spaces`.
    pub fn start(pool: Arc<RedisPool>, spaces: &KeySpaces) -> Result<Self, String> {
        let shared = Arc::new(Shared {
            pool,
            hashes: spaces
                .named()
                .map(|(name, scheme)| (name.to_owned(), scheme.domain_redirects()))
                .collect(),
            table: RwLock::new(HashMap::new()),
            defaults: RwLock::new(HashMap::new()),
            reading: Mutex::new(()),
            read_at_ms: AtomicU64::new(0),
            wanted: AtomicBool::new(true),
            stopping: Mutex::new(false),
            wake: Condvar::new(),
        });
        let kept = Arc::clone(&shared);
        let refresher = std::thread::Builder::new()
            .name("shortlink-redirects".into())
            .spawn(move || kept.refresh_until_stopped())
            .map_err(|e| format!("cannot start the domain redirects thread: {e}"))?;
        Ok(Self {
            shared,
            refresher: Some(refresher),
        })
    }

    /// The URL for `kind` on the domain named `domain` (`""`: the default
    /// one): the one set in Redis as last read, or else the default.
    pub fn redirect(&self, domain: &str, kind: NotFoundKind) -> Option<String> {
        let set = |table: &RwLock<HashMap<String, NotFoundRedirects>>| {
            let table = table.read().unwrap_or_else(PoisonError::into_inner);
            table
                .get(domain)
                .and_then(|redirects| redirects.get(kind))
                .map(ToString::to_string)
        };
        self.shared.read_again_if_old();
        set(&self.shared.table).or_else(|| set(&self.shared.defaults))
    }

    /// Sets the default of `kind` on the domain named `domain`.
    pub fn set_default(&self, domain: &str, kind: NotFoundKind, url: ValidUrl) {
        self.shared
            .defaults
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(domain.to_owned())
            .or_default()
            .set(kind, Some(url));
    }

    /// Reads every domain's redirects now; `Err` when Redis gave no answer
    /// (the table is left as it was).
    pub fn reload(&self) -> Result<(), String> {
        self.shared.reload()
    }
}

impl Shared {
    /// Has the thread read the table again if it is [`REFRESH`] old or
    /// more: one wake-up, however many answers find it so.
    fn read_again_if_old(&self) {
        let age_ms = crate::now_ms().saturating_sub(self.read_at_ms.load(Ordering::Relaxed));
        if u128::from(age_ms) >= REFRESH.as_millis() && !self.wanted.swap(true, Ordering::AcqRel) {
            let _stopping = self.stopping.lock().unwrap_or_else(PoisonError::into_inner);
            self.wake.notify_all();
        }
    }

    fn reload(&self) -> Result<(), String> {
        let _reading = self.reading.lock().unwrap_or_else(PoisonError::into_inner);
        // Tried, whatever comes of it: while Redis is away, answers ask
        // again once every REFRESH, not at each one.
        self.read_at_ms.store(crate::now_ms(), Ordering::Relaxed);
        let slots: Vec<Slot<'_>> = self
            .hashes
            .iter()
            .flat_map(|(_, hash)| {
                NotFoundKind::ALL.map(|kind| Slot {
                    hash: hash.clone(),
                    field: kind.name(),
                })
            })
            .collect();
        let replies = self.pool.hget_each(&slots);
        let mut table = HashMap::with_capacity(self.hashes.len());
        let per_domain = replies.chunks(NotFoundKind::ALL.len());
        for ((domain, hash), replies) in self.hashes.iter().zip(per_domain) {
            let mut fields = Vec::new();
            for (kind, reply) in NotFoundKind::ALL.iter().zip(replies) {
                let value = reply
                    .as_ref()
                    .map_err(|error| format!("HGET {hash} {}: {error}", kind.name()))?;
                if let Some(text) = value.as_deref().and_then(|v| std::str::from_utf8(v).ok()) {
                    fields.push((kind.name(), text));
                }
            }
            table.insert(domain.clone(), NotFoundRedirects::of_fields(fields));
        }
        *self.table.write().unwrap_or_else(PoisonError::into_inner) = table;
        Ok(())
    }

    /// Reads the table whenever it is wanted (first as the VCL loads),
    /// until the VCL object is dropped.
    fn refresh_until_stopped(&self) {
        let mut stopping = self.stopping.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if *stopping {
                return;
            }
            if self.wanted.load(Ordering::Acquire) {
                drop(stopping);
                self.wanted.store(false, Ordering::Release);
                // Kept as it was when Redis is away; read again when asked.
                let _ = without_panic(|| self.reload(), || Ok(()));
                stopping = self.stopping.lock().unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            stopping = self
                .wake
                .wait(stopping)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl redirector {
    /// `.domain_redirect()`.
    pub(crate) fn redirect_for(&self, domain: &str, kind: &str) -> Result<String, VclError> {
        let kind = kind_named("domain_redirect", kind)?;
        Ok(
            without_panic(|| self.domain_redirects.redirect(domain, kind), || None)
                .unwrap_or_default(),
        )
    }

    /// `.default_redirect()`.
    pub(crate) fn set_default_redirect(
        &self,
        domain: &str,
        kind: &str,
        url: &str,
    ) -> Result<(), VclError> {
        let kind = kind_named("default_redirect", kind)?;
        let url = ValidUrl::try_from(url.to_owned())
            .map_err(|e| VclError::new(format!("shortlink: default_redirect: {url:?}: {e}")))?;
        self.domain_redirects.set_default(domain, kind, url);
        Ok(())
    }

    /// `.reload_redirects()`.
    pub(crate) fn reload_domain_redirects(&self, ctx: &mut Ctx) -> bool {
        let read = without_panic(
            || self.domain_redirects.reload(),
            || Err("the read panicked".to_owned()),
        );
        if let Err(error) = &read {
            ctx.log(
                LogTag::Error,
                format!("shortlink: reading the domains' redirects: {error}"),
            );
        }
        read.is_ok()
    }
}

/// The kind `name` names, for `method`'s error otherwise.
pub fn kind_named(method: &str, name: &str) -> Result<NotFoundKind, VclError> {
    NotFoundKind::of_name(name).ok_or_else(|| {
        VclError::new(format!(
            "shortlink: {method}: kind {name:?} is none of base_url, regular_404, invalid_short_url"
        ))
    })
}

impl Drop for DomainRedirects {
    /// The thread ends with the VCL object: told, then waited for (at most
    /// one read, which the pool's command timeout bounds).
    fn drop(&mut self) {
        *self
            .shared
            .stopping
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.shared.wake.notify_all();
        if let Some(thread) = self.refresher.take() {
            let _ = thread.join();
        }
    }
}
