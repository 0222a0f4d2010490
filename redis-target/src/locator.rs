//! Connections to the Redis that takes writes now.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use redis::{ErrorKind, RedisError, RedisResult};

use crate::target::{Address, SentinelTarget, Target};

/// How often the Sentinel watcher asks every Sentinel for the master, as a
/// backstop to the `+switch-master` events of the one it listens to (a lost
/// event, a Sentinel restarted, the failover's leader announcing last).
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// How often the watcher, waiting for events, looks whether it must stop.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// How long the watcher waits before trying the next Sentinel.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// The bounds on every exchange with Redis or a Sentinel.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    pub command: Duration,
}

impl Timeouts {
    /// A connection to the server at `url`, made within the connect
    /// timeout, each of its reads and writes bounded by the command timeout.
    pub fn open(self, url: &str) -> RedisResult<redis::Connection> {
        self.open_client(&redis::Client::open(url)?)
    }

    /// [`Timeouts::open`] for a client already made.
    fn open_client(self, client: &redis::Client) -> RedisResult<redis::Connection> {
        let connection = client.get_connection_with_timeout(self.connect)?;
        Self::arm(&connection, self.command)?;
        Ok(connection)
    }

    /// Bounds each read and write of `connection` by `command`.
    pub fn arm(connection: &redis::Connection, command: Duration) -> RedisResult<()> {
        connection.set_read_timeout(Some(command))?;
        connection.set_write_timeout(Some(command))
    }
}

/// Finds the Redis that takes writes, and follows it.
///
/// For one server that is the server. For a Sentinel group a thread owned
/// by the locator subscribes to a Sentinel's `+switch-master` events
/// (moving on to the next Sentinel whenever one fails) and asks every
/// Sentinel every [`POLL_INTERVAL`], taking the master named with the
/// newest configuration epoch. Each change of master raises the
/// [`generation`](Locator::generation): a connection made in an older one
/// must be dropped, so nothing is written to a demoted master.
pub struct Locator {
    shared: Arc<Shared>,
    watcher: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    target: Target,
    timeouts: Timeouts,
    master: Mutex<Option<Master>>,
    generation: AtomicU64,
    stopping: Mutex<bool>,
    wake: Condvar,
    /// Why the last Sentinel asked gave no master, for the error that says
    /// none has named one.
    last_error: Mutex<Option<String>>,
}

#[derive(Clone)]
struct Master {
    /// Where Sentinels said it is; `None` for one server.
    address: Option<Address>,
    client: redis::Client,
}

impl Locator {
    /// Starts following `target`, without waiting for it: a Sentinel
    /// group's master is found in the background. A Redis Cluster has no one
    /// master to follow: its keys are routed node by node, so it is refused.
    pub fn start(target: Target, timeouts: Timeouts) -> Result<Self, RedisError> {
        let fixed = match &target {
            Target::Server(url) => Some(redis::Client::open(url.as_str())?),
            Target::Sentinel(_) => None,
            Target::Cluster(_) => {
                return Err(RedisError::from((
                    ErrorKind::InvalidClientConfig,
                    "a Redis Cluster cannot serve here",
                    "this needs a single Redis (redis://) or a Sentinel group \
                     (redis+sentinel://)"
                        .to_owned(),
                )))
            }
        };
        let shared = Arc::new(Shared {
            master: Mutex::new(fixed.map(|client| Master {
                address: None,
                client,
            })),
            target,
            timeouts,
            generation: AtomicU64::new(0),
            stopping: Mutex::new(false),
            wake: Condvar::new(),
            last_error: Mutex::new(None),
        });
        let watcher = match &shared.target {
            Target::Server(_) | Target::Cluster(_) => None,
            Target::Sentinel(_) => {
                let watched = Arc::clone(&shared);
                Some(
                    std::thread::Builder::new()
                        .name("shortlink-sentinel".into())
                        .spawn(move || watch(&watched))
                        .map_err(|e| {
                            RedisError::from((
                                ErrorKind::Client,
                                "cannot start the Sentinel watcher thread",
                                e.to_string(),
                            ))
                        })?,
                )
            }
        };
        Ok(Self {
            shared,
            watcher: Mutex::new(watcher),
        })
    }

    /// Reads `url` (any form [`Target`] takes) and starts following it.
    pub fn open(url: &str, timeouts: Timeouts) -> Result<Self, String> {
        let target: Target = url.parse().map_err(|e: crate::TargetError| e.to_string())?;
        Self::start(target, timeouts)
            .map_err(|e| format!("cannot follow {}: {e}", crate::target::redacted(url)))
    }

    /// Stops the watcher thread and waits for it: at most a connect or
    /// command timeout and a tenth of a second. Its code is the owning
    /// module's, so it must end before the module is unloaded: the owner
    /// calls this when it is dropped, whoever holds the last reference.
    /// Connections keep working with the master last named.
    pub fn stop(&self) {
        *self
            .shared
            .stopping
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.shared.wake.notify_all();
        let watcher = self
            .watcher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(watcher) = watcher {
            let _ = watcher.join();
        }
    }

