//! A standby kept by the sync timer, older than its schedule
//! (`standby-age`): the timer's syncs have not completed for two of its
//! periods (one missed run, a Pi that was off, is made up by
//! `Persistent=true`). A standby synced by hand has no schedule to be
//! late for.

use super::Facts;
use crate::check::Finding;
use crate::clock::time_ago;
use crate::host::Host;
use crate::state::standby::SyncState;
use crate::sync::timer::{self, units::DEFAULT_SCHEDULE};
use std::path::Path;

/// The sync timer's `OnCalendar=`, when the timer is enabled: its
/// drop-in's (what `sync --install-timer WHEN` wrote), else the shipped
/// unit's.
pub fn schedule(host: &Host) -> Option<String> {
    if !timer::enabled(host) {
        return None;
    }
    let drop_in = Path::new(timer::UNIT_DIR)
        .join(format!("{}.d", timer::TIMER))
        .join(timer::DROP_IN);
    let set = std::fs::read_to_string(host.path(drop_in))
        .ok()
        .and_then(|text| {
            text.lines()
                .filter_map(|line| line.trim().strip_prefix("OnCalendar="))
                .map(str::trim)
                .rfind(|value| !value.is_empty())
                .map(str::to_string)
        });
    Some(set.unwrap_or_else(|| DEFAULT_SCHEDULE.to_string()))
}

/// How often `OnCalendar=` fires, in seconds, for systemd's shorthands
/// and the plain calendar times `--install-timer` is given (`*-*-* 03:00`
/// daily, `Sun *-*-* 03:00` weekly, `*-*-01 03:00` monthly, `*:00`
/// hourly); `None` for what pimigrate cannot tell.
pub fn period(on_calendar: &str) -> Option<u64> {
    const DAY: u64 = 86_400;
    let shorthand = match on_calendar.trim().to_ascii_lowercase().as_str() {
        "minutely" => Some(60),
        "hourly" => Some(3_600),
        "daily" => Some(DAY),
        "weekly" => Some(7 * DAY),
        "monthly" => Some(31 * DAY),
        "quarterly" => Some(92 * DAY),
        "semiannually" => Some(183 * DAY),
        "yearly" | "annually" => Some(366 * DAY),
        _ => None,
    };
    if shorthand.is_some() {
        return shorthand;
    }
    let mut words: Vec<&str> = on_calendar.split_whitespace().collect();
    // A time zone at the end says when, not how often.
    if words.len() > 1
        && words
            .last()
            .is_some_and(|w| w.chars().any(char::is_alphabetic))
    {
        words.pop();
    }
    let weekday = words
        .first()
        .is_some_and(|w| w.chars().next().is_some_and(char::is_alphabetic));
    if weekday {
        words.remove(0);
    }
    let (date, time) = match words.as_slice() {
        [time] if !time.contains('-') => ("*-*-*", *time),
        [date] => (*date, "00:00"),
        [date, time] => (*date, *time),
        _ => return None,
    };
    let hourly = time.split(':').next() == Some("*");
    match date.split('-').collect::<Vec<_>>().as_slice() {
        [_, "*", "*"] if hourly => Some(3_600),
        [_, "*", "*"] if weekday => Some(7 * DAY),
        [_, "*", "*"] => Some(DAY),
        [_, "*", day] if day.bytes().all(|b| b.is_ascii_digit()) => Some(31 * DAY),
        _ => None,
    }
}

/// The standby's last complete sync, against the timer's schedule.
pub fn age(facts: &Facts) -> Option<Finding> {
    const CODE: &str = "standby-age";
    let record = facts.standby.as_ref()?;
    let schedule = facts.sync_schedule.as_deref()?;
    let disk = record.disk.display();
    let Some(period) = period(schedule) else {
        return Some(Finding::ok(
            CODE,
            format!(
                "the standby on {disk} is kept by pimigrate-sync.timer (OnCalendar={schedule}), whose period \
                 pimigrate cannot tell, so its age was not judged"
            ),
        ));
    };
    let last = record.complete_at.or(record.last_complete);
    if let Some(at) = last.filter(|&at| facts.now.saturating_sub(at) <= 2 * period) {
        return Some(Finding::ok(
            CODE,
            format!(
                "the standby on {disk} was last synced {}; pimigrate-sync.timer runs {schedule}",
                time_ago(at, facts.now)
            ),
        ));
    }
    let when = match last {
        Some(at) => format!("was last synced completely {}", time_ago(at, facts.now)),
        None => "has never been synced completely".to_string(),
    };
    let why = match (record.state, &record.error) {
        (SyncState::Failed, Some(error)) => format!("; the last sync failed: {error}"),
        (SyncState::Failed, None) => "; the last sync failed".to_string(),
        (SyncState::Syncing, _) => "; the last sync was cut short".to_string(),
        (SyncState::Complete, _) => String::new(),
    };
    Some(
        Finding::warning(
            CODE,
            format!(
                "the standby on {disk} {when}, though pimigrate-sync.timer runs {schedule}{why}"
            ),
        )
        .fix("journalctl -u pimigrate-sync says why the timer's syncs did not complete")
        .fix("sync it now: sudo pimigrate sync"),
    )
}

#[cfg(test)]
mod tests {
    use super::period;

    #[test]
    fn the_period_of_a_schedule() {
        let day = 86_400;
        for (schedule, wanted) in [
            ("daily", Some(day)),
            ("Weekly", Some(7 * day)),
            ("hourly", Some(3_600)),
            ("*-*-* 03:00", Some(day)),
            ("03:00", Some(day)),
            ("*-*-* 03:00:00 Europe/Berlin", Some(day)),
            ("Sun *-*-* 03:00", Some(7 * day)),
            ("*-*-01 03:00", Some(31 * day)),
            ("*-*-* *:00", Some(3_600)),
            ("*-*-1,15 03:00", None),
            ("", None),
        ] {
            assert_eq!(period(schedule), wanted, "{schedule}");
        }
    }
}
