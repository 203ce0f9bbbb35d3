//! The unattended failure matrix's tally: every failure a scenario injects
//! into a migration, and whether the Pi then came back by itself (and how
//! long that took) or needed hands (a person at the console, a power
//! cycle). The scenarios record; `main` prints the summary line at the end
//! of a run and adds it to the time table.

use std::sync::Mutex;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Case {
    pub scenario: String,
    pub failure: String,
    /// How long until the Pi ran again (its agent started the job), or
    /// why it needed hands.
    pub outcome: Result<Duration, String>,
}

static CASES: Mutex<Vec<Case>> = Mutex::new(Vec::new());

/// The Pi came back by itself `after` the failure was injected.
pub fn came_back(scenario: &str, failure: &str, after: Duration) {
    eprintln!(
        "testbed: {scenario}: unattended: {failure}: came back by itself after {} s",
        after.as_secs()
    );
    push(scenario, failure, Ok(after));
}

/// The Pi did not come back by itself.
pub fn needed_hands(scenario: &str, failure: &str, why: &str) {
    eprintln!("testbed: {scenario}: unattended: {failure}: NEEDED HANDS: {why}");
    push(scenario, failure, Err(why.to_string()));
}

fn push(scenario: &str, failure: &str, outcome: Result<Duration, String>) {
    CASES.lock().expect("the tally's lock").push(Case {
        scenario: scenario.to_string(),
        failure: failure.to_string(),
        outcome,
    });
}

/// Every case recorded so far.
pub fn cases() -> Vec<Case> {
    CASES.lock().expect("the tally's lock").clone()
}

/// `unattended: N failures injected, N came back by themselves (slowest M
/// s), N needed hands`, or nothing when no scenario injected any.
pub fn summary(cases: &[Case]) -> Option<String> {
    if cases.is_empty() {
        return None;
    }
    let back: Vec<Duration> = cases
        .iter()
        .filter_map(|c| c.outcome.clone().ok())
        .collect();
    let slowest = back.iter().max().map_or(0, Duration::as_secs);
    Some(format!(
        "unattended: {} failures injected, {} came back by themselves (slowest {slowest} s), {} needed hands",
        cases.len(),
        back.len(),
        cases.len() - back.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_and_names_the_slowest() {
        let case = |s: u64| Case {
            scenario: "s".into(),
            failure: "f".into(),
            outcome: Ok(Duration::from_secs(s)),
        };
        assert_eq!(summary(&[]), None);
        let mut cases = vec![case(40), case(95), case(12)];
        assert_eq!(
            summary(&cases).unwrap(),
            "unattended: 3 failures injected, 3 came back by themselves (slowest 95 s), 0 needed hands"
        );
        cases.push(Case {
            outcome: Err("the boot ran to its time limit".into()),
            ..case(0)
        });
        assert!(summary(&cases).unwrap().ends_with(", 1 needed hands"));
    }
}