    /// Raised at each change of master; always 0 for one server.
    pub fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    /// A client for the master as last known, and the generation it
    /// belongs to. Does no I/O: fails while no Sentinel has named one.
    pub fn master(&self) -> RedisResult<(redis::Client, u64)> {
        let held = self.shared.lock_master();
        let generation = self.generation();
        match &*held {
            Some(master) => Ok((master.client.clone(), generation)),
            None => Err(self.shared.no_master_yet()),
        }
    }

    /// Asks the Sentinels for the master now, unless one is known: for a
    /// caller about to use it at once (a command-line run), which should
    /// not find the watcher still starting. Bounded by the timeouts.
    pub fn find_master(&self) {
        if let (Err(_), Target::Sentinel(group)) = (self.master(), &self.shared.target) {
            self.shared.ask_now(group);
        }
    }

    /// A new connection to the master with read and write timeouts armed,
    /// and its generation. Asks the Sentinels first if none named the
    /// master yet, and checks with `ROLE` that the server still is one.
    pub fn connect(&self) -> RedisResult<(redis::Connection, u64)> {
        self.find_master();
        let (client, generation) = self.master()?;
        let mut connection = self.shared.timeouts.open_client(&client)?;
        if let Target::Sentinel(group) = &self.shared.target {
            let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut connection)?;
            if !matches!(role.first(), Some(redis::Value::BulkString(name)) if name == b"master") {
                return Err(RedisError::from((
                    ErrorKind::Client,
                    "not the master",
                    format!(
                        "the server Sentinels named as {} is a replica now; \
                         waiting for them to name the new master",
                        group.master_name
                    ),
                )));
            }
        }
        Ok((connection, generation))
    }
}

impl Drop for Locator {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Shared {
    fn lock_master(&self) -> std::sync::MutexGuard<'_, Option<Master>> {
        self.master.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stopping(&self) -> bool {
        *self.stopping.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps `pause`, or less if the locator is dropped meanwhile.
    fn pause(&self, pause: Duration) {
        let stopping = self.stopping.lock().unwrap_or_else(PoisonError::into_inner);
        if !*stopping {
            let _ = self.wake.wait_timeout(stopping, pause);
        }
    }

    fn no_master_yet(&self) -> RedisError {
        let detail = match &self.target {
            Target::Sentinel(group) => format!(
                "no Sentinel ({}) has named the master {:?} yet ({}); check that they run \
                 and know it by that name",
                group
                    .sentinels
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                group.master_name,
                self.last_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_deref()
                    .unwrap_or("none answered yet")
            ),
            Target::Server(url) => format!("{url} cannot be opened"),
            Target::Cluster(_) => "a Redis Cluster has no one master".to_owned(),
        };
        RedisError::from((ErrorKind::Io, "no master", detail))
    }

    /// Takes `address` as the master, raising the generation if it moved.
    fn set_master(&self, group: &SentinelTarget, address: Address) -> RedisResult<()> {
        let mut held = self.lock_master();
        if held
            .as_ref()
            .is_some_and(|master| master.address.as_ref() == Some(&address))
        {
            return Ok(());
        }
        let client = redis::Client::open(group.server_url(&address))?;
        *held = Some(Master {
            address: Some(address),
            client,
        });
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// The master named by the Sentinels with the newest configuration
    /// epoch: the leader of a failover announces the new master last (once
    /// it has reconfigured the replicas), the others as soon as they hear
    /// of it, and a Sentinel cut off from the others names an old one.
    /// `asking` holds a connection per Sentinel, opened as needed.
    fn ask_all(
        &self,
        group: &SentinelTarget,
        asking: &mut [Option<redis::Connection>],
    ) -> Option<Address> {
        let mut newest: Option<(u64, Address)> = None;
        for (sentinel, connection) in group.sentinels.iter().zip(asking.iter_mut()) {
            if connection.is_none() {
                match sentinel_connection(sentinel, self.timeouts) {
                    Ok(opened) => *connection = Some(opened),
                    Err(error) => {
                        self.note_error(sentinel, &error);
                        continue;
                    }
                }
            }
            let Some(open) = connection.as_mut() else {
                continue;
            };
            match master_state(open, group) {
                Ok((epoch, address)) => {
                    if newest.as_ref().is_none_or(|(newest, _)| epoch > *newest) {
                        newest = Some((epoch, address));
                    }
                }
                Err(error) => {
                    self.note_error(sentinel, &error);
                    *connection = None;
                }
            }
        }
        newest.map(|(_, address)| address)
    }

    /// Asks every Sentinel now, on connections of its own.
    fn ask_now(&self, group: &SentinelTarget) {
        let mut asking: Vec<Option<redis::Connection>> =
            group.sentinels.iter().map(|_| None).collect();
        if let Some(named) = self.ask_all(group, &mut asking) {
            let _ = self.set_master(group, named);
        }
    }

    fn note_error(&self, sentinel: &Address, error: &RedisError) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) =
            Some(format!("Sentinel {sentinel}: {error}"));
    }
}

/// The watcher thread: listens to one Sentinel until it fails, then the
/// next, and asks them all every poll interval.
fn watch(shared: &Shared) {
    let Target::Sentinel(group) = &shared.target else {
        return;
    };
    let mut asking: Vec<Option<redis::Connection>> = group.sentinels.iter().map(|_| None).collect();
    for sentinel in group.sentinels.iter().cycle() {
        if shared.stopping() {
            return;
        }
        // A failure is only a reason to listen to the next Sentinel (and is
        // kept for the error that says none named a master). Nor may a
        // panic end the following.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            follow(shared, group, sentinel, &mut asking)
        })) {
            Ok(Ok(())) => {}
            Ok(Err(error)) => shared.note_error(sentinel, &error),
            Err(_) => shared.note_error(
                sentinel,
                &RedisError::from((ErrorKind::Client, "the Sentinel watcher panicked")),
            ),
        }
        shared.pause(RETRY_PAUSE);
    }
}

