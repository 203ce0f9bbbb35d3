//! The recommendation as text people read.

use super::formula::times;
use super::{Entry, Recommendation};
use std::fmt::Write;

/// The recommendation and, for the `recommend` command, the command to
/// run next.
pub fn text(rec: &Recommendation) -> String {
    let mut out = table(rec);
    if let Some(pick) = &rec.pick {
        let _ = writeln!(
            out,
            "\nNext: pimigrate plan --target {}",
            pick.path.display()
        );
    }
    out
}

/// The ranking, the pick and its reasons, warnings and notes: what the
/// wizard shows before it goes on to the plan itself.
pub fn table(rec: &Recommendation) -> String {
    let mut out = String::new();
    let root = &rec.current_root;
    let _ = writeln!(out, "Current root: {}{}", describe(root), report_note(root));
    out.push('\n');
    let rows: Vec<&Entry> = std::iter::once(root).chain(&rec.ranking).collect();
    let widths = Widths {
        device: column_width(&rows, "device", |e| e.path.display().to_string()),
        link: column_width(&rows, "link", |e| e.link.clone()),
    };
    let _ = writeln!(
        out,
        "{:>2}  {:<dw$} {:<lw$} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7} {:<8} {:>6} {:>8}",
        "#",
        "device",
        "link",
        "Q32 rd",
        "Q32 wr",
        "Q1 rd",
        "Q1 wr",
        "SEQ rd",
        "SEQ wr",
        "class",
        "score",
        "gain",
        dw = widths.device,
        lw = widths.link
    );
    let _ = writeln!(
        out,
        "    (RND4K: IOPS; SEQ: SEQ1M Q8 MB/s; score: PiBenchmarks-style; gain: random 4K vs the current root,"
    );
    let _ = writeln!(
        out,
        "     \"rd\": of reads alone, writes not measured; \"unknown\": not measured at all)"
    );
    out.push_str(&row(root, "now", &widths));
    for entry in &rec.ranking {
        out.push_str(&row(entry, &gain_text(entry), &widths));
    }
    out.push('\n');
    match &rec.pick {
        Some(pick) => {
            let _ = writeln!(out, "Pick: {}", pick.path.display());
        }
        None => {
            let _ = writeln!(out, "No candidate is worth migrating to.");
        }
    }
    for reason in &rec.reasons {
        let _ = writeln!(out, "  {reason}");
    }
    for entry in rows {
        if entry.warnings.is_empty() && entry.notes.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{}:", describe(entry));
        for warning in &entry.warnings {
            let _ = writeln!(out, "  warning: {}", warning.message);
            if let Some(hint) = &warning.hint {
                let _ = writeln!(out, "           {hint}");
            }
        }
        for note in &entry.notes {
            let _ = writeln!(out, "  note: {note}");
        }
    }
    if !rec.excluded.is_empty() {
        out.push('\n');
        for excluded in &rec.excluded {
            let _ = writeln!(
                out,
                "Not compared: {} ({})",
                excluded.path.display(),
                excluded.why
            );
        }
    }
    out
}

/// The one line that says what to type to measure the blank drives whose
/// writes nobody allowed: `command` is this run's, with `--bench-blank`.
pub fn blank_hint(rec: &Recommendation, command: &str) -> Option<String> {
    if rec.blank_unmeasured.is_empty() {
        return None;
    }
    let names: Vec<String> = rec
        .blank_unmeasured
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    Some(format!(
        "To measure the writes of the blank drive(s) {} on the drive itself (test data \
         overwrites them), type: {command}",
        names.join(", ")
    ))
}

/// The gain column: "22x", "13x rd" when only reads were compared (the
/// writes are unknown), "unknown" without figures.
fn gain_text(entry: &Entry) -> String {
    match &entry.gain {
        None => "unknown".into(),
        Some(g) if g.random_write.is_none() => format!("{} rd", times(g.combined)),
        Some(g) => times(g.combined),
    }
}

fn describe(entry: &Entry) -> String {
    let name = crate::units::join_present([entry.vendor.as_deref(), entry.model.as_deref()]);
    if name.is_empty() {
        entry.path.display().to_string()
    } else {
        format!("{} ({name})", entry.path.display())
    }
}

fn report_note(entry: &Entry) -> String {
    match &entry.report {
        Some(r) => format!(
            ", report {} ({}, {:.1} days old)",
            r.id,
            match r.origin {
                super::Origin::Reused => "reused",
                super::Origin::Measured => "measured now",
            },
            r.age_days
        ),
        None => String::new(),
    }
}

struct Widths {
    device: usize,
    link: usize,
}

fn column_width(rows: &[&Entry], heading: &str, text: impl Fn(&Entry) -> String) -> usize {
    rows.iter()
        .map(|e| text(e).len())
        .chain([heading.len()])
        .max()
        .unwrap_or(0)
}

fn row(entry: &Entry, gain: &str, widths: &Widths) -> String {
    let f = entry.figures.as_ref();
    let num = |v: Option<f64>, decimals: usize| {
        v.map_or_else(|| "-".to_string(), |v| format!("{v:.decimals$}"))
    };
    let rank = entry.rank.map(|r| r.to_string()).unwrap_or_default();
    format!(
        "{:>2}  {:<dw$} {:<lw$} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7} {:<8} {:>6} {:>8}\n",
        rank,
        entry.path.display().to_string(),
        entry.link,
        num(f.and_then(|f| f.rnd4k_q32_read_iops), 0),
        num(f.and_then(|f| f.rnd4k_q32_write_iops), 0),
        num(f.and_then(|f| f.rnd4k_q1_read_iops), 0),
        num(f.and_then(|f| f.rnd4k_q1_write_iops), 0),
        num(f.and_then(|f| f.seq_read_mb_s), 1),
        num(f.and_then(|f| f.seq_write_mb_s), 1),
        f.and_then(|f| f.app_class)
            .map_or_else(|| "-".to_string(), |c| c.to_string()),
        num(f.and_then(|f| f.pibenchmarks_score), 0),
        gain,
        dw = widths.device,
        lw = widths.link
    )
}
