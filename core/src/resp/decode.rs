//! The reply decoder. [`decode_frame`] reads one RESP frame at a time (a scalar whole, an
//! aggregate's header), with `redis-protocol`'s zero-copy range decoder for the RESP2 types and
//! a reading of its own for the RESP3 ones; [`decode`] reads the engine's replies with it (a
//! RESP3 map, set or push frame whole), and [`frame_len`] measures a whole frame the engine
//! reads at once.

use redis_protocol::resp2::decode::decode_range;
use redis_protocol::resp2::types::RangeFrame;

/// One RESP frame, borrowing from the buffer it was decoded from: a scalar whole, or the
/// header of an aggregate, whose elements follow it in the buffer as frames of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Frame<'a> {
    /// A simple string (`+OK`): its text.
    Simple(&'a [u8]),
    /// An error (`-ERR ...`): its text, without the `-`.
    Error(&'a [u8]),
    /// An integer (`:5`).
    Int(i64),
    /// A bulk string (`$3\r\nabc`): its bytes.
    Bulk(&'a [u8]),
    /// A null: the null bulk string `$-1` and the null array `*-1` (RESP2), `_` (RESP3), or
    /// another aggregate with a negative length.
    Null,
    /// An array's header (`*2`): its length. That many frames follow.
    Array(usize),
    /// A RESP3 map's header (`%2`): its number of entries. A key and a value follow for each.
    Map(usize),
    /// A RESP3 set's header (`~2`): its length. That many frames follow.
    Set(usize),
    /// A RESP3 push frame's header (`>3`): its length. That many frames follow, the first
    /// naming the kind of push (`message`, `subscribe`, ...).
    Push(usize),
    /// A RESP3 attribute's header (`|1`): its number of entries. A key and a value follow for
    /// each, then the reply the attribute describes.
    Attribute(usize),
    /// A RESP3 boolean, double or big number (`#t`, `,1.5`, `(3492890328409238509324850943850943825024385`):
    /// its line, the type byte included.
    Other(&'a [u8]),
}

/// Decode one frame from the front of `buf`.
///
/// `Ok(None)`: more bytes are needed. `Ok(Some((frame, used)))`: a frame of `used` bytes; an
/// aggregate's elements are not part of it, they are the frames after it (so a hostile nesting
/// depth costs no stack, and an element count no memory, unless the caller spends it: bound
/// what you allocate by the lengths you read). `Err`: the bytes are not RESP (nor one of the
/// RESP3 types above: a verbatim string or a blob error is refused); the stream cannot be
/// trusted any more.
///
/// ```
/// use redlease_core::resp::{Frame, decode_frame};
///
/// let buf = b"*2\r\n$3\r\nkey\r\n:42\r\n";
/// let (header, mut at) = decode_frame(buf).unwrap().unwrap();
/// assert_eq!(header, Frame::Array(2));
/// let (key, used) = decode_frame(&buf[at..]).unwrap().unwrap();
/// assert_eq!(key, Frame::Bulk(b"key"));
/// at += used;
/// assert_eq!(decode_frame(&buf[at..]), Ok(Some((Frame::Int(42), 5))));
/// // A frame cut short needs more bytes.
/// assert_eq!(decode_frame(b"$3\r\nke"), Ok(None));
/// ```
pub fn decode_frame(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, String> {
    let Some(&kind) = buf.first() else { return Ok(None) };
    match kind {
        b'*' => {
            let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
                return Ok(None);
            };
            let len = std::str::from_utf8(&buf[1..end]).ok().and_then(|s| s.parse::<i64>().ok());
            return match len {
                Some(n) if n < 0 => Ok(Some((Frame::Null, end + 2))),
                Some(n) => Ok(Some((Frame::Array(n as usize), end + 2))),
                None => Err("invalid array length".to_owned()),
            };
        }
        b'%' | b'~' | b'>' | b'|' => {
            let Some((n, used)) = header(buf)? else { return Ok(None) };
            let frame = match usize::try_from(n) {
                Err(_) => Frame::Null,
                Ok(n) if kind == b'%' => Frame::Map(n),
                Ok(n) if kind == b'~' => Frame::Set(n),
                Ok(n) if kind == b'>' => Frame::Push(n),
                Ok(n) => Frame::Attribute(n),
            };
            return Ok(Some((frame, used)));
        }
        b'_' if buf.len() < 3 => return Ok(None),
        b'_' if &buf[1..3] == b"\r\n" => return Ok(Some((Frame::Null, 3))),
        b'#' | b',' | b'(' => {
            let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
            return Ok(Some((Frame::Other(&buf[..end]), end + 2)));
        }
        b':' => {
            if let Some(int) = plain_int(buf) {
                return Ok(Some(int));
            }
        }
        b'+' => {
            if let Some(status) = plain_status(buf) {
                return Ok(Some(status));
            }
        }
        _ => {}
    }
    match decode_range(buf) {
        Ok(None) => Ok(None),
        Ok(Some((frame, used))) => {
            let frame = match frame {
                RangeFrame::SimpleString((a, b)) => Frame::Simple(&buf[a..b]),
                RangeFrame::Error((a, b)) => Frame::Error(&buf[a..b]),
                RangeFrame::Integer(i) => Frame::Int(i),
                RangeFrame::BulkString((a, b)) => Frame::Bulk(&buf[a..b]),
                RangeFrame::Null => Frame::Null,
                // Not reached: arrays are read above.
                RangeFrame::Array(items) => Frame::Array(items.len()),
            };
            Ok(Some((frame, used)))
        }
        Err(e) => Err(e.details().to_owned()),
    }
}

/// One reply, borrowing from the link's input buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply<'a> {
    /// `+OK`
    Status(&'a [u8]),
    /// `-ERR ...`
    Error(&'a [u8]),
    /// `:5`
    Int(i64),
    /// `$3\r\nabc`
    Bulk(&'a [u8]),
    /// `$-1` or `*-1`
    Nil,
    /// An array's header, its length (the link reads the few arrays it expects element by
    /// element: `CLUSTER SHARDS`, `CLUSTER SLOTS`, `WAITAOF`).
    Array(usize),
    /// A RESP3 map, set or other aggregate that was skipped whole (`HELLO 3`'s answer): its
    /// length, and the value of its top-level `mode` entry when it is a string (`standalone`,
    /// `sentinel`, `cluster`; empty else).
    Map { len: usize, mode: &'a [u8] },
    /// A RESP3 push frame: its kind (`message`, `subscribe`, `unsubscribe`, ...) and its next
    /// two elements when they are strings (the channel and the payload or count; empty else).
    Push { kind: &'a [u8], channel: &'a [u8], data: &'a [u8] },
}

impl Reply<'_> {
    /// A short printable rendering for error messages.
    pub(crate) fn render(&self) -> String {
        fn text(b: &[u8]) -> String {
            let s = String::from_utf8_lossy(&b[..b.len().min(120)]).into_owned();
            if b.len() > 120 { s + "…" } else { s }
        }
        match self {
            Reply::Status(s) => format!("+{}", text(s)),
            Reply::Error(s) => format!("-{}", text(s)),
            Reply::Int(i) => format!(":{i}"),
            Reply::Bulk(b) => format!("bulk {:?}", text(b)),
            Reply::Nil => "nil".to_owned(),
            Reply::Array(n) => format!("array of {n}"),
            Reply::Map { len, .. } => format!("aggregate of {len}"),
            Reply::Push { kind, channel, .. } => format!("push {} {}", text(kind), text(channel)),
        }
    }
}

/// The longest reply the engine waits for. Answers to its requests are a few dozen bytes
/// (a server error message at most a few hundred); anything longer is garbage.
pub(crate) const MAX_REPLY: usize = 64 * 1024;

/// Decode one reply from the front of `buf`, as the engine reads it: a frame of
/// [`decode_frame`], or a RESP3 map, set, attribute or push frame read whole.
///
/// `Ok(None)`: more bytes are needed. `Ok(Some((reply, used)))`: a whole reply of `used` bytes.
/// `Err`: the bytes are not RESP; the connection cannot be trusted any more.
///
/// Arrays are never a valid answer to the engine's requests, so only an array's header is
/// read (`used` covers the header alone): its elements are never parsed, which keeps a
/// hostile nesting depth or element count from exhausting the stack or memory.
pub(crate) fn decode(buf: &[u8]) -> Result<Option<(Reply<'_>, usize)>, String> {
    match buf.first() {
        Some(b'>') => return decode_push(buf),
        Some(b'%' | b'~' | b'|') => {
            return match skip(buf, 0, &mut MAX_SKIPPED.clone())? {
                None => Ok(None),
                Some(used) => {
                    let len = header(buf)?.map_or(0, |(n, _)| n.max(0) as usize);
                    let mode = if buf[0] == b'%' { map_entry(&buf[..used], b"mode")? } else { b"" };
                    Ok(Some((Reply::Map { len, mode }, used)))
                }
            };
        }
        _ => {}
    }
    let Some((frame, used)) = decode_frame(buf)? else { return Ok(None) };
    let reply = match frame {
        Frame::Simple(s) => Reply::Status(s),
        Frame::Error(e) => Reply::Error(e),
        Frame::Int(i) => Reply::Int(i),
        Frame::Bulk(b) => Reply::Bulk(b),
        Frame::Null => Reply::Nil,
        Frame::Array(n) => Reply::Array(n),
        // A boolean, a double, a big number: no answer of ours, but well-formed.
        Frame::Other(line) => Reply::Status(line),
        // Not reached: read whole above.
        Frame::Map(len) | Frame::Set(len) | Frame::Push(len) | Frame::Attribute(len) => Reply::Map { len, mode: b"" },
    };
    Ok(Some((reply, used)))
}

/// The size of the whole frame at the front of `buf` (an answer the engine reads whole, such
/// as `CLUSTER SLOTS`), walking at most `elements` elements: `Ok(None)` until it is whole,
/// `Err` for garbage or a frame longer than `max_bytes`.
pub(crate) fn frame_len(buf: &[u8], elements: usize, max_bytes: usize) -> Result<Option<usize>, String> {
    match skip(buf, 0, &mut elements.clone())? {
        None if buf.len() > max_bytes => Err(format!("a reply longer than {max_bytes} bytes without an end")),
        found => Ok(found),
    }
}

/// Elements [`skip`] walks through at most in one frame, and how deep.
const MAX_SKIPPED: usize = 1024;
const MAX_DEPTH: usize = 4;

/// The length given in the header line at the front of `buf` (`*3`, `%7`, `$5`...), and the
/// header's size; `None` until the line is whole.
fn header(buf: &[u8]) -> Result<Option<(i64, usize)>, String> {
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    match std::str::from_utf8(&buf[1..end]).ok().and_then(|s| s.parse::<i64>().ok()) {
        Some(n) => Ok(Some((n, end + 2))),
        None => Err(format!("invalid length after {:?}", buf[0] as char)),
    }
}

/// The size of the whole frame at the front of `buf` (any RESP2 or RESP3 type), walking at
/// most `budget` elements `MAX_DEPTH` deep: a hostile frame cannot exhaust the stack or
/// memory. `None`: more bytes are needed.
fn skip(buf: &[u8], depth: usize, budget: &mut usize) -> Result<Option<usize>, String> {
    let Some(&kind) = buf.first() else { return Ok(None) };
    if *budget == 0 || depth > MAX_DEPTH {
        return Err("a reply nested too deep or too long".to_owned());
    }
    *budget -= 1;
    match kind {
        b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => {
            Ok(buf.windows(2).position(|w| w == b"\r\n").map(|end| end + 2))
        }
        b'$' | b'!' | b'=' => match header(buf)? {
            None => Ok(None),
            Some((n, head)) if n < 0 => Ok(Some(head)),
            Some((n, head)) => {
                let end = head + n as usize + 2;
                if buf.len() < end {
                    Ok(None)
                } else if &buf[end - 2..end] != b"\r\n" {
                    Err("a string without its end".to_owned())
                } else {
                    Ok(Some(end))
                }
            }
        },
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let Some((n, mut pos)) = header(buf)? else { return Ok(None) };
            let items = if matches!(kind, b'%' | b'|') { n.max(0) as usize * 2 } else { n.max(0) as usize };
            if items > *budget {
                return Err("a reply nested too deep or too long".to_owned());
            }
            for _ in 0..items {
                match skip(&buf[pos..], depth + 1, budget)? {
                    None => return Ok(None),
                    Some(used) => pos += used,
                }
            }
            Ok(Some(pos))
        }
        other => Err(format!("unknown frame type {:?}", other as char)),
    }
}

/// The value of the top-level entry `key` of the whole map frame `buf` when both are strings
/// (simple or bulk); empty if there is none.
fn map_entry<'a>(buf: &'a [u8], key: &[u8]) -> Result<&'a [u8], String> {
    let Some((n, mut pos)) = header(buf)? else { return Ok(b"") };
    let string_at = |pos: usize| -> Result<(Option<&'a [u8]>, usize), String> {
        let used = skip(&buf[pos..], 1, &mut MAX_SKIPPED.clone())?.unwrap_or(buf.len() - pos);
        let text = match buf[pos] {
            b'+' => Some(&buf[pos + 1..pos + used - 2]),
            b'$' => match header(&buf[pos..])? {
                Some((len, head)) if len >= 0 => Some(&buf[pos + head..pos + used - 2]),
                _ => None,
            },
            _ => None,
        };
        Ok((text, used))
    };
    for _ in 0..n.max(0) {
        let (name, used) = string_at(pos)?;
        pos += used;
        let (value, used) = string_at(pos)?;
        pos += used;
        if name.is_some_and(|name| name.eq_ignore_ascii_case(key)) {
            return Ok(value.unwrap_or_default());
        }
    }
    Ok(b"")
}

/// A push frame (`>`): its kind and the two elements after it when they are strings.
fn decode_push(buf: &[u8]) -> Result<Option<(Reply<'_>, usize)>, String> {
    let Some(used) = skip(buf, 0, &mut MAX_SKIPPED.clone())? else {
        return Ok(None);
    };
    let Some((n, mut pos)) = header(buf)? else { return Ok(None) };
    let mut parts: [&[u8]; 3] = [b"", b"", b""];
    for part in parts.iter_mut().take(n.max(0) as usize) {
        let len = skip(&buf[pos..], 1, &mut MAX_SKIPPED.clone())?.unwrap_or(0);
        if buf[pos] == b'$' {
            match header(&buf[pos..])? {
                Some((n, head)) if n >= 0 => *part = &buf[pos + head..pos + len - 2],
                // Redis never sends a null element in a push: garbage, not a message.
                _ => return Err("a push frame with a null element".to_owned()),
            }
        }
        pos += len;
    }
    Ok(Some((Reply::Push { kind: parts[0], channel: parts[1], data: parts[2] }, used)))
}

/// The common simple string (`+OK` to a `SET`) without the general decoder: the text up to the
/// first `\r`, when `\n` follows it. Anything else (no end yet, a bare `\r`) is left to the
/// general decoder.
fn plain_status(buf: &[u8]) -> Option<(Frame<'_>, usize)> {
    let cr = buf.iter().position(|&b| b == b'\r')?;
    (buf.get(cr + 1) == Some(&b'\n')).then(|| (Frame::Simple(&buf[1..cr]), cr + 2))
}

/// The common integer reply (`:1\r\n`, at most 18 digits) without the general parser.
/// Anything else, including an unfinished reply, is left to `redis-protocol`.
fn plain_int(buf: &[u8]) -> Option<(Frame<'static>, usize)> {
    let neg = buf.get(1) == Some(&b'-');
    let start = if neg { 2 } else { 1 };
    let mut i = start;
    let mut v: i64 = 0;
    while i < buf.len() && i - start < 18 && buf[i].is_ascii_digit() {
        v = v * 10 + i64::from(buf[i] - b'0');
        i += 1;
    }
    if i == start || buf.get(i..i + 2) != Some(b"\r\n") {
        return None;
    }
    Some((Frame::Int(if neg { -v } else { v }), i + 2))
}
