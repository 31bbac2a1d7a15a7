//! Shared receive queues (`ibv_create_srq`, `ibv_modify_srq`, `ibv_query_srq`,
//! `ibv_post_srq_recv`, `ibv_destroy_srq`; IBTA 10.2.9) and asynchronous events
//! (`ibv_get_async_event`, IBTA 11.6.3).

use softrnic_provider::event::AsyncEvent;
use softrnic_provider::srq::{SrqAttr, SrqAttrMask, SrqId};
use softrnic_provider::wr::RecvWr;
use softrnic_provider::{Error, Result};

use crate::context::{Context, Pd};

/// A shared receive queue (`ibv_srq`). Dropping it destroys it; see [`Srq::destroy`] for the
/// case where a QP still uses it.
pub struct Srq {
    pub(crate) ctx: Context,
    pub(crate) id: SrqId,
    /// Cleared once destroyed, so that `Drop` does not destroy it again.
    live: bool,
}

impl Pd {
    /// `ibv_create_srq` in this PD (`ibv_srq_init_attr.attr`). The `srq_limit` given here is
    /// checked but does not arm the limit (as in verbs: arm it with [`Srq::modify`]).
    ///
    /// # Errors
    /// `EINVAL` for `max_wr` of 0 or above `max_srq_wr`, `max_sge` above `max_srq_sge`, or
    /// `srq_limit` above `max_wr`; `ENOMEM` beyond `max_srq`.
    pub fn create_srq(&self, attr: &SrqAttr) -> Result<Srq> {
        let id = self.ctx.inner.device.nic().create_srq(self.handle, attr)?;
        Ok(Srq {
            ctx: self.ctx.clone(),
            id,
            live: true,
        })
    }
}

impl Srq {
    /// The handle of an SRQ just made in the NIC.
    pub(crate) fn from_id(ctx: Context, id: SrqId) -> Srq {
        Srq {
            ctx,
            id,
            live: true,
        }
    }

    /// `ibv_post_srq_recv` of a list of WRs. On an error, the WRs before the failed one are
    /// posted.
    ///
    /// # Errors
    /// (index of the bad WR, why): `ENOMEM` when `max_wr` WQEs are posted, `EINVAL` for more
    /// SGEs than `max_sge`.
    pub fn post_recv(&self, wrs: &[RecvWr]) -> core::result::Result<(), (usize, Error)> {
        let mut nic = self.ctx.inner.device.nic();
        wrs.iter()
            .enumerate()
            .try_for_each(|(i, w)| nic.post_srq_recv(self.id, w).map_err(|e| (i, e)))
    }

    /// `ibv_modify_srq`: `SrqAttrMask::MAX_WR` resizes, `SrqAttrMask::LIMIT` arms the limit
    /// (0 disarms).
    ///
    /// # Errors
    /// `EINVAL` for a bad value (see `softrnic_provider::srq::Srq::modify`).
    pub fn modify(&self, attr: &SrqAttr, mask: SrqAttrMask) -> Result<()> {
        self.ctx.inner.device.nic().modify_srq(self.id, attr, mask)
    }

    /// `ibv_query_srq`; `srq_limit` is 0 when the limit is not armed.
    ///
    /// # Errors
    /// None in practice (the SRQ exists while this handle does).
    pub fn query(&self) -> Result<SrqAttr> {
        self.ctx.inner.device.nic().query_srq(self.id)
    }

    /// The SRQ's handle, as asynchronous events name it (`Element::Srq`).
    pub fn handle(&self) -> u32 {
        self.id.0
    }

    /// `ibv_destroy_srq`, reporting failure.
    ///
    /// # Errors
    /// `EBUSY` while a QP uses the SRQ: the SRQ is given back, unharmed.
    pub fn destroy(mut self) -> core::result::Result<(), (Srq, Error)> {
        let r = self.ctx.inner.device.nic().destroy_srq(self.id);
        match r {
            Ok(()) => {
                self.live = false;
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }
}

impl Drop for Srq {
    fn drop(&mut self) {
        // With a QP still using it the NIC refuses (EBUSY) and the SRQ stays in its table for
        // good: drop QPs before their SRQ, or use `destroy` to find out.
        if !self.live {
            return;
        }
        let _ = self.ctx.inner.device.nic().destroy_srq(self.id);
    }
}

impl Context {
    /// `ibv_get_async_event`, non-blocking: the oldest event, or `None` if there is none now
    /// (libibverbs blocks on the async fd instead; poll this in a loop, or from an event
    /// thread). There is no `ibv_ack_async_event`: an event is returned by value. In polling
    /// mode it first makes one round of progress.
    pub fn get_async_event(&self) -> Option<AsyncEvent> {
        let dev = &self.inner.device;
        if dev.mode() == softrnic_provider::driver::Progress::Polling {
            dev.progress();
        }
        dev.nic().poll_async_event_of(self.inner.owner)
    }

    /// Sets what is called when asynchronous events become pending (an event fd's thread
    /// wakes then instead of polling): once, until [`Context::get_async_event`] has returned
    /// `None`. `f` runs on the device's thread or a polling one with the device locked: it
    /// must only signal (unpark a thread, write an eventfd).
    pub fn set_async_notifier(&self, f: impl Fn() + Send + Sync + 'static) {
        let n = softrnic_provider::cq::Notifier(std::sync::Arc::new(f));
        self.inner
            .device
            .nic()
            .set_event_notifier_of(self.inner.owner, n);
    }
}
