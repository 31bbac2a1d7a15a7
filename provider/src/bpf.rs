//! Classic BPF (`linux/filter.h`): the instruction codes the transports' programs use, and
//! attaching a program to a socket. Two programs run in the kernel for softrnic: the packet
//! ring's filter (`transport/udp/ring.rs`) and the reuseport group's steering program
//! (`host/steer.rs`).

use std::io;
use std::os::fd::RawFd;

/// `BPF_LD | BPF_B | BPF_ABS`: A = byte at k.
pub const LD_B_ABS: u16 = 0x30;
/// `BPF_LD | BPF_H | BPF_ABS`: A = big-endian half-word at k.
pub const LD_H_ABS: u16 = 0x28;
/// `BPF_LD | BPF_W | BPF_ABS`: A = big-endian word at k.
pub const LD_W_ABS: u16 = 0x20;
/// `BPF_LD | BPF_H | BPF_IND`: A = big-endian half-word at x + k.
pub const LD_H_IND: u16 = 0x48;
/// `BPF_LD | BPF_W | BPF_IND`: A = big-endian word at x + k.
pub const LD_W_IND: u16 = 0x40;
/// `BPF_LD | BPF_W | BPF_LEN`: A = the packet's length.
pub const LD_W_LEN: u16 = 0x80;
/// `BPF_LDX | BPF_B | BPF_MSH`: x = 4 * (byte at k & 0xf), an IPv4 header's length.
pub const LDX_MSH: u16 = 0xb1;
/// `BPF_ALU | BPF_AND | BPF_K`.
pub const AND_K: u16 = 0x54;
/// `BPF_ALU | BPF_RSH | BPF_K`.
pub const RSH_K: u16 = 0x74;
/// `BPF_JMP | BPF_JEQ | BPF_K`.
pub const JEQ_K: u16 = 0x15;
/// `BPF_JMP | BPF_JGT | BPF_K`.
pub const JGT_K: u16 = 0x25;
/// `BPF_JMP | BPF_JGE | BPF_K`.
pub const JGE_K: u16 = 0x35;
/// `BPF_JMP | BPF_JSET | BPF_K`.
pub const JSET_K: u16 = 0x45;
/// `BPF_RET | BPF_K`: return k.
pub const RET_K: u16 = 0x06;
/// `BPF_RET | BPF_A`: return A.
pub const RET_A: u16 = 0x16;

/// One instruction.
pub const fn op(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Attaches `program` to socket `fd` as socket option `option` of `SOL_SOCKET`
/// (`SO_ATTACH_FILTER`, `SO_ATTACH_REUSEPORT_CBPF`).
///
/// # Errors
/// The kernel's: `EINVAL` for a program it refuses, or an option the socket cannot take.
pub fn attach(fd: RawFd, option: libc::c_int, program: &[libc::sock_filter]) -> io::Result<()> {
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points at `program`, alive during the call; the kernel copies it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            (&prog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
