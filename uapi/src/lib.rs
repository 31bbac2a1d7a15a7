//! softrnic-uapi: the verbs API, as a safe Rust API that maps one-to-one onto libibverbs
//! (`ibv_open_device`, `ibv_alloc_pd`, `ibv_reg_mr`, `ibv_create_cq`, `ibv_create_qp`,
//! `ibv_modify_qp`, `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq`, the SRQ verbs, the memory
//! window verbs (`ibv_alloc_mw`, `ibv_bind_mw`, `ibv_dealloc_mw`),
//! `ibv_get_async_event`; names and numeric values
//! of `ibv_wc_status`, `ibv_wc_opcode`, `ibv_wr_opcode`, `ibv_qp_state`, `ibv_mtu` kept).
//! The C ABI, softrnic's drop-in `libibverbs.so.1` (`uapi/ibverbs`), is built on the same
//! objects.
//!
//! # Memory and aliasing
//!
//! The NIC reads and writes registered memory at any time, from its own thread, as a DMA
//! engine does. Safe code must never hold a Rust reference to bytes the NIC may write, so:
//!
//! * [`Pd::reg_mr`] allocates the region itself (zeroed, page-aligned) and owns it. Safe code
//!   reaches the bytes only by copying through [`MemoryRegion::read`] / [`MemoryRegion::write`],
//!   which go through the key table's lock like every NIC access: no `&[u8]` into the region
//!   ever escapes.
//! * [`Pd::reg_mr_raw`] registers memory the caller owns; it is `unsafe`, and the caller
//!   promises what a C program promises to `ibv_reg_mr`. The C ABI uses it.
//!
//! Dropping a [`MemoryRegion`] deregisters it (waiting for accesses in progress), so its keys
//! are dead before its memory is freed.
//!
//! Relaxed regions ([`Pd::reg_mr_relaxed`], Solaris OFED's) are the exception by design: their
//! keys live on after [`MemoryRegion::dereg_relaxed`] until [`Pd::flush_relaxed_mr`], so a
//! relaxed region that owns its buffer frees it only after that flush.

#![deny(missing_docs)]

mod ah;
pub mod cm;
mod context;
mod descriptor;
mod dm;
pub mod log;
mod mr;
mod mr_file;
mod mw;
mod odp;
pub mod pcap;
mod qp;
mod rdma_verbs;
mod relaxed;
mod shared;
mod spin;
mod srq;
mod xrc;

pub use ah::Ah;
pub use context::{Context, Cq, OpenOptions, Pd, ETIMEDOUT};
pub use descriptor::{DescriptorError, RemoteMr, Usage, DESCRIPTOR_LEN};
pub use dm::{DeviceMemory, DM_ALIGN, MAX_DM_SIZE};
pub use mr::MemoryRegion;
pub use mr_file::{atomic_write_wr, flush_wr, Placement};
pub use mw::{inc_rkey, local_inv_wr, Mw};
pub use odp::*;
pub use qp::{QpInitAttr, QpObserver, QueuePair};
pub use relaxed::{RELAXED_PAGE, RELAXED_POOL_DEFAULT};
pub use softrnic_wire::feth::Selectivity;
pub use spin::{set_spin, DEFAULT_SPIN};
pub use srq::Srq;
pub use xrc::Xrcd;

pub use softrnic_provider::device::{DeviceAttr, Gid, PortAttr};
pub use softrnic_provider::driver::Progress;
pub use softrnic_provider::event::{AsyncEvent, Element, EventType};
pub use softrnic_provider::mr::{Access, MwBind, MwType};
pub use softrnic_provider::qp::{ConnectAttr, QpAttr, QpCaps, MAX_INLINE};
pub use softrnic_provider::qp_state::{AttrMask, Mtu, QpState, QpType};
pub use softrnic_provider::srq::{SrqAttr, SrqAttrMask};
pub use softrnic_provider::wc::{WcFlags, WcOpcode, WcStatus, WorkCompletion};
pub use softrnic_provider::wr::{
    InlineData, RecvWr, RemoteAddr, SendFlags, SendOpcode, SendWr, Sge, UdDest,
};
pub use softrnic_provider::{Error, Result};
