//! The little RESP the floors need: encode a command, parse one reply or one pub/sub frame.

/// Append `args` as one RESP command (an array of bulk strings).
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    push_usize(out, args.len());
    out.extend_from_slice(b"\r\n");
    for arg in args {
        out.push(b'$');
        push_usize(out, arg.len());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Append the decimal digits of `n` without allocating.
pub fn push_usize(out: &mut Vec<u8>, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// One reply, as far as the floors care.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// Another simple string.
    Simple,
    /// `:n`.
    Int(i64),
    /// `$n` with its bytes, or the nil bulk string `$-1`.
    Bulk(Option<Vec<u8>>),
    /// `-ERR ...` (the text without the dash).
    Error(String),
}

impl Reply {
    /// A grant (`+OK` to `SET NX`) or a deletion (`:1` from the release script).
    pub fn is_yes(&self) -> bool {
        matches!(self, Reply::Ok | Reply::Int(1))
    }
}

/// Parse one reply from the front of `buf`: `Ok(None)` if it is not complete yet, else the
/// reply and the bytes it took. Arrays and other types are errors (no floor command
/// returns them).
pub fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, String> {
    let Some(end) = find_crlf(buf) else {
        return Ok(None);
    };
    let Some((&kind, line)) = buf[..end].split_first() else {
        return Err("an empty reply line".into());
    };
    let after = end + 2;
    let reply = match kind {
        b'+' if line == b"OK" => Reply::Ok,
        b'+' => Reply::Simple,
        b'-' => Reply::Error(String::from_utf8_lossy(line).into_owned()),
        b':' => Reply::Int(number(line)?),
        b'$' => {
            let len = number(line)?;
            if len < 0 {
                return Ok(Some((Reply::Bulk(None), after)));
            }
            let len = len as usize;
            if buf.len() < after + len + 2 {
                return Ok(None);
            }
            return Ok(Some((Reply::Bulk(Some(buf[after..after + len].to_vec())), after + len + 2)));
        }
        other => return Err(format!("unexpected reply type {:?}", other as char)),
    };
    Ok(Some((reply, after)))
}

/// Parse one array of flat replies (a pub/sub frame: `message`, channel, payload; or a
/// `subscribe` confirmation) from the front of `buf`: `Ok(None)` if it is not complete yet.
pub fn parse_array(buf: &[u8]) -> Result<Option<(Vec<Reply>, usize)>, String> {
    let Some(end) = find_crlf(buf) else {
        return Ok(None);
    };
    if buf.first() != Some(&b'*') {
        return Err(format!("expected an array, got {:?}", String::from_utf8_lossy(&buf[..end])));
    }
    let len = number(&buf[1..end])?;
    let mut at = end + 2;
    let mut items = Vec::with_capacity(len.max(0) as usize);
    for _ in 0..len {
        match parse(&buf[at..])? {
            Some((reply, used)) => {
                items.push(reply);
                at += used;
            }
            None => return Ok(None),
        }
    }
    Ok(Some((items, at)))
}

fn find_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

fn number(line: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not a number: {:?}", String::from_utf8_lossy(line)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_a_command() {
        let mut out = Vec::new();
        encode(&mut out, &[b"SET", b"k", b"v", b"PX", b"10000"]);
        assert_eq!(out, b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nPX\r\n$5\r\n10000\r\n");
        let mut n = Vec::new();
        push_usize(&mut n, 0);
        push_usize(&mut n, 1234567);
        assert_eq!(n, b"01234567");
    }

    #[test]
    fn parses_every_reply_a_floor_sees() {
        assert_eq!(parse(b"+OK\r\n:1\r\n").unwrap(), Some((Reply::Ok, 5)));
        assert_eq!(parse(b":0\r\n").unwrap(), Some((Reply::Int(0), 4)));
        assert_eq!(parse(b"$-1\r\n").unwrap(), Some((Reply::Bulk(None), 5)));
        assert_eq!(parse(b"$3\r\nabc\r\n").unwrap(), Some((Reply::Bulk(Some(b"abc".to_vec())), 9)));
        assert_eq!(parse(b"-NOSCRIPT x\r\n").unwrap(), Some((Reply::Error("NOSCRIPT x".into()), 13)));
        assert!(Reply::Ok.is_yes() && Reply::Int(1).is_yes() && !Reply::Bulk(None).is_yes());
    }

    #[test]
    fn parses_pubsub_frames_whole_or_not_at_all() {
        let frame = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$3\r\na:b\r\n";
        let bulk = |b: &[u8]| Reply::Bulk(Some(b.to_vec()));
        assert_eq!(parse_array(frame).unwrap(), Some((vec![bulk(b"message"), bulk(b"ch"), bulk(b"a:b")], frame.len())));
        for cut in 0..frame.len() {
            assert_eq!(parse_array(&frame[..cut]).unwrap(), None, "cut at {cut}");
        }
        let confirm = b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n";
        assert_eq!(parse_array(confirm).unwrap().map(|(r, _)| r[2].clone()), Some(Reply::Int(1)));
        assert!(parse_array(b"+OK\r\n").is_err());
    }

    #[test]
    fn waits_for_a_whole_reply_and_rejects_garbage() {
        assert_eq!(parse(b"+O").unwrap(), None);
        assert_eq!(parse(b"$3\r\nab").unwrap(), None);
        assert!(parse(b"*1\r\n").is_err());
        assert!(parse(b":x\r\n").is_err());
    }
}
