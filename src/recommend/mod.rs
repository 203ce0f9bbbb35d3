//! `pimigrate recommend`: which attached drive the system should move to,
//! from benchmark reports of the current root and of every candidate.
//!
//! Deciding is separate from measuring: [`recommend`] turns reports (new or
//! reused, see [`freshness`]) into a ranking, a pick and warnings without
//! touching a disk; [`measure`] runs the benchmarks safely. The formula is
//! in [`formula`], and in docs/benchmark.md under "Recommendation".

pub mod blank;
pub mod bridges;
pub mod figures;
pub mod formula;
pub mod freshness;
pub mod measure;
pub mod rank;
pub mod render;
pub mod survey;
pub mod warnings;

use crate::bench::report::{DeviceIdentity, Report, UsbIdentity};
use crate::bench::suite::Preset;
use anyhow::{bail, Result};
use figures::Figures;
use formula::{Gain, Judgement};
use serde::Serialize;
use std::path::PathBuf;
use warnings::{Usb3Ports, Warning};

pub const SCHEMA: &str = "pimigrate.recommend/1";

/// Where a drive's figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// A fresh saved report.
    Reused,
    /// Benchmarked by this run.
    Measured,
}

#[derive(Debug, Clone)]
pub struct Evidence {
    pub report: Report,
    pub origin: Origin,
}

/// One drive as the ranking sees it.
#[derive(Debug, Clone)]
pub struct Drive {
    /// The drive as attached now (its link may differ from an old report's).
    pub identity: DeviceIdentity,
    pub evidence: Option<Evidence>,
    /// Why there is no evidence, when there is none.
    pub unmeasured_reason: Option<String>,
    /// What holds it now (mounts): `migrate` refuses it until released.
    pub uses: Vec<String>,
    /// Anything else worth saying (a stale report, a fallback to reads).
    pub notes: Vec<String>,
}

/// What the ranking needs to know about the machine.
#[derive(Debug, Clone)]
pub struct Setting {
    /// "your SD card", or "your current root disk" when root is not on mmc.
    pub baseline_name: String,
    pub usb3_ports: Usb3Ports,
    pub now: u64,
}

