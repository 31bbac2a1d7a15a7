//! Static rate conversions: `ibv_rate_to_mult`, `mult_to_ibv_rate`, `ibv_rate_to_mbps`,
//! `mbps_to_ibv_rate` (rdma-core 44 `libibverbs/verbs.c`; man pages `ibv_rate_to_mult(3)`,
//! `ibv_rate_to_mbps(3)`).
//!
//! `enum ibv_rate` is the static rate of an address vector (`ibv_ah_attr.static_rate`). Its
//! values are not in speed order (they grew with each new link speed), so each conversion is
//! a lookup in one table, [`RATES`]. The *multiplier* is the rate as a multiple of 2.5 Gb/s,
//! the SDR 1x link; only the rates that are such a multiple have one (FDR's 14.0625 Gb/s,
//! EDR's 25.78125 Gb/s and their widths are not, and `ibv_rate_to_mult` gives -1 for them, as
//! rdma-core's does). The *Mb/s* value is the signalling rate, rounded down as rdma-core
//! rounds it (14062 for 14.0625 Gb/s). A value not in the table converts to -1, or to
//! `IBV_RATE_MAX` the other way.
//!
//! These are pure functions: softrnic has no static rate limiting, but programs print and
//! compare rates with them (`ibv_devinfo`'s active speed, pyverbs' tests).

use libc::{c_int, c_uint};

use crate::export::export;

/// `IBV_RATE_MAX`: "no rate", what the reverse conversions give for an unknown value.
const IBV_RATE_MAX: c_uint = 0;

/// One `enum ibv_rate` value: its name and number, its multiple of 2.5 Gb/s (if any), its
/// Mb/s.
struct Rate {
    /// Read by the test that checks the table against the installed `verbs.h`.
    #[cfg_attr(not(test), allow(dead_code))]
    name: &'static str,
    value: c_uint,
    mult: Option<c_int>,
    mbps: c_int,
}

/// A row of [`RATES`].
const fn rate(name: &'static str, value: c_uint, mult: Option<c_int>, mbps: c_int) -> Rate {
    Rate {
        name,
        value,
        mult,
        mbps,
    }
}

/// Every value of rdma-core 44's `enum ibv_rate` but `IBV_RATE_MAX`.
#[rustfmt::skip]
const RATES: &[Rate] = &[
    rate("IBV_RATE_2_5_GBPS", 2, Some(1), 2500),
    rate("IBV_RATE_5_GBPS", 5, Some(2), 5000),
    rate("IBV_RATE_10_GBPS", 3, Some(4), 10000),
    rate("IBV_RATE_20_GBPS", 6, Some(8), 20000),
    rate("IBV_RATE_30_GBPS", 4, Some(12), 30000),
    rate("IBV_RATE_40_GBPS", 7, Some(16), 40000),
    rate("IBV_RATE_60_GBPS", 8, Some(24), 60000),
    rate("IBV_RATE_80_GBPS", 9, Some(32), 80000),
    rate("IBV_RATE_120_GBPS", 10, Some(48), 120000),
    rate("IBV_RATE_14_GBPS", 11, None, 14062), // FDR 1x
    rate("IBV_RATE_56_GBPS", 12, None, 56250), // FDR 4x
    rate("IBV_RATE_112_GBPS", 13, None, 112500), // FDR 8x
    rate("IBV_RATE_168_GBPS", 14, None, 168750), // FDR 12x
    rate("IBV_RATE_25_GBPS", 15, None, 25781), // EDR 1x
    rate("IBV_RATE_100_GBPS", 16, None, 103125), // EDR 4x
    rate("IBV_RATE_200_GBPS", 17, None, 206250), // EDR 8x
    rate("IBV_RATE_300_GBPS", 18, None, 309375), // EDR 12x
    rate("IBV_RATE_28_GBPS", 19, Some(11), 28125),
    rate("IBV_RATE_50_GBPS", 20, Some(20), 53125),
    rate("IBV_RATE_400_GBPS", 21, Some(160), 425000),
    rate("IBV_RATE_600_GBPS", 22, Some(240), 637500),
    rate("IBV_RATE_800_GBPS", 23, Some(320), 850000),
    rate("IBV_RATE_1200_GBPS", 24, Some(480), 1275000),
];

/// The table's row for the enum value `rate`.
fn row(rate: c_uint) -> Option<&'static Rate> {
    RATES.iter().find(|r| r.value == rate)
}

