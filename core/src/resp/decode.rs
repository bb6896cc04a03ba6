//! The reply decoder: `redis-protocol`'s zero-copy range decoder for RESP2 frames, plus the
//! few RESP3 frames a connection after `HELLO 3` receives (push messages, `HELLO`'s map, null),
//! and the length of a whole frame the engine reads at once.

use redis_protocol::resp2::decode::decode_range;
use redis_protocol::resp2::types::RangeFrame;

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

/// Decode one reply from the front of `buf`.
///
/// `Ok(None)`: more bytes are needed. `Ok(Some((reply, used)))`: a whole reply of `used` bytes.
/// `Err`: the bytes are not RESP; the connection cannot be trusted any more.
///
/// Arrays are never a valid answer to the engine's requests, so only an array's header is
/// read (`used` covers the header alone): its elements are never parsed, which keeps a
/// hostile nesting depth or element count from exhausting the stack or memory.
pub(crate) fn decode(buf: &[u8]) -> Result<Option<(Reply<'_>, usize)>, String> {
    if buf.is_empty() {
        return Ok(None);
    }
    if buf[0] == b'*' {
        let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let len = std::str::from_utf8(&buf[1..end]).ok().and_then(|s| s.parse::<i64>().ok());
        return match len {
            Some(n) if n < 0 => Ok(Some((Reply::Nil, end + 2))),
            Some(n) => Ok(Some((Reply::Array(n as usize), end + 2))),
            None => Err("invalid array length".to_owned()),
        };
    }
    match buf[0] {
        b'>' => return decode_push(buf),
        b'%' | b'~' | b'|' => {
            return match skip(buf, 0, &mut MAX_SKIPPED.clone())? {
                None => Ok(None),
                Some(used) => {
                    let len = header(buf)?.map_or(0, |(n, _)| n.max(0) as usize);
                    let mode = if buf[0] == b'%' { map_entry(&buf[..used], b"mode")? } else { b"" };
                    Ok(Some((Reply::Map { len, mode }, used)))
                }
            };
        }
        b'_' if buf.len() < 3 => return Ok(None),
        b'_' if &buf[1..3] == b"\r\n" => return Ok(Some((Reply::Nil, 3))),
        b'#' | b',' | b'(' => {
            // A boolean, a double, a big number: no answer of ours, but well-formed.
            let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
            return Ok(Some((Reply::Status(&buf[..end]), end + 2)));
        }
        _ => {}
    }
    if buf[0] == b':' {
        if let Some(int) = plain_int(buf) {
            return Ok(Some(int));
        }
    }
    if buf[0] == b'+' {
        if let Some(status) = plain_status(buf) {
            return Ok(Some(status));
        }
    }
    match decode_range(buf) {
        Ok(None) => Ok(None),
        Ok(Some((frame, used))) => {
            let reply = match frame {
                RangeFrame::SimpleString((a, b)) => Reply::Status(&buf[a..b]),
                RangeFrame::Error((a, b)) => Reply::Error(&buf[a..b]),
                RangeFrame::Integer(i) => Reply::Int(i),
                RangeFrame::BulkString((a, b)) => Reply::Bulk(&buf[a..b]),
                RangeFrame::Null => Reply::Nil,
                // Not reached: arrays are handled above.
                RangeFrame::Array(items) => Reply::Array(items.len()),
            };
            Ok(Some((reply, used)))
        }
        Err(e) => Err(e.details().to_owned()),
    }
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
fn plain_status(buf: &[u8]) -> Option<(Reply<'_>, usize)> {
    let cr = buf.iter().position(|&b| b == b'\r')?;
    (buf.get(cr + 1) == Some(&b'\n')).then(|| (Reply::Status(&buf[1..cr]), cr + 2))
}

/// The common integer reply (`:1\r\n`, at most 18 digits) without the general parser.
/// Anything else, including an unfinished reply, is left to `redis-protocol`.
fn plain_int(buf: &[u8]) -> Option<(Reply<'static>, usize)> {
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
    Some((Reply::Int(if neg { -v } else { v }), i + 2))
}
