//! The encoded QP attributes the engine interprets: local ACK timeout, path MTU and the two
//! retry counts (IBTA §9.7.6 requester timeouts and retries, `ibv_modify_qp(3)`).

use crate::error::{Error, Result};
use core::time::Duration;

/// The local ACK timeout for the 5-bit `timeout` attribute: `4.096 µs × 2^timeout`, with 0
/// meaning "infinite" (`None`: the requester never times out and never retransmits on time).
///
/// | `timeout` | duration    |
/// |-----------|-------------|
/// | 0         | infinite    |
/// | 1         | 8.192 µs    |
/// | 8         | 1.048576 ms |
/// | 14        | 67.1 ms     |
/// | 18        | 1.07 s      |
/// | 31        | 8796 s      |
///
/// The IBTA lets an implementation wait anywhere from this value to four times it; the engine
/// uses the value itself.
///
/// # Errors
/// `EINVAL` if `timeout > 31`.
pub fn local_ack_timeout(timeout: u8) -> Result<Option<Duration>> {
    match timeout {
        0 => Ok(None),
        1..=31 => Ok(Some(Duration::from_nanos(4096u64 << timeout))),
        _ => Err(Error::InvalidArgument("QP timeout must be 0..=31")),
    }
}

/// A path MTU, with libibverbs' `enum ibv_mtu` values (also the IBTA PMTU encoding).
///
/// | `ibv_mtu`          | value | bytes |
/// |--------------------|-------|-------|
/// | `IBV_MTU_256`      | 1     | 256   |
/// | `IBV_MTU_512`      | 2     | 512   |
/// | `IBV_MTU_1024`     | 3     | 1024  |
/// | `IBV_MTU_2048`     | 4     | 2048  |
/// | `IBV_MTU_4096`     | 5     | 4096  |
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u32)]
pub enum Mtu {
    /// `IBV_MTU_256`.
    Mtu256 = 1,
    /// `IBV_MTU_512`.
    Mtu512 = 2,
    /// `IBV_MTU_1024`.
    Mtu1024 = 3,
    /// `IBV_MTU_2048`.
    Mtu2048 = 4,
    /// `IBV_MTU_4096`.
    Mtu4096 = 5,
}

impl Mtu {
    /// All MTUs, smallest first.
    pub const ALL: [Mtu; 5] = [
        Mtu::Mtu256,
        Mtu::Mtu512,
        Mtu::Mtu1024,
        Mtu::Mtu2048,
        Mtu::Mtu4096,
    ];

    /// The MTU with `ibv_mtu` value `v`.
    ///
    /// # Errors
    /// `EINVAL` unless `v` is 1..=5.
    pub fn from_ibv(v: u32) -> Result<Mtu> {
        match v {
            1..=5 => Ok(Mtu::ALL[v as usize - 1]),
            _ => Err(Error::InvalidArgument(
                "path MTU must be an ibv_mtu (1..=5)",
            )),
        }
    }

    /// The `ibv_mtu` value.
    pub fn ibv(self) -> u32 {
        self as u32
    }

    /// The payload bytes per packet: `128 << value`.
    pub fn bytes(self) -> u32 {
        128 << (self as u32)
    }

    /// The MTU of exactly `bytes` bytes.
    ///
    /// # Errors
    /// `EINVAL` unless `bytes` is 256, 512, 1024, 2048 or 4096.
    pub fn from_bytes(bytes: u32) -> Result<Mtu> {
        Mtu::ALL
            .into_iter()
            .find(|m| m.bytes() == bytes)
            .ok_or(Error::InvalidArgument(
                "path MTU must be 256, 512, 1024, 2048 or 4096 bytes",
            ))
    }
}

/// How many more times the requester may retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retries {
    /// At most this many more retries.
    Limited(u8),
    /// Retry for ever (`rnr_retry` = 7).
    Unlimited,
}

impl Retries {
    /// Uses up one retry if any is left: `true` means "retry", `false` means "the count is
    /// exceeded" (complete with `IBV_WC_RETRY_EXC_ERR` / `IBV_WC_RNR_RETRY_EXC_ERR`).
    pub fn try_consume(&mut self) -> bool {
        match self {
            Retries::Unlimited => true,
            Retries::Limited(0) => false,
            Retries::Limited(n) => {
                *n -= 1;
                true
            }
        }
    }
}

/// The transport retry budget for the 3-bit `retry_cnt` attribute (timeouts and NAK sequence
/// errors): 0..=7 retries, every value finite.
///
/// | `retry_cnt` | retries after the first try |
/// |-------------|-----------------------------|
/// | 0           | none                        |
/// | 1..=6       | that many                   |
/// | 7           | 7                           |
///
/// The IBTA (§9.7.6) gives "7 means infinite" to the RNR retry count only. Kernel rxe
/// (`rxe_comp.c`) also treats `retry_cnt` 7 as infinite; softrnic follows the spec instead, so
/// a dead peer ends with `IBV_WC_RETRY_EXC_ERR` after 7 retries.
///
/// # Errors
/// `EINVAL` if `retry_cnt > 7`.
pub fn transport_retries(retry_cnt: u8) -> Result<Retries> {
    match retry_cnt {
        0..=7 => Ok(Retries::Limited(retry_cnt)),
        _ => Err(Error::InvalidArgument("retry_cnt must be 0..=7")),
    }
}

/// The RNR retry budget for the 3-bit `rnr_retry` attribute (RNR NAKs).
///
/// | `rnr_retry` | retries after the first try |
/// |-------------|-----------------------------|
/// | 0           | none                        |
/// | 1..=6       | that many                   |
/// | 7           | unlimited                   |
///
/// # Errors
/// `EINVAL` if `rnr_retry > 7`.
pub fn rnr_retries(rnr_retry: u8) -> Result<Retries> {
    match rnr_retry {
        0..=6 => Ok(Retries::Limited(rnr_retry)),
        7 => Ok(Retries::Unlimited),
        _ => Err(Error::InvalidArgument("rnr_retry must be 0..=7")),
    }
}
