//! [`Jitter`]: spreading the backoff so that callers that failed together
//! do not all come back at the same instant.

use std::time::Duration;

/// How the exponential backoff is randomised (a server's Retry-After never
/// is: it is waited as given).
///
/// With `d` the capped exponential delay: `Full` waits a uniform time in
/// `[0, d]`, `Equal` waits `d/2` plus a uniform time in `[0, d/2]` (the
/// names and formulas of the AWS Architecture Blog's "Exponential Backoff
/// and Jitter"). Seed the generator with [`Retry::seed`](crate::retry::Retry::seed)
/// to make the waits reproducible, in tests say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Jitter {
    /// No jitter: wait exactly the capped exponential delay.
    #[default]
    None,
    /// Uniform in `[0, d]`.
    Full,
    /// `d/2` plus uniform in `[0, d/2]`.
    Equal,
}

impl Jitter {
    /// `delay` randomised as this jitter says; never above `delay`.
    pub(crate) fn apply(self, delay: Duration, rng: &mut fastrand::Rng) -> Duration {
        let (fixed, random) = match self {
            Jitter::None => return delay,
            Jitter::Full => (Duration::ZERO, delay),
            Jitter::Equal => (delay / 2, delay - delay / 2),
        };
        // A fraction of `random`, through f64 seconds; a value that does not
        // fit back (only near Duration::MAX) falls back to the whole span.
        let part = Duration::try_from_secs_f64(random.as_secs_f64() * rng.f64())
            .unwrap_or(random)
            .min(random);
        fixed + part
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_jitter_stays_in_its_range() {
        let mut rng = fastrand::Rng::with_seed(7);
        let d = Duration::from_millis(800);
        for _ in 0..1000 {
            assert_eq!(Jitter::None.apply(d, &mut rng), d);
            assert!(Jitter::Full.apply(d, &mut rng) <= d);
            let equal = Jitter::Equal.apply(d, &mut rng);
            assert!(equal >= d / 2 && equal <= d, "{equal:?}");
        }
        for huge in [Duration::MAX, Duration::new(u64::MAX, 0)] {
            assert!(Jitter::Full.apply(huge, &mut rng) <= huge);
            assert!(Jitter::Equal.apply(huge, &mut rng) <= huge);
        }
    }

    #[test]
    fn retry_jitter_spreads_the_waits() {
        let mut rng = fastrand::Rng::with_seed(1);
        let d = Duration::from_secs(1);
        let waits: std::collections::HashSet<_> =
            (0..100).map(|_| Jitter::Full.apply(d, &mut rng)).collect();
        assert!(waits.len() > 90, "full jitter should rarely repeat a wait");
    }
}
