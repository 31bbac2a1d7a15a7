//! Passing a socket from the agent to a process over a Unix stream (`SCM_RIGHTS`,
//! `unix(7)`): a few bytes of message with one descriptor beside them.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// Room for one `SCM_RIGHTS` control message of one descriptor, aligned as `cmsghdr` must be.
#[repr(C, align(8))]
struct Control([u8; 32]);

// SAFETY: CMSG_SPACE only computes a length.
const _: () = assert!(unsafe { libc::CMSG_SPACE(size_of::<RawFd>() as u32) } as usize <= 32);

/// Sends `msg` on `s`, with `fd` beside it if given.
///
/// # Errors
/// `sendmsg`'s.
pub fn send(s: &UnixStream, msg: &[u8], fd: Option<RawFd>) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: msg.as_ptr().cast_mut().cast(),
        iov_len: msg.len(),
    };
    let mut control = Control([0; 32]);
    // SAFETY: all-zero is a valid msghdr.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    if let Some(fd) = fd {
        hdr.msg_control = control.0.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE only computes a length.
        hdr.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<RawFd>() as u32) } as _;
        // SAFETY: msg_control points at `control`, room for one header and one descriptor.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&hdr);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as _;
            libc::CMSG_DATA(c).cast::<RawFd>().write_unaligned(fd);
        }
    }
    // SAFETY: `hdr` points at `iov` and `control`, alive during the call.
    let n = unsafe { libc::sendmsg(s.as_raw_fd(), &hdr, libc::MSG_NOSIGNAL) };
    match n {
        n if n < 0 => Err(io::Error::last_os_error()),
        n if n as usize != msg.len() => Err(io::ErrorKind::WriteZero.into()),
        _ => Ok(()),
    }
}

/// Receives exactly `buf.len()` bytes from `s` (blocking, as `s` is), with the descriptor
/// sent beside them if any (close-on-exec). `Ok(None)` at end of stream.
///
/// # Errors
/// `recvmsg`'s; `UnexpectedEof` for a message cut short.
pub fn recv(s: &UnixStream, buf: &mut [u8]) -> io::Result<Option<Option<OwnedFd>>> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = Control([0; 32]);
    // SAFETY: all-zero is a valid msghdr.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = control.0.as_mut_ptr().cast();
    hdr.msg_controllen = control.0.len() as _;
    // SAFETY: `hdr` points at `iov` and `control`, alive during the call.
    let n = unsafe {
        libc::recvmsg(
            s.as_raw_fd(),
            &mut hdr,
            libc::MSG_WAITALL | libc::MSG_CMSG_CLOEXEC,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fd = None;
    // SAFETY: the kernel filled `hdr.msg_control` with complete control messages.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&hdr);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let raw = libc::CMSG_DATA(c).cast::<RawFd>().read_unaligned();
                fd = Some(OwnedFd::from_raw_fd(raw));
            }
            c = libc::CMSG_NXTHDR(&hdr, c);
        }
    }
    match n as usize {
        0 => Ok(None),
        n if n < buf.len() => Err(io::ErrorKind::UnexpectedEof.into()),
        _ => Ok(Some(fd)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_descriptor_crosses_with_its_message() {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut p, q) = UnixStream::pair().unwrap();
        send(&a, b"slot", Some(q.as_raw_fd())).unwrap();
        let mut buf = [0u8; 4];
        let fd = recv(&b, &mut buf).unwrap().unwrap().expect("a descriptor");
        assert_eq!(&buf, b"slot");
        // The received descriptor is q's socket: what p writes, it reads.
        p.write_all(b"x").unwrap();
        let mut got = [0u8; 1];
        UnixStream::from(fd).read_exact(&mut got).unwrap();
        assert_eq!(&got, b"x");
        send(&a, b"none", None).unwrap();
        assert!(recv(&b, &mut buf).unwrap().unwrap().is_none());
        drop(a);
        assert!(recv(&b, &mut buf).unwrap().is_none(), "end of stream");
    }
}
