//! The line syntax that config.txt and the bootloader's bootconf.txt
//! share: `#` comments, `[filter]` section lines, and the filters both
//! firmwares match the same way.

/// One meaningful line, its comment and surrounding space dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    /// `[filter]`: the lines after it apply where the filter matches.
    Section(&'a str),
    /// Anything else: a setting, an `include`, an `initramfs` line.
    Setting(&'a str),
}

/// The meaningful lines of `text`, blank and comment-only ones skipped.
pub fn lines(text: &str) -> impl Iterator<Item = Line<'_>> {
    text.lines().filter_map(|raw| {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            return None;
        }
        Some(
            match line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                Some(filter) => Line::Section(filter.trim()),
                None => Line::Setting(line),
            },
        )
    })
}

/// Whether a section filter matches: `[all]` always, `[tryboot]` only in a
/// trial boot, the board's own filter (`own`, such as `pi4`) on that
/// board; any other filter (`[none]`, `[cm4]`, a GPIO) does not.
pub fn applies(filter: &str, own: &str, tryboot: bool) -> bool {
    match filter {
        "all" => true,
        "tryboot" => tryboot,
        other => other == own,
    }
}
