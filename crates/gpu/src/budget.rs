//! A device-allocation budget for fault injection: every allocation through a [`Gpu`](crate::Gpu)
//! handle's helpers ([`Gpu::upload`](crate::Gpu::upload), [`Gpu::upload_inspected`](crate::Gpu::upload_inspected),
//! [`Gpu::alloc_zeros`](crate::Gpu::alloc_zeros)) draws its bytes from the budget, and an
//! allocation past it is refused with [`GpuError::OutOfMemory`](crate::GpuError::OutOfMemory)
//! before the driver is asked. Frees give nothing back: the budget counts the bytes asked for
//! since it was set, so a preparation (whose allocations are the same on every run) fails at the
//! same allocation every time, which makes device out-of-memory testable deterministically on
//! any GPU. Set per handle with [`Gpu::set_alloc_budget`](crate::Gpu::set_alloc_budget), or for
//! every handle the process opens with [`ALLOC_BUDGET_ENV`].

use std::sync::atomic::{AtomicU64, Ordering};

/// Environment variable read when a [`Gpu`](crate::Gpu) handle is made: an allocation budget in
/// bytes (`K`/`M`/`G`/`T` suffixes, powers of 1024, as `TCSPARSE_MEMORY_BUDGET`).
pub const ALLOC_BUDGET_ENV: &str = "TCSPARSE_GPU_ALLOC_BUDGET";

/// `u64::MAX` in [`AllocBudget::limit`] means "no budget".
const NONE: u64 = u64::MAX;

/// A refused draw: what had been drawn and the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    /// Bytes drawn before the refused request.
    pub drawn: u64,
    /// The budget.
    pub limit: u64,
}

/// Bytes drawn against an optional limit (lock-free; shared by every clone of a handle).
#[derive(Debug)]
pub struct AllocBudget {
    limit: AtomicU64,
    drawn: AtomicU64,
}

impl Default for AllocBudget {
    fn default() -> Self {
        Self::new(None)
    }
}

impl AllocBudget {
    /// A budget of `limit` bytes (`None`: unlimited), nothing drawn.
    pub fn new(limit: Option<u64>) -> Self {
        Self {
            limit: AtomicU64::new(limit.unwrap_or(NONE)),
            drawn: AtomicU64::new(0),
        }
    }

    /// The budget from [`ALLOC_BUDGET_ENV`] (unlimited when unset; a value that is not a size is
    /// reported and ignored).
    pub fn from_env() -> Self {
        let Ok(s) = std::env::var(ALLOC_BUDGET_ENV) else {
            return Self::new(None);
        };
        if s.trim().eq_ignore_ascii_case("unlimited") {
            return Self::new(None);
        }
        match parse_limit(&s) {
            Some(l) => Self::new(Some(l)),
            None => {
                tracing::warn!(value = %s, "{ALLOC_BUDGET_ENV} is not a size; no device allocation budget");
                Self::new(None)
            }
        }
    }

    /// Replaces the limit and forgets what was drawn.
    pub fn reset(&self, limit: Option<u64>) {
        self.drawn.store(0, Ordering::SeqCst);
        self.limit.store(limit.unwrap_or(NONE), Ordering::SeqCst);
    }

    /// The limit (`None`: unlimited).
    pub fn limit(&self) -> Option<u64> {
        match self.limit.load(Ordering::SeqCst) {
            NONE => None,
            l => Some(l),
        }
    }

    /// Bytes drawn since the limit was set.
    pub fn drawn(&self) -> u64 {
        self.drawn.load(Ordering::SeqCst)
    }

    /// Draws `bytes`, or refuses (drawing nothing) when that would pass the limit.
    pub fn draw(&self, bytes: u64) -> Result<(), Refused> {
        let limit = self.limit.load(Ordering::SeqCst);
        if limit == NONE {
            self.drawn.fetch_add(bytes, Ordering::SeqCst);
            return Ok(());
        }
        self.drawn
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |d| {
                d.checked_add(bytes).filter(|&t| t <= limit)
            })
            .map(|_| ())
            .map_err(|drawn| Refused { drawn, limit })
    }
}

/// Parses a budget: bytes with an optional K/M/G/T suffix; `0` is a budget that refuses every
/// allocation.
pub fn parse_limit(s: &str) -> Option<u64> {
    if s.trim() == "0" {
        return Some(0);
    }
    tcsparse_formats::limits::parse_budget(s)
        .map(|l| l.max_bytes())
        .filter(|&b| b != NONE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_up_to_the_limit_then_refuses_without_drawing() {
        let b = AllocBudget::new(Some(100));
        assert_eq!(b.draw(60), Ok(()));
        assert_eq!(b.draw(40), Ok(()));
        assert_eq!(
            b.draw(1),
            Err(Refused {
                drawn: 100,
                limit: 100
            })
        );
        assert_eq!(b.drawn(), 100);
        b.reset(Some(10));
        assert_eq!(b.drawn(), 0);
        assert_eq!(b.draw(11).unwrap_err().limit, 10);
        assert_eq!(b.draw(10), Ok(()));
        // An overflowing request is refused, not wrapped.
        b.reset(Some(u64::MAX - 1));
        b.draw(5).unwrap();
        assert!(b.draw(u64::MAX - 2).is_err());
    }

    #[test]
    fn no_limit_counts_and_never_refuses() {
        let b = AllocBudget::new(None);
        assert_eq!(b.limit(), None);
        b.draw(u64::MAX / 2).unwrap();
        b.draw(7).unwrap();
        assert_eq!(b.drawn(), u64::MAX / 2 + 7);
    }

    #[test]
    fn zero_refuses_every_allocation() {
        let b = AllocBudget::new(parse_limit("0"));
        assert_eq!(b.limit(), Some(0));
        assert!(b.draw(1).is_err());
        assert_eq!(b.draw(0), Ok(()));
    }

    #[test]
    fn limits_parse_like_the_memory_budget() {
        assert_eq!(parse_limit("4K"), Some(4096));
        assert_eq!(parse_limit(" 3M "), Some(3 << 20));
        assert_eq!(parse_limit("12"), Some(12));
        assert_eq!(parse_limit("unlimited"), None);
        assert_eq!(parse_limit("-1"), None);
        assert_eq!(parse_limit("lots"), None);
    }

    #[test]
    fn concurrent_draws_never_pass_the_limit() {
        let b = AllocBudget::new(Some(1000));
        let granted = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..100 {
                        if b.draw(7).is_ok() {
                            granted.fetch_add(7, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        assert_eq!(granted.load(Ordering::SeqCst), b.drawn());
        assert!(b.drawn() <= 1000 && b.drawn() > 1000 - 7);
    }
}
