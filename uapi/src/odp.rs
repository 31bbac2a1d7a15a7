//! On-demand paging: `ibv_advise_mr(3)` on a [`Pd`]. A region is an ODP region when it is
//! registered with [`Access::ON_DEMAND`](crate::Access::ON_DEMAND); the device reports the
//! capabilities in [`ODP_GENERAL_CAPS`] and [`ODP_TRANSPORT_CAPS`]. What prefetch does on a
//! software NIC is explained in the provider's `mr/odp.rs`.

pub use softrnic_provider::mr::{
    Advice, AdviseError, AdviseFlags, OdpGeneralCaps, OdpTransportCap, OdpTransportCaps,
    ODP_GENERAL_CAPS, ODP_TRANSPORT_CAPS,
};

use crate::context::Pd;
use crate::Sge;

impl Pd {
    /// `ibv_advise_mr(pd, advice, flags, sges)`: prefetches the ranges of `sges`, each in an
    /// ODP region of this PD. `flags` is empty or [`AdviseFlags::FLUSH`] (wait for the paging and
    /// report its failure).
    ///
    /// # Errors
    ///
    /// As `ibv_advise_mr(3)`; see [`AdviseError`].
    pub fn advise_mr(
        &self,
        advice: Advice,
        flags: AdviseFlags,
        sges: &[Sge],
    ) -> Result<(), AdviseError> {
        self.ctx
            .inner
            .device
            .mrs()
            .advise(self.handle, advice, flags, sges)
    }
}
