//! The choice every tuned preparation makes, in one place: candidates are timed one by one
//! (SpMM's launches through its harness, `spmm/tune.rs`; SpMV's inside CUDA graphs) and offered
//! to a [`Fastest`], which keeps the fastest. It times and builds nothing itself.

/// The fastest candidate offered so far and its time (ms); a candidate replaces it only when
/// strictly faster.
#[derive(Debug)]
pub(crate) struct Fastest<T>(Option<(f64, T)>);

impl<T> Default for Fastest<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<T> Fastest<T> {
    /// Nothing offered yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Whether a candidate of `ms` would be kept (strictly faster, or the first).
    pub(crate) fn beats(&self, ms: f64) -> bool {
        self.0.as_ref().is_none_or(|b| ms < b.0)
    }

    /// Keeps the candidate `make()` of `ms` when it [`beats`](Self::beats) the fastest so far;
    /// says whether it did (`make` runs only then).
    pub(crate) fn offer(&mut self, ms: f64, make: impl FnOnce() -> T) -> bool {
        let kept = self.beats(ms);
        if kept {
            self.0 = Some((ms, make()));
        }
        kept
    }

    /// The fastest candidate and its time.
    pub(crate) fn into_inner(self) -> Option<(f64, T)> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Fastest;

    #[test]
    fn the_strictly_fastest_is_kept_and_ties_keep_the_first() {
        let mut f = Fastest::new();
        assert!(f.beats(f64::MAX));
        assert!(f.offer(2.0, || "a"));
        assert!(!f.offer(2.0, || "tie"));
        assert!(!f.offer(3.0, || "slower"));
        assert!(f.offer(1.5, || "b"));
        assert!(!f.beats(1.5) && f.beats(1.4));
        assert_eq!(f.into_inner(), Some((1.5, "b")));
    }
}
