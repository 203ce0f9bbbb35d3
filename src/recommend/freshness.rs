//! Which saved reports may stand in for a new benchmark.
//!
//! A report counts when it is of the same drive (model and serial, as
//! `bench` identifies drives), behind the same link (transport, USB speed
//! and driver: a drive moved from a USB 3 to a USB 2 port, or switched to
//! `usb-storage` by a quirk, performs differently), measured on the same
//! model of Pi, with the suite asked for (a standard run also serves a
//! `--quick` request, not the other way round), and not older than the
//! maximum age. Reports dated more than a day ahead of the clock are
//! ignored: a Pi without a real-time clock can boot with the wrong date.

use super::figures;
use crate::bench::report::{DeviceIdentity, Report, StoredReport};
use crate::bench::suite::Preset;

pub const DEFAULT_MAX_AGE_DAYS: u32 = 30;
const CLOCK_SKEW_SECONDS: u64 = 86_400;

#[derive(Debug, Clone)]
pub struct Freshness {
    /// Unix time now.
    pub now: u64,
    pub max_age_days: u32,
    /// The suite a new run would use: `Standard` or `Quick`.
    pub preset: Preset,
    /// The device-tree model of this machine.
    pub pi_model: Option<String>,
}

impl Freshness {
    /// `None` when the report is fresh for this drive, else why not.
    pub fn why_stale(&self, report: &Report, identity: &DeviceIdentity) -> Option<String> {
        let Some(device) = report.target.device.as_ref() else {
            return Some("the report names no drive".into());
        };
        if !device.same_drive(identity) {
            return Some("another drive".into());
        }
        if device.transport != identity.transport || !same_usb_link(device, identity) {
            return Some(format!(
                "measured behind another link ({})",
                link_text(device)
            ));
        }
        if report.machine.pi_model != self.pi_model {
            return Some(format!(
                "measured on another machine ({})",
                report.machine.pi_model.as_deref().unwrap_or("not a Pi")
            ));
        }
        let preset = report.parameters.suite.preset;
        let suite_ok = preset == self.preset || preset == Preset::Standard;
        if !suite_ok {
            return Some(format!("the {preset} suite, not the {}", self.preset));
        }
        if report.result(figures::RND4K_Q32_READ).is_none() {
            return Some("no RND4K results".into());
        }
        if report.unix_time > self.now + CLOCK_SKEW_SECONDS {
            return Some(format!("dated in the future ({})", report.started_at));
        }
        let age_days = self.age_days(report);
        if age_days > f64::from(self.max_age_days) {
            return Some(format!(
                "{age_days:.0} days old (reused up to {} days)",
                self.max_age_days
            ));
        }
        None
    }

    pub fn age_days(&self, report: &Report) -> f64 {
        self.now.saturating_sub(report.unix_time) as f64 / 86_400.0
    }

    /// The report to use for this drive: among the fresh ones, one with
    /// write figures before one without, then the newest.
    pub fn best<'a>(
        &self,
        reports: &'a [StoredReport],
        identity: &DeviceIdentity,
    ) -> Option<&'a StoredReport> {
        reports
            .iter()
            .filter(|r| self.why_stale(&r.report, identity).is_none())
            .max_by_key(|r| {
                (
                    r.report.parameters.writes,
                    r.report.unix_time,
                    r.report.id.clone(),
                )
            })
    }

    /// Why the newest report of this drive was not reused, for a note.
    pub fn newest_stale_reason(
        &self,
        reports: &[StoredReport],
        identity: &DeviceIdentity,
    ) -> Option<String> {
        reports
            .iter()
            .rev()
            .filter(|r| {
                r.report
                    .target
                    .device
                    .as_ref()
                    .is_some_and(|d| d.same_drive(identity))
            })
            .find_map(|r| {
                self.why_stale(&r.report, identity)
                    .map(|why| format!("report {} not reused: {why}", r.report.id))
            })
    }
}

fn same_usb_link(a: &DeviceIdentity, b: &DeviceIdentity) -> bool {
    match (&a.usb, &b.usb) {
        (None, None) => true,
        (Some(x), Some(y)) => x.id == y.id && x.speed_mbps == y.speed_mbps && x.driver == y.driver,
        _ => false,
    }
}

/// "usb, 480 Mbit/s, usb-storage" or "mmc".
pub fn link_text(identity: &DeviceIdentity) -> String {
    let mut parts = vec![identity.transport.clone()];
    if let Some(usb) = &identity.usb {
        if let Some(speed) = usb.speed_mbps {
            parts.push(format!("{speed} Mbit/s"));
        }
        if let Some(driver) = &usb.driver {
            parts.push(driver.clone());
        }
        parts.push(usb.id.clone());
    }
    parts.join(", ")
}
