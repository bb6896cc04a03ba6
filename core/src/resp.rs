//! RESP, the Redis protocol: the reply decoder the engine reads every reply with, public for
//! tools that read RESP themselves ([`decode_frame`], one [`Frame`] at a time, RESP2 and RESP3);
//! and, inside the crate, the command encoder (written straight into a link's output buffer, no
//! allocation).

mod decode;

pub use decode::{Frame, decode_frame};
pub(crate) use decode::{MAX_REPLY, Reply, decode, frame_len};

/// Begin a command array of `argc` bulk strings.
pub(crate) fn array(out: &mut Vec<u8>, argc: usize) {
    out.push(b'*');
    put_uint(out, argc as u64);
    out.extend_from_slice(b"\r\n");
}

/// Append one bulk string.
pub(crate) fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'$');
    put_uint(out, b.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Append a bulk string made of two parts (a prefix and a name).
pub(crate) fn bulk2(out: &mut Vec<u8>, a: &[u8], b: &[u8]) {
    out.push(b'$');
    put_uint(out, (a.len() + b.len()) as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(a);
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Append a decimal number as a bulk string.
pub(crate) fn bulk_uint(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 20];
    let digits = fmt_uint(&mut buf, v);
    bulk(out, digits);
}

/// A whole command from byte-string arguments.
pub(crate) fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    array(out, args.len());
    for a in args {
        bulk(out, a);
    }
}

/// Append `v` in decimal. Lengths and counts are nearly always one or two digits: those are
/// written as fixed-size pieces, which compile to plain stores instead of a `memcpy` call.
fn put_uint(out: &mut Vec<u8>, v: u64) {
    if v < 10 {
        out.push(b'0' + v as u8);
    } else if v < 100 {
        out.extend_from_slice(&[b'0' + (v / 10) as u8, b'0' + (v % 10) as u8]);
    } else {
        let mut buf = [0u8; 20];
        out.extend_from_slice(fmt_uint(&mut buf, v));
    }
}

fn fmt_uint(buf: &mut [u8; 20], mut v: u64) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis_protocol::resp2::decode::decode_range;
    use redis_protocol::resp2::types::RangeFrame;

    #[test]
    fn encodes_commands() {
        let mut out = Vec::new();
        command(&mut out, &[b"SET", b"k", b""]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
        out.clear();
        array(&mut out, 2);
        bulk_uint(&mut out, 0);
        bulk2(&mut out, b"ab", b"cd");
        assert_eq!(out, b"*2\r\n$1\r\n0\r\n$4\r\nabcd\r\n");
        out.clear();
        bulk_uint(&mut out, u64::MAX);
        assert_eq!(out, b"$20\r\n18446744073709551615\r\n");
    }

    #[test]
    fn writes_numbers_at_every_width() {
        // Around the one- and two-digit fast paths, and the general case after them.
        for v in [0, 1, 9, 10, 11, 42, 99, 100, 101, 999, 1000, 30_000, u64::from(u32::MAX), u64::MAX] {
            let mut out = vec![b'x'];
            put_uint(&mut out, v);
            assert_eq!(out, format!("x{v}").as_bytes(), "{v}");
        }
    }

    #[test]
    fn decodes_replies() {
        assert_eq!(decode(b"+OK\r\n"), Ok(Some((Reply::Status(b"OK"), 5))));
        assert_eq!(decode(b"+OK\r\n:1\r\n"), Ok(Some((Reply::Status(b"OK"), 5))));
        assert_eq!(decode(b"+\r\n"), Ok(Some((Reply::Status(b""), 3))));
        assert_eq!(decode(b"+OK\r"), Ok(None));
        assert_eq!(decode(b"+OK"), Ok(None));
        assert_eq!(decode(b":-3\r\nrest"), Ok(Some((Reply::Int(-3), 5))));
        assert_eq!(decode(b"$-1\r\n"), Ok(Some((Reply::Nil, 5))));
        assert_eq!(decode(b"$2\r\nab\r\n"), Ok(Some((Reply::Bulk(b"ab"), 8))));
        assert_eq!(decode(b"-ERR x\r\n"), Ok(Some((Reply::Error(b"ERR x"), 8))));
        assert_eq!(decode(b"*1\r\n:1\r\n"), Ok(Some((Reply::Array(1), 4))));
        assert_eq!(decode(b"*-1\r\n"), Ok(Some((Reply::Nil, 5))));
        assert_eq!(decode(b"*12"), Ok(None));
        assert!(decode(b"*x\r\n").is_err());
        assert_eq!(decode(b"$2\r\na"), Ok(None));
        assert_eq!(decode(b""), Ok(None));
        assert!(decode(b"?what\r\n").is_err());
    }

    #[test]
    fn decodes_frames_one_at_a_time() {
        // A whole reply, walked frame by frame: scalars whole, aggregates by their headers.
        let reply = b"*4\r\n$5\r\nhello\r\n:-7\r\n%1\r\n+k\r\n_\r\n*-1\r\n";
        let expected = [
            Frame::Array(4),
            Frame::Bulk(b"hello"),
            Frame::Int(-7),
            Frame::Map(1),
            Frame::Simple(b"k"),
            Frame::Null,
            Frame::Null,
        ];
        let mut at = 0;
        for want in expected {
            let (frame, used) = decode_frame(&reply[at..]).unwrap().unwrap();
            assert_eq!(frame, want, "at {at}");
            // Every part of a frame asks for more bytes.
            for cut in at..at + used {
                assert_eq!(decode_frame(&reply[at..cut]), Ok(None), "{want:?} cut at {cut}");
            }
            at += used;
        }
        assert_eq!(at, reply.len());
        assert_eq!(decode_frame(b"~3\r\n"), Ok(Some((Frame::Set(3), 4))));
        assert_eq!(decode_frame(b">3\r\n"), Ok(Some((Frame::Push(3), 4))));
        assert_eq!(decode_frame(b"|1\r\n"), Ok(Some((Frame::Attribute(1), 4))));
        assert_eq!(decode_frame(b"%-1\r\n"), Ok(Some((Frame::Null, 5))));
        assert_eq!(decode_frame(b"$-1\r\n"), Ok(Some((Frame::Null, 5))));
        assert_eq!(decode_frame(b"#t\r\n"), Ok(Some((Frame::Other(b"#t"), 4))));
        assert_eq!(decode_frame(b"-ERR x\r\n"), Ok(Some((Frame::Error(b"ERR x"), 8))));
        assert!(decode_frame(b"%x\r\n").is_err());
        assert!(decode_frame(b"*x\r\n").is_err());
        assert!(decode_frame(b"=9\r\ntxt:hello\r\n").is_err());
        assert!(decode_frame(b"?what\r\n").is_err());
    }

    #[test]
    fn decodes_the_resp3_frames_of_a_push_connection() {
        let hello = b"%2\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nmodules\r\n*0\r\n+OK\r\n";
        assert_eq!(decode(hello), Ok(Some((Reply::Map { len: 2, mode: b"" }, hello.len() - 5))));
        let cluster = b"%3\r\n$5\r\nproto\r\n:3\r\n$4\r\nmode\r\n$7\r\ncluster\r\n$4\r\nrole\r\n+master\r\n";
        assert_eq!(decode(cluster), Ok(Some((Reply::Map { len: 3, mode: b"cluster" }, cluster.len()))));
        let simple = b"%1\r\n+mode\r\n+standalone\r\n";
        assert_eq!(decode(simple), Ok(Some((Reply::Map { len: 1, mode: b"standalone" }, simple.len()))));
        // A set has no entries; a mode that is not a string is none.
        let set = b"~2\r\n$4\r\nmode\r\n$7\r\ncluster\r\n";
        assert_eq!(decode(set), Ok(Some((Reply::Map { len: 2, mode: b"" }, set.len()))));
        let number = b"%1\r\n$4\r\nmode\r\n:1\r\n";
        assert_eq!(decode(number), Ok(Some((Reply::Map { len: 1, mode: b"" }, number.len()))));
        for cut in 0..hello.len() - 5 {
            assert_eq!(decode(&hello[..cut]), Ok(None), "{cut}");
        }
        let msg = b">3\r\n$7\r\nmessage\r\n$4\r\nch:a\r\n$3\r\ntok\r\n";
        assert_eq!(
            decode(msg),
            Ok(Some((Reply::Push { kind: b"message", channel: b"ch:a", data: b"tok" }, msg.len())))
        );
        let sub = b">3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n";
        assert_eq!(decode(sub), Ok(Some((Reply::Push { kind: b"subscribe", channel: b"c", data: b"" }, sub.len()))));
        for cut in 0..msg.len() {
            assert_eq!(decode(&msg[..cut]), Ok(None), "{cut}");
        }
        assert_eq!(decode(b"_\r\n"), Ok(Some((Reply::Nil, 3))));
        assert_eq!(decode(b"#t\r\n"), Ok(Some((Reply::Status(b"#t"), 4))));
        // Hostile nesting and lengths are refused, not followed.
        let mut deep = Vec::new();
        for _ in 0..100 {
            deep.extend_from_slice(b">1\r\n");
        }
        assert!(decode(&deep).is_err());
        assert!(decode(b">99999999\r\n").is_err());
        assert!(decode(b">1\r\n$3\r\nabcde\r\n").is_err());
    }

    #[test]
    fn the_integer_fast_path_agrees_with_redis_protocol() {
        for case in [
            &b":0\r\n"[..],
            b":1\r\n",
            b":-1\r\n",
            b":-0\r\n",
            b":007\r\n",
            b":+5\r\n",
            b":\r\n",
            b":-\r\n",
            b":1",
            b":1\r",
            b":12a\r\n",
            b":999999999999999999\r\n",
            b":9223372036854775807\r\n",
            b":-9223372036854775808\r\n",
            b":9223372036854775808\r\n",
            b":99999999999999999999999\r\n",
        ] {
            let general = match decode_range(case) {
                Ok(Some((RangeFrame::Integer(i), used))) => Ok(Some((Reply::Int(i), used))),
                Ok(None) => Ok(None),
                Ok(Some(other)) => panic!("{other:?}"),
                Err(e) => Err(e.details().to_owned()),
            };
            assert_eq!(decode(case), general, "{:?}", String::from_utf8_lossy(case));
        }
    }
}
