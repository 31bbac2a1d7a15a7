//! Address handles (`ibv_create_ah`, IBTA 11.2.2): where a UD send goes. On RoCE v2 an
//! address handle is its destination GID, which softrnic holds as the peer's IP address (an
//! IPv4-mapped GID as the IPv4 address).

use std::net::IpAddr;

use softrnic_provider::wr::UdDest;
use softrnic_provider::{Error, Result};

use crate::context::{Context, Pd};

/// An address handle (`ibv_ah`). It keeps its device alive.
pub struct Ah {
    _ctx: Context,
    dest: IpAddr,
}

impl Pd {
    /// `ibv_create_ah` for the peer at `dest` (the GRH's destination GID as an address).
    ///
    /// # Errors
    /// `EINVAL` for an unspecified address.
    pub fn create_ah(&self, dest: IpAddr) -> Result<Ah> {
        if dest.is_unspecified() {
            return Err(Error::InvalidArgument(
                "the address handle has no destination",
            ));
        }
        Ok(Ah {
            _ctx: self.ctx.clone(),
            dest: self.ctx.route(dest),
        })
    }
}

impl Ah {
    /// The peer's address.
    pub fn dest(&self) -> IpAddr {
        self.dest
    }

    /// The destination of a UD send WR (`ibv_send_wr.wr.ud`) through this handle to QP
    /// `remote_qpn` with `remote_qkey` (high bit set: the sending QP's own Q_Key).
    pub fn ud(&self, remote_qpn: u32, remote_qkey: u32) -> UdDest {
        UdDest {
            dest: self.dest,
            remote_qpn,
            remote_qkey,
        }
    }
}
