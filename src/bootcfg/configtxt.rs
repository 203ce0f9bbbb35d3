//! The firmware's `config.txt` and `tryboot.txt`.
//!
//! A migration needs three answers from these files: which kernel command
//! line file the firmware reads (`cmdline=`, `os_prefix=`), which kernel and
//! initramfs it loads, and how to add a setting without disturbing the rest.
//!
//! # Filters
//!
//! A line `[name]` is a conditional filter: the settings after it apply only
//! when the condition holds. The rules follow the Raspberry Pi `config.txt`
//! documentation ("Conditional filters"):
//!
//! - `[all]` resets every filter; settings after it apply everywhere.
//! - Filters of the same type replace each other (`[pi5]` after `[pi4]`
//!   selects the Pi 5 only); filters of different types combine with AND
//!   (`[tryboot]` then `[pi4]`: only a Pi 4 in a trial boot).
//! - Model filters: a Pi 400, CM4 and CM4S also see `[pi4]`; a Pi 500 and CM5
//!   also see `[pi5]`; a 3B+/3A+ also sees `[pi3]`; a Zero W sees `[pi0]`, a
//!   Zero 2 W sees `[pi0]` and `[pi0w]` as well.
//! - `[none]` disables everything after it. This module keeps it in force
//!   until the next `[all]`, the reading that never applies a setting the
//!   firmware might skip.
//! - `[tryboot]` holds in a trial boot (`reboot "0 tryboot"`).
//!
//! Conditions this module cannot evaluate from a [`FilterContext`] (GPIO
//! levels, EDID monitor names, serial numbers, `[HDMI:n]`, `[board-type=…]`,
//! unknown names) are treated as "maybe": a boot setting under them is not
//! applied but reported in [`BootSettings::uncertain`], so a caller can refuse
//! to guess which `cmdline.txt` the firmware will read.
//!
//! # Includes
//!
//! `include FILE` inserts FILE (a name on the boot partition) where the line
//! stands, as Ubuntu's `include syscfg.txt` / `include usercfg.txt` do: the
//! firmware reads its lines in place, the filters in force carry into it and
//! out of it, and a later assignment of a setting wins over an earlier one.
//! [`ConfigTxt::effective_with`] reads them so (through a reader the caller
//! gives, nested up to [`MAX_INCLUDE_DEPTH`]); an include under a filter that
//! does not hold is not read, one under a filter that may hold makes its
//! settings uncertain, a missing file adds nothing (the firmware skips it),
//! and one that cannot be read or parsed is listed in
//! [`BootSettings::unread_includes`], so the result is not certain.
//! [`ConfigTxt::effective`] reads none of them.

use std::collections::BTreeMap;
use std::ops::Range;

use super::text::{decode, join_lines, preferred_ending, split_lines, NotText, RawLine};

/// Reads an included file by its name on the boot partition: its bytes,
/// `Ok(None)` when it does not exist, or why it cannot be read (a name
/// that leaves the boot partition is `InvalidInput`).
pub type IncludeReader<'a> = dyn FnMut(&str) -> std::io::Result<Option<Vec<u8>>> + 'a;

/// How deep includes nest before the rest is treated as unknown (a file
/// that includes itself would otherwise never end).
pub const MAX_INCLUDE_DEPTH: usize = 8;

/// Why a `config.txt` cannot be used or edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigTxtError {
    /// A NUL byte: binary or damaged data.
    #[error(
        "config.txt contains a NUL byte at offset {offset}; it looks like a damaged or binary file"
    )]
    NulByte { offset: usize },
    /// Not UTF-8 text.
    #[error("config.txt is not valid UTF-8 text (the problem starts at byte {offset}); it looks damaged")]
    NotUtf8 { offset: usize },
    /// `[` without `]`.
    #[error("config.txt line {line} opens a filter with '[' but never closes it with ']'; it is unclear which settings it should guard")]
    UnclosedFilter { line: usize },
    /// A key or value that cannot be written as one setting line.
    #[error("cannot write {key:?} = {value:?} into config.txt: {reason}")]
    InvalidSetting {
        key: String,
        value: String,
        reason: &'static str,
    },
}

impl From<NotText> for ConfigTxtError {
    fn from(e: NotText) -> Self {
        match e {
            NotText::Nul { offset } => ConfigTxtError::NulByte { offset },
            NotText::InvalidUtf8 { offset } => ConfigTxtError::NotUtf8 { offset },
        }
    }
}

/// The board and boot mode to evaluate filters for.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct FilterContext {
    /// The model filter name of the board (`"pi4"`, `"pi400"`, `"cm4"`,
    /// `"pi5"`, `"pi500"`, `"cm5"`, `"pi3+"`, `"pi02"`, …), or `None` when the
    /// file is evaluated for something that is not a Pi (no model filter holds).
    pub model: Option<String>,
    /// Whether this is a trial boot (`[tryboot]` holds).
    pub tryboot: bool,
}

impl FilterContext {
    /// A context for `model` (a model filter name such as `"pi4"`).
    pub fn new(model: Option<&str>, tryboot: bool) -> FilterContext {
        FilterContext {
            model: model.map(str::to_string),
            tryboot,
        }
    }
}

/// Where an initramfs is loaded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum InitramfsAddress {
    /// `followkernel` (or `0`, which the firmware treats the same): right
    /// after the kernel.
    FollowKernel,
    /// An explicit address such as `0x00800000`.
    Address(String),
    /// No address given.
    Unspecified,
}

/// An `initramfs FILE ADDRESS` line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Initramfs {
    /// The file name(s) as written; newer firmware accepts a comma-separated list.
    pub file: String,
    /// Where it is loaded.
    pub address: InitramfsAddress,
}

