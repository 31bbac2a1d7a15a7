//! Round-trip statistics shared by every latency line: the mean, and nearest-rank percentiles
//! of the individual round trips (a mean alone hides the preemptions a 2-core machine sees).

/// The round trips of one latency test.
#[derive(Clone, Debug)]
pub struct Rtt {
    /// Mean round trip, in microseconds.
    pub mean_us: f64,
    /// Median round trip (nearest rank), in microseconds.
    pub median_us: f64,
    /// 99th percentile round trip (nearest rank), in microseconds.
    pub p99_us: f64,
    /// Every round trip in nanoseconds, sorted ascending.
    pub ns: Vec<u64>,
}

impl Rtt {
    /// The statistics of `ns` (round trips in nanoseconds, any order); `None` if it is empty.
    pub fn from_ns(mut ns: Vec<u64>) -> Option<Rtt> {
        if ns.is_empty() {
            return None;
        }
        ns.sort_unstable();
        let mean = ns.iter().sum::<u64>() as f64 / ns.len() as f64;
        Some(Rtt {
            mean_us: mean / 1e3,
            median_us: nearest_rank(&ns, 50) as f64 / 1e3,
            p99_us: nearest_rank(&ns, 99) as f64 / 1e3,
            ns,
        })
    }

    /// The figures of a report line's JSON: `iters`, `mean_us`, `median_us`, `p99_us`.
    pub fn fields(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::from_iter([
            ("iters".to_owned(), self.ns.len().into()),
            ("mean_us".to_owned(), self.mean_us.into()),
            ("median_us".to_owned(), self.median_us.into()),
            ("p99_us".to_owned(), self.p99_us.into()),
        ])
    }

    /// `median 6.3, p99 7.9`: the detail printed after the mean.
    pub fn detail(&self) -> String {
        format!("median {:.1}, p99 {:.1}", self.median_us, self.p99_us)
    }
}

/// The `p`-th percentile of `sorted` by the nearest-rank method; `sorted` is not empty.
fn nearest_rank(sorted: &[u64], p: usize) -> u64 {
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::{nearest_rank, Rtt};

    #[test]
    fn nearest_rank_picks_the_smallest_sample_covering_p_percent() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&v, 50), 50);
        assert_eq!(nearest_rank(&v, 99), 99);
        assert_eq!(nearest_rank(&[7], 50), 7);
        assert_eq!(nearest_rank(&[7], 99), 7);
        assert_eq!(nearest_rank(&[1, 2, 3], 50), 2);
        assert_eq!(nearest_rank(&[1, 2, 3], 99), 3);
    }

    #[test]
    fn from_ns_sorts_and_summarises() {
        let r = Rtt::from_ns(vec![3000, 1000, 2000]).expect("not empty");
        assert_eq!(r.ns, [1000, 2000, 3000]);
        assert_eq!(r.mean_us, 2.0);
        assert_eq!(r.median_us, 2.0);
        assert_eq!(r.p99_us, 3.0);
        assert!(Rtt::from_ns(Vec::new()).is_none());
    }
}
