//! A memory budget checked before anything that scales with a *declared* size (rows in a size
//! line, a zip member's claimed length, `--n` on the command line) is allocated.
//!
//! Readers keep memory proportional to what a file really holds; only what must scale with the
//! declared dimensions (a CSR's row offsets, a dense operand) is checked here first, so a 60-byte
//! file declaring 4·10⁹ rows gives a [`BudgetError`] saying how much it would need instead of an
//! abort.
//!
//! The process-wide budget ([`Limits::global`]) is `TCSPARSE_MEMORY_BUDGET` when set (bytes, with an
//! optional `K`, `M`, `G` or `T` suffix, powers of 1024, or `unlimited`), else half of the smallest
//! of: available memory (`MemAvailable`), the cgroup memory limit and the address-space limit
//! (`ulimit -v`); 4 GiB where none of these can be read. [`Limits::set_global`] overrides it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use thiserror::Error;

/// Environment variable that overrides the default budget.
pub const BUDGET_ENV: &str = "TCSPARSE_MEMORY_BUDGET";

/// Budget used when the system's memory cannot be read.
const FALLBACK_BYTES: u64 = 4 << 30;

/// A memory budget in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    max_bytes: u64,
}

/// An allocation that would exceed the budget (or the address space).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "{what} would need {} ({needed} bytes), over the memory budget of {} (set {BUDGET_ENV} to change it)",
    human(*needed),
    human(*budget)
)]
pub struct BudgetError {
    /// What was about to be allocated.
    pub what: String,
    /// Bytes it would need (saturated at `u64::MAX`).
    pub needed: u64,
    /// The budget in force.
    pub budget: u64,
}

/// `bytes` as a short human-readable size (`1.5 GiB`).
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Bytes of `count` elements of `size` bytes each, saturating at `u64::MAX`.
pub fn bytes_of(count: u64, size: u64) -> u64 {
    count.saturating_mul(size)
}

static OVERRIDE: AtomicU64 = AtomicU64::new(0);
static DEFAULT: OnceLock<u64> = OnceLock::new();

impl Limits {
    /// A budget of `max_bytes` bytes.
    pub const fn new(max_bytes: u64) -> Self {
        Self { max_bytes }
    }

    /// No budget beyond what the address space allows (`isize::MAX` bytes per allocation).
    pub const fn unlimited() -> Self {
        Self {
            max_bytes: u64::MAX,
        }
    }

    /// The budget in bytes.
    pub const fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The process-wide budget: [`Limits::set_global`]'s value, else `TCSPARSE_MEMORY_BUDGET`, else
    /// half of what the system leaves this process (see the module documentation).
    pub fn global() -> Self {
        match OVERRIDE.load(Ordering::Relaxed) {
            0 => Self::new(*DEFAULT.get_or_init(default_budget)),
            b => Self::new(b),
        }
    }

    /// Replaces the process-wide budget (for example from a command-line option).
    pub fn set_global(limits: Limits) {
        OVERRIDE.store(limits.max_bytes.max(1), Ordering::Relaxed);
    }

    /// Half of the smallest of available memory, the cgroup limit and the address-space limit.
    pub fn from_system() -> Self {
        Self::new(system_budget().unwrap_or(FALLBACK_BYTES))
    }

    /// Checks that `needed` bytes for `what` fit the budget (and an allocation's `isize::MAX`).
    pub fn check(&self, what: impl FnOnce() -> String, needed: u64) -> Result<(), BudgetError> {
        if needed > self.max_bytes || needed > isize::MAX as u64 {
            return Err(BudgetError {
                what: what(),
                needed,
                budget: self.max_bytes,
            });
        }
        Ok(())
    }
}

impl Default for Limits {
    /// [`Limits::global`].
    fn default() -> Self {
        Self::global()
    }
}

/// Parses a budget: bytes with an optional K/M/G/T suffix (powers of 1024) or `unlimited`.
pub fn parse_budget(s: &str) -> Option<Limits> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("unlimited") {
        return Some(Limits::unlimited());
    }
    let (digits, shift) = match s.as_bytes().last()?.to_ascii_uppercase() {
        b'K' => (&s[..s.len() - 1], 10),
        b'M' => (&s[..s.len() - 1], 20),
        b'G' => (&s[..s.len() - 1], 30),
        b'T' => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    let v: u64 = digits.trim().parse().ok()?;
    let v = v.checked_mul(1u64 << shift)?;
    (v > 0).then_some(Limits::new(v))
}

fn default_budget() -> u64 {
    if let Ok(s) = std::env::var(BUDGET_ENV) {
        match parse_budget(&s) {
            Some(l) => return l.max_bytes,
            None => tracing::warn!(
                value = %s,
                "{BUDGET_ENV} is not a size (bytes, K/M/G/T suffix, or `unlimited`); using the system default"
            ),
        }
    }
    Limits::from_system().max_bytes
}

fn system_budget() -> Option<u64> {
    let mut best: Option<u64> = None;
    let mut take = |v: Option<u64>| {
        if let Some(v) = v {
            best = Some(best.map_or(v, |b| b.min(v)));
        }
    };
    take(std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb.saturating_mul(1024))
    }));
    for cgroup in [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ] {
        take(
            std::fs::read_to_string(cgroup)
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok()),
        );
    }
    take(
        std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("Max address space"))
                    .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            }),
    );
    best.map(|b| (b / 2).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse() {
        assert_eq!(parse_budget("1024"), Some(Limits::new(1024)));
        assert_eq!(parse_budget("2G"), Some(Limits::new(2 << 30)));
        assert_eq!(parse_budget("3m"), Some(Limits::new(3 << 20)));
        assert_eq!(parse_budget("unlimited"), Some(Limits::unlimited()));
        assert_eq!(parse_budget("0"), None);
        assert_eq!(parse_budget("x"), None);
        assert_eq!(parse_budget("99999999999T"), None);
    }

    #[test]
    fn check_names_the_need() {
        let e = Limits::new(1000)
            .check(|| "row offsets".into(), 2000)
            .unwrap_err();
        assert_eq!(e.needed, 2000);
        assert!(e.to_string().contains("row offsets would need"), "{e}");
        assert!(Limits::unlimited().check(|| "x".into(), u64::MAX).is_err());
        assert!(Limits::new(1000).check(|| "x".into(), 1000).is_ok());
    }

    #[test]
    fn system_budget_is_positive() {
        assert!(Limits::from_system().max_bytes() > 0);
    }
}