impl Initramfs {
    fn parse(value: &str) -> Initramfs {
        let mut words = value.split_whitespace();
        let file = words.next().unwrap_or_default().to_string();
        let address = match words.next() {
            None => InitramfsAddress::Unspecified,
            Some("followkernel") | Some("0") => InitramfsAddress::FollowKernel,
            Some(other) => InitramfsAddress::Address(other.to_string()),
        };
        Initramfs { file, address }
    }
}

/// A boot setting whose effect this module cannot decide.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UncertainSetting {
    /// The included file it is in; `None` for the file itself.
    pub file: Option<String>,
    /// 1-based line number.
    pub line: usize,
    /// The setting's key (`cmdline`, `kernel`, …).
    pub key: String,
    /// Its value as written.
    pub value: String,
    /// Why it may or may not apply, e.g. "depends on [gpio4=1]".
    pub reason: String,
}

/// The boot-relevant settings in effect for one [`FilterContext`].
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct BootSettings {
    /// `kernel=`: the kernel image, if not the firmware's default.
    pub kernel: Option<String>,
    /// `initramfs FILE ADDRESS`.
    pub initramfs: Option<Initramfs>,
    /// `cmdline=`: the command-line file, if not `cmdline.txt`.
    pub cmdline: Option<String>,
    /// `os_prefix=`: prepended to kernel, initramfs, cmdline and dtb names.
    pub os_prefix: Option<String>,
    /// `arm_64bit=`: non-zero starts the CPU in 64-bit mode.
    pub arm_64bit: Option<bool>,
    /// Files pulled in by `include` lines that apply, in the order read.
    pub includes: Vec<String>,
    /// Included files whose settings are unknown: not read (by
    /// [`ConfigTxt::effective`]), unreadable, unparseable, or nested too deep.
    pub unread_includes: Vec<String>,
    /// Boot settings under conditions that could not be evaluated, and not
    /// overridden by a later setting that certainly applies.
    pub uncertain: Vec<UncertainSetting>,
}

impl BootSettings {
    /// The command-line file the firmware reads, relative to the boot
    /// partition's root: `cmdline=` or `cmdline.txt`, with `os_prefix`
    /// prepended unless the name starts with `/` (which bypasses prefixes).
    ///
    /// The firmware ignores `os_prefix` when the kernel and device tree are
    /// missing under it; checking that needs the boot partition's files and
    /// is left to the caller.
    pub fn cmdline_file(&self) -> String {
        let name = self.cmdline.as_deref().unwrap_or("cmdline.txt");
        match name.strip_prefix('/') {
            Some(absolute) => absolute.to_string(),
            None => format!("{}{}", self.os_prefix.as_deref().unwrap_or(""), name),
        }
    }

    /// True when every boot setting could be evaluated and every `include`
    /// that applies was read.
    pub fn is_certain(&self) -> bool {
        self.uncertain.is_empty() && self.unread_includes.is_empty()
    }
}

/// A parsed `[…]` filter line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Filter {
    All,
    None,
    Tryboot,
    /// A documented model filter (`pi4`, `cm5`, …).
    Model(String),
    /// Anything else; the slot says which filters it replaces.
    Unevaluable {
        slot: Slot,
        text: String,
    },
}

/// Filter types: a filter replaces the active one of the same slot.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    Model,
    Tryboot,
    Edid,
    Serial,
    Gpio,
    Hdmi,
    /// An unknown filter: its own slot, so it never hides a known one.
    Unknown(String),
}

/// The documented model filter names and, for each model, the filters it sees.
const MODELS: &[(&str, &[&str])] = &[
    ("pi1", &["pi1"]),
    ("pi2", &["pi2"]),
    ("pi3", &["pi3"]),
    ("cm3", &["pi3"]),
    ("pi3+", &["pi3", "pi3+"]),
    ("pi4", &["pi4"]),
    ("pi400", &["pi4", "pi400"]),
    ("cm4", &["pi4", "cm4"]),
    ("cm4s", &["pi4", "cm4s"]),
    ("pi5", &["pi5"]),
    ("pi500", &["pi5", "pi500"]),
    ("cm5", &["pi5", "cm5"]),
    ("pi0", &["pi0"]),
    ("pi0w", &["pi0", "pi0w"]),
    ("pi02", &["pi0", "pi0w", "pi02"]),
];

const MODEL_FILTERS: &[&str] = &[
    "pi1", "pi2", "pi3", "pi3+", "pi4", "pi400", "cm4", "cm4s", "pi5", "pi500", "cm5", "pi0",
    "pi0w", "pi02",
];

impl Filter {
    fn parse(text: &str) -> Filter {
        let unevaluable = |slot| Filter::Unevaluable {
            slot,
            text: text.to_string(),
        };
        match text {
            "all" => return Filter::All,
            "none" => return Filter::None,
            "tryboot" => return Filter::Tryboot,
            _ => {}
        }
        if MODEL_FILTERS.contains(&text) {
            return Filter::Model(text.to_string());
        }
        let looks_like_model = ["pi", "cm"].iter().any(|prefix| {
            text.strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        });
        if text.starts_with("board-type=") || looks_like_model {
            unevaluable(Slot::Model)
        } else if text.starts_with("EDID=") {
            unevaluable(Slot::Edid)
        } else if text.starts_with("0x") {
            unevaluable(Slot::Serial)
        } else if text.starts_with("gpio") && text.contains('=') {
            unevaluable(Slot::Gpio)
        } else if text.starts_with("HDMI:") {
            unevaluable(Slot::Hdmi)
        } else {
            unevaluable(Slot::Unknown(text.to_string()))
        }
    }
}

/// Whether a setting line applies for a [`FilterContext`]: certainly, or
/// under a filter that cannot be evaluated before boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineApplies {
    Yes,
    Maybe,
}

/// Three-valued answer to "does this line apply?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Applies {
    Yes,
    No,
    Maybe,
}

/// The filters in force at some point of the file.
#[derive(Debug, Clone, Default)]
struct FilterState {
    none: bool,
    active: BTreeMap<Slot, Filter>,
}

