//! The TCP options every adapter applies, written once: `TCP_NODELAY` and keepalive on every
//! connection, and an abortive close for connections the engine failed.

use std::io;

/// A socket whose options the client layer can set (`TCP_NODELAY`, keepalive, a reset on
/// close): any file descriptor on Unix, implemented for every [`AsFd`](std::os::fd::AsFd).
#[cfg(unix)]
pub trait AsSocket: std::os::fd::AsFd {}
#[cfg(unix)]
impl<T: std::os::fd::AsFd> AsSocket for T {}

/// A socket whose options can be set (on this platform, none are).
#[cfg(not(unix))]
pub trait AsSocket {}
#[cfg(not(unix))]
impl<T> AsSocket for T {}

/// Tune a freshly connected TCP socket: `TCP_NODELAY` (a lock round is a handful of tiny
/// requests; Nagle would hold them back) and keepalive probes (first after 10 s idle, then
/// every 5 s, 3 unanswered probes end it), so that a peer that vanished without a word (a
/// power loss, a dropped route) is noticed by the kernel even on an idle connection.
pub(crate) fn configure_tcp(socket: &impl AsSocket) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::time::Duration;
        let s = socket2::SockRef::from(socket);
        s.set_tcp_nodelay(true)?;
        let mut keepalive = socket2::TcpKeepalive::new().with_time(Duration::from_secs(10));
        #[cfg(any(target_os = "linux", target_os = "android", target_os = "macos", target_os = "freebsd"))]
        {
            keepalive = keepalive.with_interval(Duration::from_secs(5)).with_retries(3);
        }
        s.set_tcp_keepalive(&keepalive)?;
    }
    #[cfg(not(unix))]
    let _ = socket;
    Ok(())
}

/// Make closing `socket` reset the connection (`SO_LINGER` 0: an RST, not a FIN), for a
/// connection the engine failed (garbage, a refused handshake, silence): the server then
/// discards what it has not executed yet, so no stale command of the old connection runs after
/// the new connection's. Best effort: on failure the close is an ordinary one.
pub(crate) fn reset_on_close(socket: &impl AsSocket) {
    #[cfg(unix)]
    {
        let _ = socket2::SockRef::from(socket).set_linger(Some(std::time::Duration::ZERO));
    }
    #[cfg(not(unix))]
    let _ = socket;
}

#[cfg(all(test, unix))]
mod tests {
    use std::io::{ErrorKind, Read};
    use std::net::{TcpListener, TcpStream};

    use super::*;

    #[test]
    fn configured_sockets_probe_and_reset_closes_the_peer_with_an_rst() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        configure_tcp(&client).unwrap();
        let s = socket2::SockRef::from(&client);
        assert!(s.tcp_nodelay().unwrap() && s.keepalive().unwrap());
        reset_on_close(&client);
        assert_eq!(s.linger().unwrap(), Some(std::time::Duration::ZERO));
        drop(client);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut buf = [0u8; 8];
        // An ordinary close reads as end of stream (Ok(0)); a reset as an error.
        let read = server.read(&mut buf);
        assert!(matches!(&read, Err(e) if e.kind() == ErrorKind::ConnectionReset), "{read:?}");
    }
}
