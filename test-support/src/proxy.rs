//! A loopback TCP proxy that can be paused, for a server that is up but
//! cannot be reached: while paused it takes connections and forwards
//! nothing either way, as a network that drops every packet would.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// How often a waiting thread looks at the switches again.
const TICK: Duration = Duration::from_millis(10);

/// A proxy from a free loopback port to one target port.
pub struct Proxy {
    pub port: u16,
    paused: Arc<AtomicBool>,
    stopped: Arc<AtomicBool>,
}

impl Proxy {
    /// Forwards a free loopback port to `127.0.0.1:target`.
    pub fn start(target: u16) -> Result<Self, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let paused = Arc::new(AtomicBool::new(false));
        let stopped = Arc::new(AtomicBool::new(false));
        let switches = (Arc::clone(&paused), Arc::clone(&stopped));
        thread::spawn(move || accept(&listener, target, &switches.0, &switches.1));
        Ok(Self {
            port,
            paused,
            stopped,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Holds every byte from now on, in both directions, on every
    /// connection, old and new.
    pub fn pause(&self) {
        self.paused.store(true, Ordering::SeqCst);
    }

    /// Forwards again, the held bytes first.
    pub fn resume(&self) {
        self.paused.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
    }
}

fn accept(
    listener: &TcpListener,
    target: u16,
    paused: &Arc<AtomicBool>,
    stopped: &Arc<AtomicBool>,
) {
    while !stopped.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (Ok(from), Ok(to)) = (from.try_clone(), to.try_clone()) else {
                        continue;
                    };
                    let (paused, stopped) = (Arc::clone(paused), Arc::clone(stopped));
                    thread::spawn(move || pump(from, to, &paused, &stopped));
                }
            }
            Err(error) if error.kind() == ErrorKind::WouldBlock => thread::sleep(TICK),
            Err(_) => return,
        }
    }
}

/// Copies `from` to `to` until either closes or the proxy stops, holding
/// what it read while paused.
fn pump(mut from: TcpStream, mut to: TcpStream, paused: &AtomicBool, stopped: &AtomicBool) {
    let _ = from.set_nonblocking(false);
    let _ = from.set_read_timeout(Some(TICK * 5));
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        if stopped.load(Ordering::SeqCst) {
            break;
        }
        if paused.load(Ordering::SeqCst) {
            thread::sleep(TICK);
            continue;
        }
        match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => {
                while paused.load(Ordering::SeqCst) && !stopped.load(Ordering::SeqCst) {
                    thread::sleep(TICK);
                }
                if to.write_all(&buffer[..read]).is_err() {
                    break;
                }
            }
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
