//! The rule every receiver of pushed tables (router, agent) applies to a
//! version: `term << 32 | sequence`, see the proto's header.

/// How far past the receiver's clock a term may lie before its version is
/// absurd: terms follow the leader's clock in seconds, so a day covers any
/// clock skew and nothing a forger would pick.
pub const MAX_TERM_AHEAD_SECONDS: u64 = 86_400;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VersionRefused {
    #[error("version {offered} is not newer than version {held} in force")]
    NotNewer { offered: u64, held: u64 },
    #[error(
        "version {offered} names term {term}, more than a day past this clock ({now} s): refused as absurd"
    )]
    Absurd { offered: u64, term: u64, now: u64 },
}

/// Whether `offered` may replace `held`: it must be newer, or name
/// `held` in `replaces` (a leader repairing a version from a term no
/// leader has had), and its own term must be plausible for a clock at
/// `now` (seconds since the epoch).
pub fn accept(offered: u64, replaces: u64, held: u64, now: u64) -> Result<(), VersionRefused> {
    let term = offered >> 32;
    if term > now.saturating_add(MAX_TERM_AHEAD_SECONDS) {
        return Err(VersionRefused::Absurd { offered, term, now });
    }
    if offered > held || (replaces != 0 && replaces == held && offered != held) {
        return Ok(());
    }
    Err(VersionRefused::NotNewer { offered, held })
}

/// A version for people: `term.sequence`.
pub fn show(version: u64) -> String {
    format!("{}.{}", version >> 32, version & 0xffff_ffff)
}

/// Seconds since the epoch by this machine's clock (0 if it is before).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    #[test]
    fn newer_versions_pass_and_older_ones_do_not() {
        let v = |t: u64, s: u64| (t << 32) | s;
        assert_eq!(accept(v(NOW, 2), 0, v(NOW, 1), NOW), Ok(()));
        assert_eq!(accept(v(NOW + 1, 1), 0, v(NOW, 9), NOW), Ok(()));
        assert!(matches!(
            accept(v(NOW, 1), 0, v(NOW, 1), NOW),
            Err(VersionRefused::NotNewer { .. })
        ));
        assert!(matches!(
            accept(v(NOW - 5, 9), 0, v(NOW, 1), NOW),
            Err(VersionRefused::NotNewer { .. })
        ));
    }

    #[test]
    fn absurd_versions_are_refused_and_a_repair_replaces_exactly_the_held_one() {
        assert!(matches!(
            accept(u64::MAX, 0, 5, NOW),
            Err(VersionRefused::Absurd { .. })
        ));
        let real = (NOW << 32) | 3;
        let forged = ((NOW + 10 * MAX_TERM_AHEAD_SECONDS) << 32) | 1;
        assert_eq!(accept(real, forged, forged, NOW), Ok(()));
        assert!(accept(real, forged - 1, forged, NOW).is_err());
        assert!(accept(real, 0, forged, NOW).is_err());
    }
}