impl FilterState {
    fn apply(&mut self, filter: &Filter) {
        match filter {
            Filter::All => {
                self.none = false;
                self.active.clear();
            }
            Filter::None => self.none = true,
            Filter::Tryboot => {
                self.active.insert(Slot::Tryboot, filter.clone());
            }
            Filter::Model(_) => {
                self.active.insert(Slot::Model, filter.clone());
            }
            Filter::Unevaluable { slot, .. } => {
                self.active.insert(slot.clone(), filter.clone());
            }
        }
    }

    fn is_unconditional(&self) -> bool {
        !self.none && self.active.is_empty()
    }

    fn evaluate(&self, ctx: &FilterContext) -> Applies {
        if self.none {
            return Applies::No;
        }
        let mut result = Applies::Yes;
        for filter in self.active.values() {
            match evaluate_filter(filter, ctx) {
                Applies::No => return Applies::No,
                Applies::Maybe => result = Applies::Maybe,
                Applies::Yes => {}
            }
        }
        result
    }

    fn unevaluable_filters(&self) -> Vec<String> {
        self.active
            .values()
            .filter_map(|filter| match filter {
                Filter::Unevaluable { text, .. } => Some(format!("[{text}]")),
                _ => None,
            })
            .collect()
    }
}

fn evaluate_filter(filter: &Filter, ctx: &FilterContext) -> Applies {
    let yes_if = |holds: bool| if holds { Applies::Yes } else { Applies::No };
    match filter {
        Filter::All => Applies::Yes,
        Filter::None => Applies::No,
        Filter::Tryboot => yes_if(ctx.tryboot),
        Filter::Model(name) => match ctx.model.as_deref() {
            None => Applies::No,
            Some(model) => match MODELS.iter().find(|(m, _)| *m == model) {
                Some((_, seen)) => yes_if(seen.contains(&name.as_str())),
                // A board this module does not know: only its own name is certain.
                None if model == name => Applies::Yes,
                None => Applies::Maybe,
            },
        },
        // A model name this module does not know still holds on that very board.
        Filter::Unevaluable {
            slot: Slot::Model,
            text,
        } if ctx.model.as_deref() == Some(text.as_str()) => Applies::Yes,
        Filter::Unevaluable { .. } => Applies::Maybe,
    }
}

/// What one line of the file is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LineKind {
    Blank,
    Comment,
    Filter(Filter),
    /// `key=value`, or `initramfs …` / `include …` with a space.
    Setting {
        key: String,
        value: String,
        value_range: Range<usize>,
    },
    /// A line this module does not understand; kept as is.
    Other,
}

/// Keys written as `key value` rather than `key=value`.
const SPACE_SEPARATED_KEYS: &[&str] = &["initramfs", "include"];

/// Returns the range of `part` inside `whole`; `part` must be a subslice.
fn subslice_range(whole: &str, part: &str) -> Range<usize> {
    let start = (part.as_ptr() as usize).saturating_sub(whole.as_ptr() as usize);
    start..start + part.len()
}