/// Takes every `+switch-master` `sentinel` announces for this group, and
/// asks every Sentinel each poll interval, until `sentinel` fails or the
/// locator stops.
fn follow(
    shared: &Shared,
    group: &SentinelTarget,
    sentinel: &Address,
    asking: &mut [Option<redis::Connection>],
) -> RedisResult<()> {
    let mut listening = sentinel_connection(sentinel, shared.timeouts)?;
    let mut events = listening.as_pubsub();
    events.subscribe("+switch-master")?;
    // Woken this often to notice a stop, asking each poll interval.
    events.set_read_timeout(Some(STOP_CHECK))?;
    let mut asked: Option<std::time::Instant> = None;
    loop {
        if asked.is_none_or(|at| at.elapsed() >= POLL_INTERVAL) {
            if let Some(named) = shared.ask_all(group, asking) {
                shared.set_master(group, named)?;
            }
            asked = Some(std::time::Instant::now());
        }
        if shared.stopping() {
            return Ok(());
        }
        match events.get_message() {
            Ok(message) => {
                let payload: String = message.get_payload()?;
                if let Some(address) = switched_to(&payload, &group.master_name) {
                    shared.set_master(group, address)?;
                }
            }
            Err(error) if error.is_timeout() => {}
            Err(error) => return Err(error),
        }
    }
}

fn sentinel_connection(sentinel: &Address, timeouts: Timeouts) -> RedisResult<redis::Connection> {
    timeouts.open(&format!("redis://{sentinel}"))
}

/// `SENTINEL MASTER`: where this Sentinel says the master is, and the
/// configuration epoch that says so.
fn master_state(
    sentinel: &mut redis::Connection,
    group: &SentinelTarget,
) -> RedisResult<(u64, Address)> {
    let fields: Vec<String> = redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg(&group.master_name)
        .query(sentinel)?;
    let field = |name: &str| {
        fields
            .chunks_exact(2)
            .find(|pair| pair[0] == name)
            .map(|pair| pair[1].as_str())
    };
    let address = field("ip")
        .zip(field("port").and_then(|port| port.parse().ok()))
        .map(|(host, port)| Address {
            host: host.to_owned(),
            port,
        })
        .ok_or_else(|| {
            RedisError::from((
                ErrorKind::MasterNameNotFoundBySentinel,
                "no address for the master",
                group.master_name.clone(),
            ))
        })?;
    let epoch = field("config-epoch")
        .and_then(|epoch| epoch.parse().ok())
        .unwrap_or(0);
    Ok((epoch, address))
}

/// The new master a `+switch-master` payload (`name old-ip old-port
/// new-ip new-port`) announces, if it is about `master_name`.
fn switched_to(payload: &str, master_name: &str) -> Option<Address> {
    let fields: Vec<&str> = payload.split_whitespace().collect();
    match fields.as_slice() {
        [name, _, _, host, port] if *name == master_name => Some(Address {
            host: (*host).to_owned(),
            port: port.parse().ok()?,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::switched_to;
    use crate::target::Address;

    #[test]
    fn a_switch_of_this_master_names_the_new_one() {
        assert_eq!(
            switched_to("links 127.0.0.1 7001 127.0.0.1 7002", "links"),
            Some(Address {
                host: "127.0.0.1".into(),
                port: 7002
            })
        );
        assert_eq!(switched_to("other 10.0.0.1 1 10.0.0.2 2", "links"), None);
        assert_eq!(switched_to("links 10.0.0.1 1", "links"), None);
    }
}
