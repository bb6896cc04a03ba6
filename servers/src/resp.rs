//! A tiny synchronous RESP2 client for test assertions and inspection, over TCP, a Unix
//! socket, or any stream wrapping one (the CLI puts TLS in between).

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
#[cfg(unix)]
use std::path::Path;
use std::time::Duration;

/// A blocking byte stream [`RedisConn`] can talk over: TCP, a Unix socket, or a stream that
/// wraps one (such as a TLS session).
pub trait Duplex: Read + Write + Send + fmt::Debug {
    /// Set the read timeout of the socket underneath.
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()>;
}

impl Duplex for TcpStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, timeout)
    }
}

#[cfg(unix)]
impl Duplex for UnixStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        UnixStream::set_read_timeout(self, timeout)
    }
}

impl Duplex for Box<dyn Duplex> {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        (**self).set_read_timeout(timeout)
    }
}

/// How long a call waits for its reply, and a write for the socket, unless changed.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// One RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`
    Simple(String),
    /// `-ERR ...` (the text without the dash).
    Error(String),
    /// `:42`
    Int(i64),
    /// `$3\r\nfoo` (`None` for the null bulk string `$-1`).
    Bulk(Option<Vec<u8>>),
    /// `*2 ...` (`None` for the null array `*-1`).
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The reply as text: simple and bulk strings (lossy UTF-8), integers; `None` otherwise.
    pub fn as_text(&self) -> Option<String> {
        match self {
            Reply::Simple(s) => Some(s.clone()),
            Reply::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            Reply::Int(i) => Some(i.to_string()),
            _ => None,
        }
    }
}

/// A blocking connection to one Redis node, for the harness, for assertions in tests and for
/// the CLI's inspection commands.
///
/// Every call has a read timeout ([`IO_TIMEOUT`] unless changed), so a paused node makes a
/// call fail rather than hang.
#[derive(Debug)]
pub struct RedisConn {
    stream: BufReader<Box<dyn Duplex>>,
}

/// A TCP connection to `addr` as [`RedisConn::connect`] opens it: connect timeout 1 s, no
/// Nagle delay, [`IO_TIMEOUT`] on reads and writes.
pub fn tcp(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(stream)
}

/// A connection to the Unix socket at `path` with [`IO_TIMEOUT`] on reads and writes, as
/// [`tcp`] opens TCP ones.
#[cfg(unix)]
pub fn unix(path: &Path) -> io::Result<UnixStream> {
    let stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(stream)
}

