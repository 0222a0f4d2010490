//! A minimal Redis (RESP2) client: enough to fill the store, read it back
//! whole, and see whether Redis answers — without another crate to build.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

#[derive(Debug)]
pub enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    fn text(&self) -> Option<String> {
        match self {
            Self::Status(s) => Some(s.clone()),
            Self::Bulk(Some(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        }
    }
}

pub struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn open(port: u16) -> io::Result<Self> {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let stream = TcpStream::connect_timeout(&address, Duration::from_secs(1))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_write_timeout(Some(Duration::from_secs(10)))?;
        Ok(Self {
            reader: BufReader::new(stream),
        })
    }

    pub fn query(&mut self, args: &[&str]) -> io::Result<Reply> {
        self.reader.get_mut().write_all(&encode(args))?;
        read_reply(&mut self.reader)
    }

    /// Sends every command at once, then reads every reply: thousands of
    /// HSETs cost one round trip (and one fsync under `appendfsync always`).
    pub fn pipeline(&mut self, commands: &[Vec<String>]) -> io::Result<Vec<Reply>> {
        let mut out = Vec::new();
        for command in commands {
            let args: Vec<&str> = command.iter().map(String::as_str).collect();
            out.extend(encode(&args));
        }
        self.reader.get_mut().write_all(&out)?;
        commands
            .iter()
            .map(|_| read_reply(&mut self.reader))
            .collect()
    }

    /// Every link stored under `prefix`, as key → URL (key = hash suffix
    /// followed by field, the inverse of the writer's layout).
    pub fn dump_links(&mut self, prefix: &str) -> Result<BTreeMap<String, String>, String> {
        let mut links = BTreeMap::new();
        let mut cursor = "0".to_owned();
        let pattern = format!("{prefix}*");
        loop {
            let reply = self
                .query(&["SCAN", &cursor, "MATCH", &pattern, "COUNT", "1000"])
                .map_err(|e| format!("SCAN: {e}"))?;
            let Reply::Array(Some(mut parts)) = reply else {
                return Err(format!("SCAN answered {reply:?}"));
            };
            let (Some(Reply::Array(Some(hashes))), Some(next)) = (parts.pop(), parts.pop()) else {
                return Err("SCAN answered an unexpected shape".into());
            };
            for hash in hashes {
                let hash = hash.text().ok_or("SCAN listed a non-string")?;
                let reply = self
                    .query(&["HGETALL", &hash])
                    .map_err(|e| format!("HGETALL {hash}: {e}"))?;
                let Reply::Array(Some(fields)) = reply else {
                    return Err(format!("HGETALL {hash} answered {reply:?}"));
                };
                for pair in fields.chunks(2) {
                    let (Some(field), Some(url)) =
                        (pair[0].text(), pair.get(1).and_then(Reply::text))
                    else {
                        return Err(format!("HGETALL {hash} answered odd fields"));
                    };
                    links.insert(format!("{}{field}", &hash[prefix.len()..]), url);
                }
            }
            cursor = next.text().ok_or("SCAN gave no cursor")?;
            if cursor == "0" {
                return Ok(links);
            }
        }
    }
}

fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend(format!("${}\r\n", arg.len()).bytes());
        out.extend(arg.bytes());
        out.extend(b"\r\n");
    }
    out
}

fn read_reply(reader: &mut BufReader<TcpStream>) -> io::Result<Reply> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "Redis closed the connection",
        ));
    }
    let line = line.trim_end_matches(['\r', '\n']);
    let (kind, rest) = line.split_at(line.len().min(1));
    let number = || {
        rest.parse::<i64>()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("bad reply {line:?}")))
    };
    Ok(match kind {
        "+" => Reply::Status(rest.to_owned()),
        "-" => Reply::Error(rest.to_owned()),
        ":" => Reply::Int(number()?),
        "$" => match usize::try_from(number()?) {
            Err(_) => Reply::Bulk(None),
            Ok(length) => {
                let mut bytes = vec![0; length + 2];
                reader.read_exact(&mut bytes)?;
                bytes.truncate(length);
                Reply::Bulk(Some(bytes))
            }
        },
        "*" => match usize::try_from(number()?) {
            Err(_) => Reply::Array(None),
            Ok(count) => Reply::Array(Some(
                (0..count)
                    .map(|_| read_reply(reader))
                    .collect::<io::Result<_>>()?,
            )),
        },
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad reply {line:?}"),
            ))
        }
    })
}