export! { "IBVERBS_1.0";
    /// `int ibv_rate_to_mult(enum ibv_rate rate)`: the rate as a multiple of 2.5 Gb/s (4 for
    /// `IBV_RATE_10_GBPS`), or -1 if it is none or `rate` is unknown.
    unsafe extern "C" fn ibv_rate_to_mult(rate: c_uint) -> c_int {
        row(rate).and_then(|r| r.mult).unwrap_or(-1)
    }
}

export! { "IBVERBS_1.0";
    /// `enum ibv_rate mult_to_ibv_rate(int mult)`: the rate that is `mult` times 2.5 Gb/s, or
    /// `IBV_RATE_MAX` if there is none.
    unsafe extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_uint {
        RATES.iter().find(|r| r.mult == Some(mult)).map_or(IBV_RATE_MAX, |r| r.value)
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_rate_to_mbps(enum ibv_rate rate)`: the rate in Mb/s (103125 for
    /// `IBV_RATE_100_GBPS`), or -1 if `rate` is unknown.
    unsafe extern "C" fn ibv_rate_to_mbps(rate: c_uint) -> c_int {
        row(rate).map_or(-1, |r| r.mbps)
    }
}

export! { "IBVERBS_1.1";
    /// `enum ibv_rate mbps_to_ibv_rate(int mbps)`: the rate of exactly `mbps` Mb/s, or
    /// `IBV_RATE_MAX` if there is none.
    unsafe extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_uint {
        RATES.iter().find(|r| r.mbps == mbps).map_or(IBV_RATE_MAX, |r| r.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_the_enum_of_the_installed_verbs_h() {
        let Ok(h) = std::fs::read_to_string("/usr/include/infiniband/verbs.h") else {
            softrnic_testkit::skip(
                "the_table_is_the_enum_of_the_installed_verbs_h",
                "no verbs.h (apt-get install libibverbs-dev)",
            );
            return;
        };
        let start = h.find("enum ibv_rate {").expect("enum ibv_rate in verbs.h");
        let body = &h[start..start + h[start..].find("};").expect("its end")];
        let mut header: Vec<(String, c_uint)> = body
            .lines()
            .filter_map(|l| {
                let (name, value) = l.trim().trim_end_matches(',').split_once('=')?;
                Some((name.trim().to_string(), value.trim().parse().ok()?))
            })
            .filter(|(name, _)| name != "IBV_RATE_MAX")
            .collect();
        let mut ours: Vec<(String, c_uint)> = RATES
            .iter()
            .map(|r| (r.name.to_string(), r.value))
            .collect();
        header.sort();
        ours.sort();
        assert_eq!(ours, header);
    }

    #[test]
    fn every_enum_value_converts_and_back() {
        // SAFETY (every call below): pure functions of integers.
        for r in RATES {
            assert_eq!(unsafe { ibv_rate_to_mbps(r.value) }, r.mbps, "{}", r.name);
            assert_eq!(unsafe { mbps_to_ibv_rate(r.mbps) }, r.value, "{}", r.name);
            assert_eq!(
                unsafe { ibv_rate_to_mult(r.value) },
                r.mult.unwrap_or(-1),
                "{}",
                r.name
            );
            if let Some(m) = r.mult {
                assert_eq!(unsafe { mult_to_ibv_rate(m) }, r.value, "{}", r.name);
            }
        }
        // IBV_RATE_MAX, the unassigned 1 and values past the enum have neither.
        for rate in [IBV_RATE_MAX, 1, 25, 26, 255, c_uint::MAX] {
            assert_eq!(unsafe { ibv_rate_to_mult(rate) }, -1);
            assert_eq!(unsafe { ibv_rate_to_mbps(rate) }, -1);
        }
    }

    #[test]
    fn values_of_the_man_pages_and_verbs_c() {
        // SAFETY: pure functions of integers.
        unsafe {
            assert_eq!(ibv_rate_to_mult(3), 4); // IBV_RATE_10_GBPS
            assert_eq!(ibv_rate_to_mult(16), -1); // IBV_RATE_100_GBPS: EDR, no multiple
            assert_eq!(ibv_rate_to_mbps(11), 14062); // IBV_RATE_14_GBPS
            assert_eq!(ibv_rate_to_mbps(16), 103125); // IBV_RATE_100_GBPS
            assert_eq!(mult_to_ibv_rate(1), 2); // IBV_RATE_2_5_GBPS
            assert_eq!(mult_to_ibv_rate(3), IBV_RATE_MAX);
            assert_eq!(mbps_to_ibv_rate(100000), IBV_RATE_MAX); // not 103125
            assert_eq!(mbps_to_ibv_rate(-1), IBV_RATE_MAX);
        }
    }
}