fn bad_data(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl RedisConn {
    /// Connect to `addr` (timeout 1 s) and log in with `auth` (`(user, password)`) if given.
    pub fn connect(addr: SocketAddr, auth: Option<(&str, &str)>) -> io::Result<RedisConn> {
        RedisConn::over(tcp(addr)?, auth)
    }

    /// Talk over a stream opened elsewhere (its timeouts are the caller's; see [`tcp`]), and
    /// log in with `auth` if given.
    pub fn over(stream: impl Duplex + 'static, auth: Option<(&str, &str)>) -> io::Result<RedisConn> {
        let stream: Box<dyn Duplex> = Box::new(stream);
        let mut conn = RedisConn { stream: BufReader::new(stream) };
        if let Some((user, pass)) = auth {
            conn.ok(&["AUTH", user, pass])?;
        }
        Ok(conn)
    }

    /// Change the read timeout of later calls.
    pub fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.stream.get_ref().set_read_timeout(Some(timeout))
    }

    /// Send one command and read its reply (an `-ERR` reply is returned as [`Reply::Error`]).
    pub fn cmd<S: AsRef<[u8]>>(&mut self, args: &[S]) -> io::Result<Reply> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            let a = a.as_ref();
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        let socket = self.stream.get_mut();
        socket.write_all(&out)?;
        socket.flush()?;
        self.receive()
    }

    /// Send a command; an `-ERR` reply becomes an `io::Error` (kind `Other`).
    pub fn checked<S: AsRef<[u8]>>(&mut self, args: &[S]) -> io::Result<Reply> {
        match self.cmd(args)? {
            Reply::Error(e) => {
                let name = args.first().map(|a| String::from_utf8_lossy(a.as_ref()).into_owned()).unwrap_or_default();
                Err(io::Error::other(format!("{name}: {e}")))
            }
            r => Ok(r),
        }
    }

    /// Send a command that must answer `+OK`.
    pub fn ok<S: AsRef<[u8]>>(&mut self, args: &[S]) -> io::Result<()> {
        match self.checked(args)? {
            Reply::Simple(s) if s == "OK" => Ok(()),
            r => Err(bad_data(format!("expected +OK, got {r:?}"))),
        }
    }

    fn int<S: AsRef<[u8]>>(&mut self, args: &[S]) -> io::Result<i64> {
        match self.checked(args)? {
            Reply::Int(i) => Ok(i),
            r => Err(bad_data(format!("expected an integer, got {r:?}"))),
        }
    }

    /// `PING`; true on `+PONG`.
    pub fn ping(&mut self) -> io::Result<bool> {
        Ok(self.checked(&["PING"])? == Reply::Simple("PONG".into()))
    }

    /// `GET key` as text.
    pub fn get(&mut self, key: &str) -> io::Result<Option<String>> {
        match self.checked(&["GET", key])? {
            Reply::Bulk(b) => Ok(b.map(|b| String::from_utf8_lossy(&b).into_owned())),
            r => Err(bad_data(format!("GET: unexpected {r:?}"))),
        }
    }

    /// `SET key value`.
    pub fn set(&mut self, key: &str, value: &str) -> io::Result<()> {
        self.ok(&["SET", key, value])
    }

    /// `SET key value PX ms`.
    pub fn set_px(&mut self, key: &str, value: &str, ttl: Duration) -> io::Result<()> {
        self.ok(&["SET", key, value, "PX", &ttl.as_millis().max(1).to_string()])
    }

    /// `DEL key`; how many keys were deleted.
    pub fn del(&mut self, key: &str) -> io::Result<i64> {
        self.int(&["DEL", key])
    }

    /// `PTTL key`: milliseconds left, `-1` for no expiry, `-2` for no such key.
    pub fn pttl(&mut self, key: &str) -> io::Result<i64> {
        self.int(&["PTTL", key])
    }

    /// All keys matching `pattern`, by `SCAN` (never blocks the server like `KEYS`).
    pub fn keys(&mut self, pattern: &str) -> io::Result<Vec<String>> {
        let mut cursor = "0".to_owned();
        let mut out = Vec::new();
        loop {
            let reply = self.checked(&["SCAN", &cursor, "MATCH", pattern, "COUNT", "1000"])?;
            let Reply::Array(Some(parts)) = reply else {
                return Err(bad_data(format!("SCAN: unexpected {reply:?}")));
            };
            let [next, Reply::Array(Some(batch))] = parts.as_slice() else {
                return Err(bad_data(format!("SCAN: unexpected {parts:?}")));
            };
            out.extend(batch.iter().filter_map(Reply::as_text));
            cursor = next.as_text().ok_or_else(|| bad_data("SCAN: bad cursor".into()))?;
            if cursor == "0" {
                out.sort();
                out.dedup();
                return Ok(out);
            }
        }
    }

    /// `DBSIZE`.
    pub fn dbsize(&mut self) -> io::Result<i64> {
        self.int(&["DBSIZE"])
    }

    /// `FLUSHALL`.
    pub fn flushall(&mut self) -> io::Result<()> {
        self.ok(&["FLUSHALL"])
    }

    /// `SCRIPT FLUSH`: forget every cached Lua script (later `EVALSHA`s answer `NOSCRIPT`).
    pub fn script_flush(&mut self) -> io::Result<()> {
        self.ok(&["SCRIPT", "FLUSH"])
    }

    /// `CLIENT LIST` as text, one line per connection.
    pub fn client_list(&mut self) -> io::Result<String> {
        match self.checked(&["CLIENT", "LIST"])? {
            r @ Reply::Bulk(_) => Ok(r.as_text().unwrap_or_default()),
            r => Err(bad_data(format!("CLIENT LIST: unexpected {r:?}"))),
        }
    }

    fn line(&mut self) -> io::Result<String> {
        let mut line = String::new();
        if self.stream.read_line(&mut line)? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed by the server"));
        }
        if !line.ends_with("\r\n") {
            return Err(bad_data(format!("reply line without CRLF: {line:?}")));
        }
        line.truncate(line.len() - 2);
        Ok(line)
    }

    /// Read one reply without sending anything (e.g. the late answer to a command whose read
    /// timed out while the server was paused).
    pub fn receive(&mut self) -> io::Result<Reply> {
        let line = self.line()?;
        let (kind, rest) = line.split_at_checked(1).ok_or_else(|| bad_data("empty reply line".into()))?;
        let number = |s: &str| s.parse::<i64>().map_err(|_| bad_data(format!("bad length or number {s:?}")));
        match kind {
            "+" => Ok(Reply::Simple(rest.to_owned())),
            "-" => Ok(Reply::Error(rest.to_owned())),
            ":" => Ok(Reply::Int(number(rest)?)),
            "$" => {
                let len = number(rest)?;
                if len < 0 {
                    return Ok(Reply::Bulk(None));
                }
                let mut buf = vec![0; len as usize + 2];
                self.stream.read_exact(&mut buf)?;
                if !buf.ends_with(b"\r\n") {
                    return Err(bad_data("bulk string without CRLF".into()));
                }
                buf.truncate(len as usize);
                Ok(Reply::Bulk(Some(buf)))
            }
            "*" => {
                let len = number(rest)?;
                if len < 0 {
                    return Ok(Reply::Array(None));
                }
                let items = (0..len).map(|_| self.receive()).collect::<io::Result<Vec<_>>>()?;
                Ok(Reply::Array(Some(items)))
            }
            _ => Err(bad_data(format!("unknown RESP type in {line:?}"))),
        }
    }
}
