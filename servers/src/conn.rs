//! A blocking connection to one node for test assertions and inspection: it sends commands
//! and reads their replies with the core's RESP decoder ([`decode_frame`]), over TCP, a Unix
//! socket, or any stream wrapping one (the CLI puts TLS in between).

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
#[cfg(unix)]
use std::path::Path;
use std::time::Duration;

use redlease_core::resp::{Frame, decode_frame};

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

/// One RESP2 reply, owned: what [`RedisConn::cmd`] returns.
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
    stream: Box<dyn Duplex>,
    /// Bytes read and not consumed yet: `input[read..]`.
    input: Vec<u8>,
    read: usize,
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
        let mut conn = RedisConn { stream, input: Vec::new(), read: 0 };
        if let Some((user, pass)) = auth {
            conn.ok(&["AUTH", user, pass])?;
        }
        Ok(conn)
    }

    /// Change the read timeout of later calls.
    pub fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.stream.set_read_timeout(Some(timeout))
    }

    /// Send one command and read its reply (an `-ERR` reply is returned as [`Reply::Error`]).
    pub fn cmd<S: AsRef<[u8]>>(&mut self, args: &[S]) -> io::Result<Reply> {
        self.send(args)?;
        self.receive()
    }

    /// Send one command and return its reply whole, as the bytes it came in (an `-ERR` reply
    /// too): for a parser that reads RESP itself, such as
    /// [`redlease_core::cluster::parse_slots`].
    pub fn cmd_raw<S: AsRef<[u8]>>(&mut self, args: &[S]) -> io::Result<Vec<u8>> {
        self.send(args)?;
        self.receive_raw()
    }

    fn send<S: AsRef<[u8]>>(&mut self, args: &[S]) -> io::Result<()> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            let a = a.as_ref();
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&out)?;
        self.stream.flush()
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
    pub(crate) fn flushall(&mut self) -> io::Result<()> {
        self.ok(&["FLUSHALL"])
    }

    /// `SCRIPT FLUSH`: forget every cached Lua script (later `EVALSHA`s answer `NOSCRIPT`).
    pub(crate) fn script_flush(&mut self) -> io::Result<()> {
        self.ok(&["SCRIPT", "FLUSH"])
    }

    /// Read one reply without sending anything (e.g. the late answer to a command whose read
    /// timed out while the server was paused).
    pub fn receive(&mut self) -> io::Result<Reply> {
        let raw = self.receive_raw()?;
        let mut at = 0;
        reply_at(&raw, &mut at)
    }

    /// The bytes of the next whole reply, read from the stream as needed. Bytes that came
    /// before a read failed (a timeout) are kept for the next call.
    fn receive_raw(&mut self) -> io::Result<Vec<u8>> {
        loop {
            let pending = &self.input[self.read..];
            if let Some(len) = whole_len(pending).map_err(bad_data)? {
                let raw = pending[..len].to_vec();
                self.read += len;
                return Ok(raw);
            }
            self.fill()?;
        }
    }

    /// Read more bytes from the stream (after dropping those consumed).
    fn fill(&mut self) -> io::Result<()> {
        self.input.drain(..self.read);
        self.read = 0;
        let mut chunk = [0; 16 * 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed by the server")),
                Ok(n) => {
                    self.input.extend_from_slice(&chunk[..n]);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The size of the whole reply at the front of `buf` (its aggregates with every element):
/// `None` until it is all there.
fn whole_len(buf: &[u8]) -> Result<Option<usize>, String> {
    let (mut at, mut left) = (0usize, 1usize);
    while left > 0 {
        let Some((frame, used)) = decode_frame(&buf[at..])? else { return Ok(None) };
        at += used;
        let elements = match frame {
            Frame::Array(n) | Frame::Set(n) | Frame::Push(n) => n,
            Frame::Map(n) => n.saturating_mul(2),
            // Its entries, then the reply it describes.
            Frame::Attribute(n) => n.saturating_mul(2).saturating_add(1),
            _ => 0,
        };
        left = (left - 1).saturating_add(elements);
    }
    Ok(Some(at))
}

/// The reply at `*at` of the whole reply `buf`; `*at` moves past it.
fn reply_at(buf: &[u8], at: &mut usize) -> io::Result<Reply> {
    let kind = buf.get(*at).copied().unwrap_or_default();
    let Some((frame, used)) = decode_frame(&buf[*at..]).map_err(bad_data)? else {
        return Err(bad_data("a reply cut short".to_owned()));
    };
    *at += used;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match (kind, frame) {
        (_, Frame::Simple(s)) => Ok(Reply::Simple(text(s))),
        (_, Frame::Error(e)) => Ok(Reply::Error(text(e))),
        (_, Frame::Int(i)) => Ok(Reply::Int(i)),
        (_, Frame::Bulk(b)) => Ok(Reply::Bulk(Some(b.to_vec()))),
        (b'$', Frame::Null) => Ok(Reply::Bulk(None)),
        (b'*', Frame::Null) => Ok(Reply::Array(None)),
        (_, Frame::Array(n)) => Ok(Reply::Array(Some((0..n).map(|_| reply_at(buf, at)).collect::<io::Result<_>>()?))),
        _ => Err(bad_data(format!("a RESP3 reply ({:?}) on a RESP2 connection", kind as char))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream that hands out its input one byte per read, and swallows what is written.
    #[derive(Debug)]
    struct Trickle(std::collections::VecDeque<u8>);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.0.pop_front() {
                Some(b) if !buf.is_empty() => {
                    buf[0] = b;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Duplex for Trickle {
        fn set_read_timeout(&self, _: Option<Duration>) -> io::Result<()> {
            Ok(())
        }
    }

    fn conn(input: &[u8]) -> RedisConn {
        RedisConn::over(Trickle(input.iter().copied().collect()), None).unwrap()
    }

    #[test]
    fn reads_replies_a_byte_at_a_time() {
        let mut c = conn(b"+OK\r\n-ERR no\r\n:42\r\n$3\r\nabc\r\n$-1\r\n*-1\r\n*2\r\n*1\r\n$1\r\nk\r\n:0\r\n");
        assert_eq!(c.receive().unwrap(), Reply::Simple("OK".into()));
        assert_eq!(c.receive().unwrap(), Reply::Error("ERR no".into()));
        assert_eq!(c.receive().unwrap(), Reply::Int(42));
        assert_eq!(c.receive().unwrap(), Reply::Bulk(Some(b"abc".to_vec())));
        assert_eq!(c.receive().unwrap(), Reply::Bulk(None));
        assert_eq!(c.receive().unwrap(), Reply::Array(None));
        let nested =
            Reply::Array(Some(vec![Reply::Array(Some(vec![Reply::Bulk(Some(b"k".to_vec()))])), Reply::Int(0)]));
        assert_eq!(c.receive().unwrap(), nested);
        assert_eq!(c.receive().unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn returns_a_reply_whole_as_it_came() {
        let mut c = conn(b"*2\r\n$1\r\na\r\n%1\r\n+k\r\n:1\r\n+PONG\r\n");
        assert_eq!(c.cmd_raw(&["X"]).unwrap(), b"*2\r\n$1\r\na\r\n%1\r\n+k\r\n:1\r\n");
        assert!(c.ping().unwrap());
    }

    #[test]
    fn refuses_what_is_not_resp2() {
        assert_eq!(conn(b"?what\r\n").receive().unwrap_err().kind(), io::ErrorKind::InvalidData);
        assert_eq!(conn(b"%1\r\n+k\r\n:1\r\n").receive().unwrap_err().kind(), io::ErrorKind::InvalidData);
    }
}