/// Classifies one line. Text after a filter's `]` (usually a comment) is
/// ignored; a `[` without `]` is an error, since guessing which settings it
/// guards could apply a setting to the wrong board.
fn classify(content: &str, line: usize) -> Result<LineKind, ConfigTxtError> {
    let trimmed = content.trim();
    if trimmed.is_empty() {
        return Ok(LineKind::Blank);
    }
    if trimmed.starts_with('#') {
        return Ok(LineKind::Comment);
    }
    if let Some(rest) = trimmed.strip_prefix('[') {
        let Some((inner, _after)) = rest.split_once(']') else {
            return Err(ConfigTxtError::UnclosedFilter { line });
        };
        return Ok(LineKind::Filter(Filter::parse(inner.trim())));
    }
    let split = match trimmed.split_once('=') {
        Some((key, value)) => Some((key.trim(), value.trim())),
        None => trimmed
            .split_once(char::is_whitespace)
            .filter(|(key, _)| SPACE_SEPARATED_KEYS.contains(key))
            .map(|(key, value)| (key, value.trim())),
    };
    Ok(match split {
        Some((key, value)) if !key.is_empty() => LineKind::Setting {
            key: key.to_string(),
            value: value.to_string(),
            value_range: subslice_range(content, value),
        },
        _ => LineKind::Other,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    raw: RawLine,
    kind: LineKind,
}

/// A parsed `config.txt` (or `tryboot.txt`) that writes back every byte it
/// did not edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigTxt {
    lines: Vec<Line>,
}

impl ConfigTxt {
    /// Parses the bytes of a `config.txt`. Unknown settings and lines are
    /// kept; only unreadable bytes and an unclosed `[` are errors.
    pub fn parse(bytes: &[u8]) -> Result<ConfigTxt, ConfigTxtError> {
        let text = decode(bytes)?;
        let mut lines = Vec::new();
        for (index, raw) in split_lines(text).into_iter().enumerate() {
            let kind = classify(&raw.content, index + 1)?;
            lines.push(Line { raw, kind });
        }
        Ok(ConfigTxt { lines })
    }

    /// The boot settings in effect for `ctx` from this file alone; a later
    /// line overrides an earlier one, as in the firmware. `include` lines
    /// are listed, not read (see [`ConfigTxt::effective_with`]).
    pub fn effective(&self, ctx: &FilterContext) -> BootSettings {
        self.effective_with(ctx, &mut |_: &str| {
            Err(std::io::Error::other("includes are not read here"))
        })
    }

    /// The boot settings in effect for `ctx`, reading every `include` that
    /// applies through `read` (a name on the boot partition → its bytes,
    /// `Ok(None)` when there is no such file).
    pub fn effective_with(&self, ctx: &FilterContext, read: &mut IncludeReader) -> BootSettings {
        let mut settings = BootSettings::default();
        let mut state = FilterState::default();
        self.walk(ctx, read, &mut state, &mut settings, None, 0);
        settings
    }

    fn walk(
        &self,
        ctx: &FilterContext,
        read: &mut IncludeReader,
        state: &mut FilterState,
        settings: &mut BootSettings,
        file: Option<&str>,
        depth: usize,
    ) {
        for (index, line) in self.lines.iter().enumerate() {
            match &line.kind {
                LineKind::Filter(filter) => state.apply(filter),
                LineKind::Setting { key, value, .. } if key == "include" => {
                    if state.evaluate(ctx) == Applies::No {
                        continue;
                    }
                    settings.includes.push(value.clone());
                    let inner = match read(value) {
                        _ if depth >= MAX_INCLUDE_DEPTH => None,
                        Ok(None) => continue,
                        Ok(Some(bytes)) => ConfigTxt::parse(&bytes).ok(),
                        Err(_) => None,
                    };
                    match inner {
                        // Its lines run in the filter state in force here,
                        // and leave theirs behind, as inline text would.
                        Some(inner) => {
                            inner.walk(ctx, read, state, settings, Some(value), depth + 1)
                        }
                        None => settings.unread_includes.push(value.clone()),
                    }
                }
                LineKind::Setting { key, value, .. } if is_boot_key(key) => {
                    let line_number = index + 1;
                    match state.evaluate(ctx) {
                        Applies::No => {}
                        Applies::Yes => settings.apply(key, value),
                        Applies::Maybe => settings.uncertain.push(UncertainSetting {
                            file: file.map(str::to_string),
                            line: line_number,
                            key: key.clone(),
                            value: value.clone(),
                            reason: format!(
                                "depends on {}, which cannot be evaluated before boot",
                                state.unevaluable_filters().join(" and ")
                            ),
                        }),
                    }
                }
                _ => {}
            }
        }
    }

    /// The filters the file uses (the text between the brackets), in order
    /// of first appearance, without repeats.
    pub fn sections(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for line in &self.lines {
            if let LineKind::Filter(_) = line.kind {
                let name = line
                    .raw
                    .content
                    .trim()
                    .trim_start_matches('[')
                    .split(']')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names
    }

    /// Sets `key` to `value` for all boards: replaces the value of the last
    /// unconditional `key` line, or appends the setting at the end (after an
    /// `[all]` line if the file ends inside a filter). Conditional lines for
    /// the same key are left alone and still override it where they apply.
    ///
    /// For keys and values the program spells out itself; a key or value
    /// that cannot be one line is refused and the file stays unchanged. Use
    /// [`ConfigTxt::try_set`] to learn why.
    pub fn set(&mut self, key: &str, value: &str) {
        // The only error is an unwritable key or value, which changes nothing.
        let _ = self.try_set(key, value);
    }

    /// Like [`ConfigTxt::set`], reporting an unwritable key or value.
    pub fn try_set(&mut self, key: &str, value: &str) -> Result<(), ConfigTxtError> {
        check_setting(key, value)?;
        match self.last_unconditional_line_for(key) {
            Some(index) => self.replace_value(index, value),
            None => self.append_setting(key, value),
        }
        Ok(())
    }

    /// Sets `key` to `value` for all boards at the very end of the file,
    /// after an `[all]` line (unless the file already ends with one), so no
    /// later line, and no filter left open by an included file, overrides
    /// it. Earlier lines for the key stay as they are.
    pub fn try_set_last(&mut self, key: &str, value: &str) -> Result<(), ConfigTxtError> {
        check_setting(key, value)?;
        let ends_with_all = self
            .lines
            .iter()
            .rev()
            .find(|l| !matches!(l.kind, LineKind::Blank | LineKind::Comment))
            .is_some_and(|l| l.kind == LineKind::Filter(Filter::All));
        self.append_setting_after(key, value, !ends_with_all);
        Ok(())
    }

    /// The value of any `key` (not only the boot keys [`BootSettings`]
    /// reports) in effect for `ctx`: its last line whose filters certainly
    /// apply. `include` lines are not followed; lines under filters that
    /// cannot be evaluated are passed over. Used for the bootloader's EEPROM
    /// config, which shares this syntax and has no includes.
    pub fn value(&self, wanted: &str, ctx: &FilterContext) -> Option<String> {
        let mut state = FilterState::default();
        let mut found = None;
        for line in &self.lines {
            match &line.kind {
                LineKind::Filter(filter) => state.apply(filter),
                LineKind::Setting { key, value, .. }
                    if key == wanted && state.evaluate(ctx) == Applies::Yes =>
                {
                    found = Some(value.clone());
                }
                _ => {}
            }
        }
        found
    }

    /// Sets `key` to `value` under the filter `[section]` alone (such as
    /// `[tryboot]`): replaces the value of the last line for `key` under
    /// exactly that filter, or appends the setting at the end, after
    /// `[section]` (and `[all]` first, when the file ends under other
    /// filters, which would otherwise combine with it).
    pub fn try_set_in_section(
        &mut self,
        section: &str,
        key: &str,
        value: &str,
    ) -> Result<(), ConfigTxtError> {
        check_setting(key, value)?;
        let filter = Filter::parse(section);
        let only = |state: &FilterState| {
            !state.none && state.active.len() == 1 && state.active.values().any(|f| *f == filter)
        };
        let mut state = FilterState::default();
        let mut last_for_key = None;
        for (index, line) in self.lines.iter().enumerate() {
            match &line.kind {
                LineKind::Filter(f) => state.apply(f),
                LineKind::Setting { key: k, .. } if k == key && only(&state) => {
                    last_for_key = Some(index)
                }
                _ => {}
            }
        }
        if let Some(index) = last_for_key {
            self.replace_value(index, value);
            return Ok(());
        }
        self.append_under(only(&state), &state, section, key, value);
        Ok(())
    }

    /// Appends `key=value` at the very end of the file under the filter
    /// `[section]` alone (after `[all]` when the file ends under other
    /// filters), so no earlier line for `key` under that filter, nor any
    /// other earlier line, overrides it where `[section]` holds.
    pub fn append_in_section(
        &mut self,
        section: &str,
        key: &str,
        value: &str,
    ) -> Result<(), ConfigTxtError> {
        check_setting(key, value)?;
        let filter = Filter::parse(section);
        let mut state = FilterState::default();
        for line in &self.lines {
            if let LineKind::Filter(f) = &line.kind {
                state.apply(f);
            }
        }
        let only =
            !state.none && state.active.len() == 1 && state.active.values().any(|f| *f == filter);
        self.append_under(only, &state, section, key, value);
        Ok(())
    }

    fn append_under(
        &mut self,
        already_only: bool,
        state: &FilterState,
        section: &str,
        key: &str,
        value: &str,
    ) {
        let mut header = Vec::new();
        if !already_only {
            if !state.is_unconditional() {
                header.push("[all]".to_string());
            }
            header.push(format!("[{section}]"));
        }
        self.append_lines(header, key, value);
    }

    /// The lines that set `key` and certainly or maybe apply for `ctx`, in
    /// the file's order (lines that certainly do not are left out); the
    /// last one that certainly applies is the one in effect. Used for the
    /// bootloader's EEPROM config, to change a setting where it takes
    /// effect.
    pub fn lines_setting(&self, wanted: &str, ctx: &FilterContext) -> Vec<(usize, LineApplies)> {
        let mut state = FilterState::default();
        let mut found = Vec::new();
        for (index, line) in self.lines.iter().enumerate() {
            match &line.kind {
                LineKind::Filter(filter) => state.apply(filter),
                LineKind::Setting { key, .. } if key == wanted => match state.evaluate(ctx) {
                    Applies::Yes => found.push((index, LineApplies::Yes)),
                    Applies::Maybe => found.push((index, LineApplies::Maybe)),
                    Applies::No => {}
                },
                _ => {}
            }
        }
        found
    }

    /// Replaces the value of the setting on line `index` (0-based, as
    /// [`ConfigTxt::lines_setting`] gives it), every other byte kept.
    pub fn set_value_at(&mut self, index: usize, value: &str) -> Result<(), ConfigTxtError> {
        let key = match self.lines.get(index).map(|l| &l.kind) {
            Some(LineKind::Setting { key, .. }) => key.clone(),
            _ => {
                return Err(ConfigTxtError::InvalidSetting {
                    key: format!("line {}", index + 1),
                    value: value.to_string(),
                    reason: "that line is not a setting",
                })
            }
        };
        check_setting(&key, value)?;
        self.replace_value(index, value);
        Ok(())
    }

    /// Removes the setting on line `index`. Filter lines right before it
    /// that then guard nothing (only `[all]` or the end of the file comes
    /// after them) go with it, so a section added by
    /// [`ConfigTxt::append_in_section`] and removed again leaves the file
    /// as it was.
    pub fn remove_setting_at(&mut self, index: usize) {
        if !matches!(
            self.lines.get(index).map(|l| &l.kind),
            Some(LineKind::Setting { .. })
        ) {
            return;
        }
        let removed = self.lines.remove(index);
        let was_last = index == self.lines.len();
        let guards_nothing = match self.lines[index..]
            .iter()
            .find(|l| !matches!(l.kind, LineKind::Blank | LineKind::Comment))
        {
            None => true,
            Some(next) => next.kind == LineKind::Filter(Filter::All),
        };
        let mut start = index;
        if guards_nothing {
            while start > 0 && matches!(self.lines[start - 1].kind, LineKind::Filter(_)) {
                start -= 1;
            }
        }
        self.lines.drain(start..index);
        // The file's missing final newline stays missing.
        if was_last && removed.raw.ending.is_empty() {
            if let Some(last) = self.lines.last_mut() {
                last.raw.ending.clear();
            }
        }
    }

    /// The file's bytes: the original with only the edits applied.
    pub fn to_bytes(&self) -> Vec<u8> {
        let raw: Vec<RawLine> = self.lines.iter().map(|line| line.raw.clone()).collect();
        join_lines(&raw)
    }

    fn last_unconditional_line_for(&self, wanted: &str) -> Option<usize> {
        let mut state = FilterState::default();
        let mut found = None;
        for (index, line) in self.lines.iter().enumerate() {
            match &line.kind {
                LineKind::Filter(filter) => state.apply(filter),
                LineKind::Setting { key, .. } if key == wanted && state.is_unconditional() => {
                    found = Some(index);
                }
                _ => {}
            }
        }
        found
    }

    fn ends_unconditional(&self) -> bool {
        let mut state = FilterState::default();
        for line in &self.lines {
            if let LineKind::Filter(filter) = &line.kind {
                state.apply(filter);
            }
        }
        state.is_unconditional()
    }

    fn replace_value(&mut self, index: usize, value: &str) {
        let Some(line) = self.lines.get_mut(index) else {
            return;
        };
        if let LineKind::Setting { value_range, .. } = &line.kind {
            let mut content = line.raw.content.clone();
            content.replace_range(value_range.clone(), value);
            if let Ok(kind) = classify(&content, index + 1) {
                line.raw.content = content;
                line.kind = kind;
            }
        }
    }

    fn append_setting(&mut self, key: &str, value: &str) {
        let needs_all = !self.ends_unconditional();
        self.append_setting_after(key, value, needs_all);
    }

    fn append_setting_after(&mut self, key: &str, value: &str, all_first: bool) {
        let header = if all_first {
            vec!["[all]".to_string()]
        } else {
            Vec::new()
        };
        self.append_lines(header, key, value);
    }

    /// Appends the filter lines `header`, then `key` set to `value`.
    fn append_lines(&mut self, header: Vec<String>, key: &str, value: &str) {
        let raw_lines: Vec<RawLine> = self.lines.iter().map(|l| l.raw.clone()).collect();
        let ending = preferred_ending(&raw_lines);
        let last_ending = match self.lines.last_mut() {
            Some(last) if last.raw.ending.is_empty() => {
                // Keep the file's missing final newline: the new last line lacks it.
                last.raw.ending = ending.to_string();
                ""
            }
            _ => ending,
        };
        let mut new_lines = header;
        let separator = if SPACE_SEPARATED_KEYS.contains(&key) {
            " "
        } else {
            "="
        };
        new_lines.push(format!("{key}{separator}{value}"));
        let count = new_lines.len();
        for (position, content) in new_lines.into_iter().enumerate() {
            let line_number = self.lines.len() + 1;
            let Ok(kind) = classify(&content, line_number) else {
                continue;
            };
            let this_ending = if position + 1 == count {
                last_ending
            } else {
                ending
            };
            self.lines.push(Line {
                raw: RawLine {
                    content,
                    ending: this_ending.to_string(),
                },
                kind,
            });
        }
    }
}

impl BootSettings {
    fn apply(&mut self, key: &str, value: &str) {
        self.uncertain.retain(|u| u.key != key);
        match key {
            "kernel" => self.kernel = Some(value.to_string()),
            "initramfs" => self.initramfs = Some(Initramfs::parse(value)),
            "cmdline" => self.cmdline = Some(value.to_string()),
            "os_prefix" => self.os_prefix = Some(value.to_string()),
            "arm_64bit" => self.arm_64bit = parse_flag(value),
            _ => {}
        }
    }
}

/// The keys [`BootSettings`] reports.
fn is_boot_key(key: &str) -> bool {
    matches!(
        key,
        "kernel" | "initramfs" | "cmdline" | "os_prefix" | "arm_64bit"
    )
}

/// Parses an integer flag as the firmware does (non-zero is on); `None` for
/// text that is not a number.
fn parse_flag(value: &str) -> Option<bool> {
    let value = value.trim();
    let number = match value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
    {
        Some(hex) => i64::from_str_radix(hex, 16).ok(),
        None => value.parse::<i64>().ok(),
    };
    number.map(|n| n != 0)
}

fn check_setting(key: &str, value: &str) -> Result<(), ConfigTxtError> {
    let invalid = |reason| ConfigTxtError::InvalidSetting {
        key: key.to_string(),
        value: value.to_string(),
        reason,
    };
    if key.is_empty() {
        return Err(invalid("the key is empty"));
    }
    if key.contains(|c: char| c == '=' || c.is_whitespace() || c.is_control())
        || key.starts_with(['#', '['])
    {
        return Err(invalid(
            "the key must not contain '=', whitespace or control characters, nor start with '#' or '['",
        ));
    }
    if value.contains(|c: char| c.is_control()) {
        return Err(invalid(
            "the value must not contain line breaks or control characters",
        ));
    }
    if value.trim() != value {
        return Err(invalid("the value must not start or end with whitespace"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ConfigTxt {
        ConfigTxt::parse(text.as_bytes()).expect("valid config.txt")
    }

    fn text(config: &ConfigTxt) -> String {
        String::from_utf8(config.to_bytes()).expect("utf-8")
    }

    fn ctx(model: &str) -> FilterContext {
        FilterContext::new(Some(model), false)
    }

    const MIXED: &str = "\
# For more options see config.txt documentation
dtparam=audio=on
auto_initramfs=1
kernel=kernel-all.img

[pi4]
kernel=kernel-pi4.img
arm_boost=1

[pi5]
kernel=kernel-pi5.img

[all]
arm_64bit=1
initramfs initrd.img followkernel
";

    #[test]
    fn round_trips() {
        for input in ["", "\n", MIXED, "a=1\r\n[pi4]\r\nb=2", "  weird line  \n"] {
            assert_eq!(text(&parse(input)), input);
        }
    }

    #[test]
    fn model_sections_select_kernel() {
        let config = parse(MIXED);
        assert_eq!(
            config.effective(&ctx("pi4")).kernel.as_deref(),
            Some("kernel-pi4.img")
        );
        assert_eq!(
            config.effective(&ctx("pi400")).kernel.as_deref(),
            Some("kernel-pi4.img")
        );
        assert_eq!(
            config.effective(&ctx("pi5")).kernel.as_deref(),
            Some("kernel-pi5.img")
        );
        assert_eq!(
            config.effective(&ctx("cm5")).kernel.as_deref(),
            Some("kernel-pi5.img")
        );
        assert_eq!(
            config.effective(&ctx("pi3")).kernel.as_deref(),
            Some("kernel-all.img")
        );
        let not_a_pi = config.effective(&FilterContext::default());
        assert_eq!(not_a_pi.kernel.as_deref(), Some("kernel-all.img"));
        assert_eq!(not_a_pi.arm_64bit, Some(true));
        assert_eq!(
            not_a_pi.initramfs,
            Some(Initramfs {
                file: "initrd.img".into(),
                address: InitramfsAddress::FollowKernel
            })
        );
    }

    #[test]
    fn model_aliases_follow_the_documentation() {
        let seen = |model: &str, filter: &str| {
            let config = parse(&format!("[{filter}]\ncmdline=x.txt\n"));
            config.effective(&ctx(model)).cmdline.is_some()
        };
        assert!(seen("pi3+", "pi3"));
        assert!(!seen("pi3", "pi3+"));
        assert!(seen("pi500", "pi5"));
        assert!(seen("pi500", "pi500"));
        assert!(!seen("pi5", "pi500"));
        assert!(seen("cm4", "pi4"));
        assert!(seen("cm4s", "pi4"));
        assert!(!seen("pi4", "cm4"));
        assert!(seen("pi02", "pi0"));
        assert!(seen("pi02", "pi0w"));
        assert!(seen("pi0w", "pi0"));
        assert!(!seen("pi0", "pi0w"));
        assert!(!seen("pi4", "pi5"));
    }

    #[test]
    fn same_type_filters_replace_each_other() {
        let config = parse("[pi4]\n[pi5]\ncmdline=five.txt\n");
        assert_eq!(config.effective(&ctx("pi4")).cmdline, None);
        assert_eq!(
            config.effective(&ctx("pi5")).cmdline.as_deref(),
            Some("five.txt")
        );
    }

    #[test]
    fn different_types_combine_with_and() {
        let config = parse("[tryboot]\n[pi4]\ncmdline=trial.txt\n[all]\nos_prefix=p/\n");
        let trial_pi4 = config.effective(&FilterContext::new(Some("pi4"), true));
        assert_eq!(trial_pi4.cmdline.as_deref(), Some("trial.txt"));
        assert_eq!(trial_pi4.cmdline_file(), "p/trial.txt");
        assert_eq!(config.effective(&ctx("pi4")).cmdline, None);
        assert_eq!(
            config
                .effective(&FilterContext::new(Some("pi5"), true))
                .cmdline,
            None
        );
        assert_eq!(
            config.effective(&ctx("pi5")).cmdline_file(),
            "p/cmdline.txt"
        );
    }

    #[test]
    fn none_disables_until_all() {
        let config = parse("[none]\ncmdline=a.txt\n[pi4]\ncmdline=b.txt\n[all]\nkernel=k.img\n");
        let settings = config.effective(&ctx("pi4"));
        assert_eq!(settings.cmdline, None);
        assert_eq!(settings.kernel.as_deref(), Some("k.img"));
    }

    #[test]
    fn unevaluable_filters_are_reported_not_applied() {
        let config = parse("cmdline=base.txt\n[gpio4=1]\ncmdline=gpio.txt\n[all]\n");
        let settings = config.effective(&ctx("pi4"));
        assert_eq!(settings.cmdline.as_deref(), Some("base.txt"));
        assert_eq!(settings.uncertain.len(), 1);
        assert_eq!(settings.uncertain[0].line, 3);
        assert_eq!(settings.uncertain[0].value, "gpio.txt");
        assert!(settings.uncertain[0].reason.contains("[gpio4=1]"));
        assert!(!settings.is_certain());

        for filter in [
            "EDID=DEL-DELL_U2422H",
            "0x12345678",
            "HDMI:0",
            "board-type=0x11",
            "pi9",
            "weird",
        ] {
            let config = parse(&format!("[{filter}]\ncmdline=x.txt\n"));
            let settings = config.effective(&ctx("pi4"));
            assert_eq!(settings.cmdline, None, "{filter}");
            assert_eq!(settings.uncertain.len(), 1, "{filter}");
        }
    }

    #[test]
    fn a_later_certain_setting_settles_an_uncertain_one() {
        let config = parse("[EDID=X]\ncmdline=a.txt\n[all]\ncmdline=b.txt\n");
        let settings = config.effective(&ctx("pi5"));
        assert_eq!(settings.cmdline.as_deref(), Some("b.txt"));
        assert!(settings.uncertain.is_empty());
    }

    #[test]
    fn a_known_model_filter_rules_out_an_unknown_condition() {
        let config = parse("[gpio4=1]\n[pi5]\ncmdline=a.txt\n");
        assert!(config.effective(&ctx("pi4")).uncertain.is_empty());
        assert_eq!(config.effective(&ctx("pi5")).uncertain.len(), 1);
    }

    #[test]
    fn unknown_board_is_uncertain_for_other_models() {
        let config = parse("[pi6]\ncmdline=b.txt\n[pi4]\ncmdline=a.txt\n");
        let settings = config.effective(&ctx("pi6"));
        assert_eq!(settings.uncertain.len(), 1);
        assert_eq!(settings.uncertain[0].value, "a.txt");
        assert_eq!(settings.cmdline.as_deref(), Some("b.txt"));
    }

    #[test]
    fn cmdline_file_defaults_and_prefixes() {
        let mut settings = BootSettings::default();
        assert_eq!(settings.cmdline_file(), "cmdline.txt");
        settings.os_prefix = Some("next/".into());
        assert_eq!(settings.cmdline_file(), "next/cmdline.txt");
        settings.cmdline = Some("/shared.txt".into());
        assert_eq!(settings.cmdline_file(), "shared.txt");
        settings.cmdline = Some("tryboot-cmdline.txt".into());
        assert_eq!(settings.cmdline_file(), "next/tryboot-cmdline.txt");
    }

    #[test]
    fn initramfs_forms_and_flags() {
        assert_eq!(
            Initramfs::parse("initrd.img 0x00800000").address,
            InitramfsAddress::Address("0x00800000".into())
        );
        assert_eq!(
            Initramfs::parse("initrd.img 0").address,
            InitramfsAddress::FollowKernel
        );
        assert_eq!(
            Initramfs::parse("initrd.img").address,
            InitramfsAddress::Unspecified
        );
        assert_eq!(parse_flag("1"), Some(true));
        assert_eq!(parse_flag("0"), Some(false));
        assert_eq!(parse_flag("0x1"), Some(true));
        assert_eq!(parse_flag("yes"), None);
    }

    #[test]
    fn includes_are_listed() {
        let settings = parse("include extra.txt\n").effective(&ctx("pi4"));
        assert_eq!(settings.includes, ["extra.txt"]);
        assert_eq!(settings.unread_includes, ["extra.txt"]);
        assert!(!settings.is_certain());
    }

    /// Ubuntu 20.04's config.txt: `cmdline=cmdline.txt` in config.txt, then
    /// `include syscfg.txt`, whose own `cmdline=` comes later and wins.
    #[test]
    fn included_files_are_read_in_place_and_a_later_assignment_wins() {
        let config = parse(
            "[all]\narm_64bit=1\ncmdline=first.txt\ninclude syscfg.txt\ninclude usercfg.txt\n",
        );
        let mut read = |name: &str| -> std::io::Result<Option<Vec<u8>>> {
            Ok(match name {
                "syscfg.txt" => Some(b"enable_uart=1\ncmdline=cmdline.txt\n[pi4]\n".to_vec()),
                "usercfg.txt" => Some(b"cmdline=pi4-only.txt\n".to_vec()),
                _ => None,
            })
        };
        let pi4 = config.effective_with(&ctx("pi4"), &mut read);
        assert_eq!(
            pi4.cmdline_file(),
            "pi4-only.txt",
            "the [pi4] syscfg.txt left open holds in usercfg.txt"
        );
        assert!(pi4.is_certain());
        assert_eq!(pi4.includes, ["syscfg.txt", "usercfg.txt"]);
        let pi3 = config.effective_with(&ctx("pi3"), &mut read);
        assert_eq!(pi3.cmdline_file(), "cmdline.txt");
    }

    #[test]
    fn missing_includes_add_nothing_and_unreadable_or_looping_ones_are_unknown() {
        let config = parse("cmdline=a.txt\ninclude gone.txt\n[pi5]\ninclude pi5.txt\n");
        let mut read = |name: &str| -> std::io::Result<Option<Vec<u8>>> {
            match name {
                "gone.txt" => Ok(None),
                _ => Err(std::io::ErrorKind::PermissionDenied.into()),
            }
        };
        let pi4 = config.effective_with(&ctx("pi4"), &mut read);
        assert!(pi4.is_certain(), "{pi4:?}");
        assert_eq!(pi4.cmdline_file(), "a.txt");
        let pi5 = config.effective_with(&ctx("pi5"), &mut read);
        assert_eq!(pi5.unread_includes, ["pi5.txt"]);
        let looping = parse("include self.txt\n");
        let mut read_self = |_: &str| -> std::io::Result<Option<Vec<u8>>> {
            Ok(Some(b"include self.txt\n".to_vec()))
        };
        let settings = looping.effective_with(&ctx("pi4"), &mut read_self);
        assert_eq!(settings.unread_includes, ["self.txt"]);
    }

    #[test]
    fn set_last_goes_after_everything() {
        let mut config = parse("cmdline=cmdline.txt\ninclude syscfg.txt\n");
        config.try_set_last("cmdline", "trial.txt").unwrap();
        assert_eq!(
            String::from_utf8(config.to_bytes()).unwrap(),
            "cmdline=cmdline.txt\ninclude syscfg.txt\n[all]\ncmdline=trial.txt\n"
        );
        let mut config = parse("include usercfg.txt\n[all]\n");
        config.try_set_last("cmdline", "trial.txt").unwrap();
        assert_eq!(
            String::from_utf8(config.to_bytes()).unwrap(),
            "include usercfg.txt\n[all]\ncmdline=trial.txt\n"
        );
    }

    #[test]
    fn sections_in_order_without_repeats() {
        let config = parse("[pi4]\n[all]\n[pi5]\n[all]\n[tryboot]\n[gpio4=1]\n");
        assert_eq!(
            config.sections(),
            ["pi4", "all", "pi5", "tryboot", "gpio4=1"]
        );
    }

    #[test]
    fn set_replaces_unconditional_value_only() {
        let mut config = parse(MIXED);
        config.set("kernel", "kernel8.img");
        let expected = MIXED.replacen("kernel=kernel-all.img", "kernel=kernel8.img", 1);
        assert_eq!(text(&config), expected);
        config.set("arm_64bit", "0");
        assert_eq!(
            text(&config),
            expected.replace("arm_64bit=1", "arm_64bit=0")
        );
        config.set("initramfs", "initramfs8 followkernel");
        assert!(text(&config).contains("\ninitramfs initramfs8 followkernel\n"));
    }

    #[test]
    fn set_keeps_spacing_around_value() {
        let mut config = parse("cmdline = old.txt  \r\n");
        config.set("cmdline", "new.txt");
        assert_eq!(text(&config), "cmdline = new.txt  \r\n");
    }

    #[test]
    fn set_appends_under_all_when_needed() {
        let mut config = parse("[pi4]\nkernel=a.img\n");
        config.set("kernel", "b.img");
        assert_eq!(text(&config), "[pi4]\nkernel=a.img\n[all]\nkernel=b.img\n");
        assert_eq!(
            config.effective(&ctx("pi4")).kernel.as_deref(),
            Some("b.img")
        );
    }

    #[test]
    fn set_appends_keeping_line_endings() {
        let mut no_newline = parse("a=1");
        no_newline.set("b", "2");
        assert_eq!(text(&no_newline), "a=1\nb=2");
        let mut crlf = parse("a=1\r\n");
        crlf.set("b", "2");
        assert_eq!(text(&crlf), "a=1\r\nb=2\r\n");
        let mut empty = parse("");
        empty.set("b", "2");
        assert_eq!(text(&empty), "b=2\n");
    }

    #[test]
    fn set_refuses_unwritable_settings() {
        let mut config = parse(MIXED);
        for (key, value) in [
            ("", "1"),
            ("a b", "1"),
            ("a=b", "1"),
            ("#x", "1"),
            ("[pi4]", "1"),
            ("k", "1\n[pi4]"),
            ("k", " 1"),
        ] {
            assert!(matches!(
                config.try_set(key, value),
                Err(ConfigTxtError::InvalidSetting { .. })
            ));
            config.set(key, value);
        }
        assert_eq!(text(&config), MIXED);
    }

    #[test]
    fn parse_errors() {
        assert_eq!(
            ConfigTxt::parse(b"a=1\n[pi4\n"),
            Err(ConfigTxtError::UnclosedFilter { line: 2 })
        );
        assert_eq!(
            ConfigTxt::parse(b"a=\0"),
            Err(ConfigTxtError::NulByte { offset: 2 })
        );
        assert_eq!(
            ConfigTxt::parse(b"\xc3"),
            Err(ConfigTxtError::NotUtf8 { offset: 0 })
        );
    }
}
