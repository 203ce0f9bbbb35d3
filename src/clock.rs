//! Wall-clock time as pimigrate records and shows it, in one place: Unix
//! seconds now, a moment to the nanosecond as the kernel stamps an inode's
//! ctime, UTC text for reports, logs and file names (no time-zone
//! database needed), and ages as people say them ("2 h ago").

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where the kernel names this boot, under /proc: an id drawn anew at
/// every boot. Whether a boot came after a moment is told by it where the
/// clock cannot be trusted to (a Pi without an RTC or the network).
pub const BOOT_ID: &str = "sys/kernel/random/boot_id";

/// The boot id read from `path` (the live system's or a fixture's `/proc`
/// joined with [`BOOT_ID`]); none when it cannot be read.
pub fn boot_id(path: &Path) -> Option<String> {
    let id = std::fs::read_to_string(path).ok()?;
    Some(id.trim().to_string()).filter(|id| !id.is_empty())
}

/// Seconds since the Unix epoch (0 on a clock set before it).
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A moment to the nanosecond since the Unix epoch, as an inode's ctime
/// is kept (ext4 with 256-byte inodes keeps nanoseconds; one with 128-byte
/// inodes whole seconds, which compare as the start of their second).
/// Ordered by time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Moment {
    pub secs: i64,
    /// Below a second: 0 to 999 999 999.
    pub nanos: u32,
}

impl Moment {
    /// Now, by the wall clock. The kernel stamps ctimes from a coarser
    /// copy of the same clock that lags it by at most a tick, never leads:
    /// a change made before this was read has a ctime no later than it.
    pub fn now() -> Moment {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Moment {
            secs: since.as_secs() as i64,
            nanos: since.subsec_nanos(),
        }
    }

    /// The ctime of `meta`'s inode.
    pub fn ctime_of(meta: &std::fs::Metadata) -> Moment {
        use std::os::unix::fs::MetadataExt;
        Moment {
            secs: meta.ctime(),
            nanos: meta.ctime_nsec().clamp(0, 999_999_999) as u32,
        }
    }

    /// The last nanosecond of second `secs`: the latest a moment known
    /// only to its second can have been.
    pub fn end_of_second(secs: u64) -> Moment {
        Moment {
            secs: secs as i64,
            nanos: 999_999_999,
        }
    }
}

/// RFC 3339 UTC text for a Unix time: `2024-05-01T12:34:56Z`.
pub fn rfc3339_utc(unix: u64) -> String {
    utc_text(unix as i64, false)
}

/// UTC as `2024-05-01T12:34:56Z`, or `20240501T123456Z` for file names
/// (no colons, which some tools and FAT copies of a log choke on).
pub fn utc_text(unix: i64, compact: bool) -> String {
    let (days, secs) = (unix.div_euclid(86_400), unix.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    if compact {
        format!("{year:04}{month:02}{day:02}T{h:02}{m:02}{s:02}Z")
    } else {
        format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
    }
}

/// The day of a Unix time, `2024-05-17`.
pub fn day(unix: u64) -> String {
    rfc3339_utc(unix)[..10].to_string()
}

/// "2 h ago", "5 min ago", "3 d ago".
pub fn time_ago(then: u64, now: u64) -> String {
    let secs = now.saturating_sub(then);
    match secs {
        0..=59 => "just now".into(),
        60..=3599 => format!("{} min ago", secs / 60),
        3600..=172_799 => format!("{} h ago", secs / 3600),
        _ => format!("{} d ago", secs / 86_400),
    }
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_order_by_second_then_nanosecond() {
        let at = |secs, nanos| Moment { secs, nanos };
        assert!(at(10, 1) > at(10, 0));
        assert!(at(11, 0) > at(10, 999_999_999));
        // A ctime kept in whole seconds is never after the end of its own
        // second, and is after the end of the one before.
        assert!(at(10, 0) <= Moment::end_of_second(10));
        assert!(at(10, 0) > Moment::end_of_second(9));
        let now = Moment::now();
        assert!(now.nanos < 1_000_000_000);
        assert!(now.secs as u64 >= super::now() - 1);
    }

    #[test]
    fn utc_times_are_right() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(utc_text(951_825_600, false), "2000-02-29T12:00:00Z");
        assert_eq!(utc_text(1_714_566_896, true), "20240501T123456Z");
        assert_eq!(day(1_715_904_000), "2024-05-17");
    }

    #[test]
    fn ages_read_as_people_say_them() {
        assert_eq!(time_ago(100, 130), "just now");
        assert_eq!(time_ago(0, 300), "5 min ago");
        assert_eq!(time_ago(0, 7200), "2 h ago");
        assert_eq!(time_ago(0, 3 * 86_400), "3 d ago");
        assert_eq!(time_ago(500, 100), "just now");
    }
}
