//! The monitor's end of the CUPTI collector (the `golow-cupti` crate, loaded into each worker by CUDA): the socket a
//! worker's collector writes to, and its messages turned into events.

use std::io;
use std::os::fd::OwnedFd;

use golow_protocol::collector::{MAX_MESSAGE_BYTES, Message};
use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
use rustix::net::{AddressFamily, RecvFlags, SocketFlags, SocketType, recv, socketpair};
use tokio::io::unix::AsyncFd;

use golow_protocol::event::Body;

/// A connected pair of message sockets, both close-on-exec: the monitor keeps the first, a worker gets the second.
pub fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// The socket's inode, which the collector checks its descriptor against.
pub fn inode(socket: &OwnedFd) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::File::from(socket.try_clone()?).metadata()?.ino())
}

/// One collector message as an event; what is not a message is a protocol error, never a crash.
pub fn body_of(message: &[u8]) -> Body {
    match serde_json::from_slice::<Message>(message) {
        Ok(Message::Kernels(window)) => Body::Kernels(Box::new(window)),
        Ok(Message::Collector(status)) => Body::Collector(status),
        Err(e) => Body::ProtocolError {
            message: format!("CUPTI collector message skipped: {e}"),
        },
    }
}

/// Forwards every message from the monitor's end of a [`socket_pair`] until all the worker's copies are closed.
pub async fn forward<F: Future<Output = ()>>(socket: OwnedFd, mut on_body: impl FnMut(Body) -> F) {
    if let Ok(flags) = fcntl_getfl(&socket) {
        let _ = fcntl_setfl(&socket, flags | OFlags::NONBLOCK);
    }
    // SAFETY: the AsyncFd owns the descriptor, which stays open for its whole life.
    let Ok(socket) = (unsafe { AsyncFd::register(socket) }) else {
        return;
    };
    let mut buffer = vec![0u8; MAX_MESSAGE_BYTES];
    loop {
        let Ok(mut ready) = socket.readable().await else {
            return;
        };
        let received = ready.try_io(|fd| {
            let (_, whole_length) = recv(fd, &mut buffer[..], RecvFlags::TRUNC)?;
            Ok(whole_length)
        });
        match received {
            Err(_would_block) => continue,
            Ok(Ok(0)) => return,
            // MSG_TRUNC reports a message's whole length, so one longer than the buffer is seen as such.
            Ok(Ok(n)) if n > buffer.len() => {
                on_body(Body::ProtocolError {
                    message: format!(
                        "CUPTI collector message of {n} bytes skipped (the limit is {MAX_MESSAGE_BYTES})"
                    ),
                })
                .await;
            }
            Ok(Ok(n)) => on_body(body_of(&buffer[..n])).await,
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
            Ok(Err(_)) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(fd: &OwnedFd, bytes: &[u8]) {
        let n = rustix::net::send(fd, bytes, rustix::net::SendFlags::empty()).unwrap();
        assert_eq!(n, bytes.len());
    }

    #[tokio::test]
    async fn messages_arrive_whole_and_bad_ones_become_protocol_errors() {
        let (monitor, worker) = socket_pair().unwrap();
        send(
            &worker,
            br#"{"type":"collector","active":false,"detail":"no driver"}"#,
        );
        send(&worker, b"{not json");
        send(&worker, &vec![b' '; MAX_MESSAGE_BYTES + 10]);
        drop(worker);
        let mut bodies = Vec::new();
        forward(monitor, |b| {
            bodies.push(b);
            std::future::ready(())
        })
        .await;
        assert_eq!(bodies.len(), 3);
        assert!(matches!(&bodies[0], Body::Collector(s) if !s.active && s.detail == "no driver"));
        assert!(
            matches!(&bodies[1], Body::ProtocolError { message } if message.contains("collector"))
        );
        assert!(
            matches!(&bodies[2], Body::ProtocolError { message } if message.contains("bytes skipped"))
        );
    }
}