impl Setting {
    pub fn baseline_name_for(identity: &DeviceIdentity) -> String {
        if identity.transport == "mmc" {
            "your SD card".into()
        } else {
            format!("your current root disk ({})", identity.name)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportRef {
    pub id: String,
    pub started_at: String,
    pub age_days: f64,
    pub origin: Origin,
    pub preset: Preset,
    /// Write tests ran (a test file on a mounted filesystem).
    pub writes: bool,
    /// Where the tests ran: a directory (test file) or the device.
    pub target: PathBuf,
}

/// One row of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// 1 is the best; `None` for the current root.
    pub rank: Option<usize>,
    pub name: String,
    pub path: PathBuf,
    pub vendor: Option<String>,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub size_bytes: u64,
    pub transport: String,
    pub usb: Option<UsbIdentity>,
    /// "usb, 5000 Mbit/s, uas, 174c:55aa".
    pub link: String,
    pub report: Option<ReportRef>,
    pub figures: Option<Figures>,
    /// Against the current root; `None` for the current root itself.
    pub gain: Option<Gain>,
    pub worth_it: bool,
    pub verdict: String,
    pub warnings: Vec<Warning>,
    /// `migrate --target` would take it now (nothing mounted from it).
    pub ready_for_migrate: bool,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pick {
    pub name: String,
    pub path: PathBuf,
    pub combined_gain: f64,
    pub random_write_gain: Option<f64>,
    pub random_read_gain: Option<f64>,
    pub ready_for_migrate: bool,
    pub summary: String,
}

/// A disk left out of the ranking, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Excluded {
    pub name: String,
    pub path: PathBuf,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FormulaInfo {
    pub description: &'static str,
    pub read_weight: f64,
    pub write_weight: f64,
    pub worth_it_gain: f64,
    pub min_random_write_gain: f64,
}

impl FormulaInfo {
    pub fn current() -> FormulaInfo {
        FormulaInfo {
            description: "combined gain = weighted geometric mean of candidate/current-root IOPS ratios of RND4K Q32 and Q1, reads x4, writes x10 (PiBenchmarks' weights); worth it when combined >= worth_it_gain and the random-write gain (geometric mean of Q32 and Q1 write ratios) >= min_random_write_gain, with writes measured",
            read_weight: formula::READ_WEIGHT,
            write_weight: formula::WRITE_WEIGHT,
            worth_it_gain: formula::WORTH_IT_GAIN,
            min_random_write_gain: formula::MIN_WRITE_GAIN,
        }
    }
}

/// `pimigrate.recommend/1`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendation {
    pub schema: &'static str,
    /// The drive the system runs from now, which the others are compared with.
    pub current_root: Entry,
    /// Best first.
    pub ranking: Vec<Entry>,
    /// The drive to migrate to, or `None` when none is worth it.
    pub pick: Option<Pick>,
    /// Why this pick, or why none.
    pub reasons: Vec<String>,
    pub excluded: Vec<Excluded>,
    /// Blank candidates whose writes were not measured because nobody
    /// allowed it (`--bench-blank` would).
    pub blank_unmeasured: Vec<PathBuf>,
    pub formula: FormulaInfo,
}

/// Ranks the candidates against the current root. Needs the current root's
/// random 4K read and write figures: without them nothing can be compared.
pub fn recommend(
    current_root: &Drive,
    candidates: &[Drive],
    excluded: Vec<Excluded>,
    setting: &Setting,
) -> Result<Recommendation> {
    let Some(base_report) = current_root.evidence.as_ref().map(|e| &e.report) else {
        bail!(
            "no benchmark of the current root ({}): {}",
            current_root.identity.path.display(),
            current_root
                .unmeasured_reason
                .as_deref()
                .unwrap_or("not measured")
        );
    };
    let base_figures = Figures::from_report(base_report);
    if !base_figures.has_random_writes() {
        bail!(
            "the report {} of the current root has no random write figures; run recommend with --fresh",
            base_report.id
        );
    }
    let root_entry = current_root_entry(current_root, setting);
    let mut ranking: Vec<Entry> = candidates
        .iter()
        .map(|drive| candidate_entry(drive, &base_figures, setting))
        .collect();
    ranking.sort_by(|a, b| rank_key(b).total_cmp_key(&rank_key(a)));
    for (index, entry) in ranking.iter_mut().enumerate() {
        entry.rank = Some(index + 1);
    }
    let pick = ranking.iter().find(|e| e.worth_it).map(pick_of);
    let reasons = reasons(&ranking, pick.as_ref(), setting);
    Ok(Recommendation {
        schema: SCHEMA,
        current_root: root_entry,
        ranking,
        pick,
        reasons,
        excluded,
        blank_unmeasured: Vec::new(),
        formula: FormulaInfo::current(),
    })
}

/// Worth it first (the pick is number 1), then by the gain the table
/// shows, whether it covers writes or only reads (the table says which),
/// then drives without any figures. So a drive slower than the current
/// root never stands above a faster one: ranking the drives with measured
/// writes first put a hard disk at 0.3x above an SSD whose reads alone
/// were 13x the SD card's.
struct RankKey {
    worth_it: bool,
    /// The known gain; `None` (not measured) sorts last.
    combined: Option<f64>,
}

impl RankKey {
    fn total_cmp_key(&self, other: &RankKey) -> std::cmp::Ordering {
        self.worth_it
            .cmp(&other.worth_it)
            .then(match (self.combined, other.combined) {
                (Some(a), Some(b)) => a.total_cmp(&b),
                (a, b) => a.is_some().cmp(&b.is_some()),
            })
    }
}

fn rank_key(entry: &Entry) -> RankKey {
    RankKey {
        worth_it: entry.worth_it,
        combined: entry.gain.as_ref().map(|g| g.combined),
    }
}

fn base_entry(drive: &Drive, setting: &Setting) -> Entry {
    let identity = &drive.identity;
    let report = drive.evidence.as_ref().map(|e| ReportRef {
        id: e.report.id.clone(),
        started_at: e.report.started_at.clone(),
        age_days: setting.now.saturating_sub(e.report.unix_time) as f64 / 86_400.0,
        origin: e.origin,
        preset: e.report.parameters.suite.preset,
        writes: e.report.parameters.writes,
        target: e.report.target.path.clone(),
    });
    let mut warnings = Vec::new();
    if let Some(report) = drive.evidence.as_ref().map(|e| &e.report) {
        warnings.extend(
            report
                .grades
                .app_class
                .as_ref()
                .and_then(warnings::below_a1),
        );
        warnings.extend(
            report
                .machine
                .throttled
                .as_ref()
                .and_then(warnings::under_voltage),
        );
    }
    Entry {
        rank: None,
        name: identity.name.clone(),
        path: identity.path.clone(),
        vendor: identity.vendor.clone(),
        model: identity.model.clone(),
        serial: identity.serial.clone(),
        size_bytes: identity.size_bytes,
        transport: identity.transport.clone(),
        usb: identity.usb.clone(),
        link: freshness::link_text(identity),
        report,
        figures: drive
            .evidence
            .as_ref()
            .map(|e| Figures::from_report(&e.report)),
        gain: None,
        worth_it: false,
        verdict: String::new(),
        warnings,
        ready_for_migrate: false,
        notes: drive.notes.clone(),
    }
}

fn current_root_entry(drive: &Drive, setting: &Setting) -> Entry {
    let mut entry = base_entry(drive, setting);
    entry.verdict = "the current root, which the others are compared with".into();
    entry
}

fn candidate_entry(drive: &Drive, base: &Figures, setting: &Setting) -> Entry {
    let mut entry = base_entry(drive, setting);
    let path = drive.identity.path.display().to_string();
    let gain = entry.figures.as_ref().and_then(|f| formula::gain(f, base));
    let writes_measured = entry.figures.is_some_and(|f| f.has_random_writes());
    let Judgement { worth_it, summary } =
        formula::judge(gain.as_ref(), writes_measured, &setting.baseline_name);
    let mut warnings = Vec::new();
    match (&drive.evidence, &gain) {
        (None, _) => warnings.push(warnings::not_measured(
            drive.unmeasured_reason.as_deref().unwrap_or("no report"),
        )),
        (Some(_), Some(gain)) => {
            warnings.extend(warnings::slower_random_writes(gain, &setting.baseline_name));
            if !writes_measured {
                warnings.push(warnings::writes_not_measured(&path));
            }
        }
        (Some(_), None) => {}
    }
    warnings.append(&mut entry.warnings);
    warnings.extend(warnings::usb2_link(&drive.identity, setting.usb3_ports));
    warnings.extend(warnings::uas_bridge(&drive.identity));
    warnings.extend(warnings::in_use(&drive.uses, &path));
    entry.warnings = warnings;
    entry.gain = gain;
    entry.worth_it = worth_it;
    entry.verdict = summary;
    entry.ready_for_migrate = drive.uses.is_empty();
    entry
}

fn pick_of(entry: &Entry) -> Pick {
    let gain = entry.gain.as_ref();
    Pick {
        name: entry.name.clone(),
        path: entry.path.clone(),
        combined_gain: gain.map_or(0.0, |g| g.combined),
        random_write_gain: gain.and_then(|g| g.random_write),
        random_read_gain: gain.and_then(|g| g.random_read),
        ready_for_migrate: entry.ready_for_migrate,
        summary: entry.verdict.clone(),
    }
}

fn reasons(ranking: &[Entry], pick: Option<&Pick>, setting: &Setting) -> Vec<String> {
    let mut reasons = Vec::new();
    match pick {
        Some(pick) => {
            reasons.push(format!("{}: {}", pick.path.display(), pick.summary));
            if !pick.ready_for_migrate {
                reasons.push(format!(
                    "{} is in use: unmount it before `pimigrate migrate --target {}`",
                    pick.path.display(),
                    pick.path.display()
                ));
            }
            if let Some(entry) = ranking.iter().find(|e| e.path == pick.path) {
                reasons.extend(
                    entry
                        .warnings
                        .iter()
                        .map(|w| format!("{}: {}", pick.path.display(), w.message)),
                );
            }
        }
        None if ranking.is_empty() => {
            reasons.push("no candidate drive is attached: plug in a USB SSD or NVMe drive and run recommend again".into());
        }
        None => {
            reasons.push(format!(
                "no candidate is worth migrating to: none is at least {}x {} at random 4K while not slower at random writes",
                formula::WORTH_IT_GAIN,
                setting.baseline_name
            ));
            reasons.extend(
                ranking
                    .iter()
                    .map(|e| format!("{}: {}", e.path.display(), e.verdict)),
            );
        }
    }
    reasons
}

#[cfg(test)]
mod tests;
