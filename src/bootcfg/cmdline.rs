//! The kernel command line in `cmdline.txt`.
//!
//! The file holds one line of space-separated arguments. An edit touches only
//! the arguments it names: the separators between the others (one space, two,
//! a tab), leading and trailing whitespace, the line ending (LF, CRLF or none)
//! and any blank lines after it are written back as they were read.
//!
//! Arguments follow the kernel's rules: whitespace separates them unless it is
//! inside double quotes (`dyndbg="file x +p"`), and a bare `--` ends the
//! kernel's arguments; what follows it goes to `init`. Key lookups (`root`,
//! [`Cmdline::get`], [`Cmdline::has`], [`Cmdline::remove`]) consider only the
//! kernel's arguments, and [`Cmdline::add`] inserts before a `--`.

use super::spec::{DeviceSpec, SpecError};
use super::text::{decode, NotText};

/// Why a `cmdline.txt` cannot be used or edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CmdlineError {
    /// A NUL byte: binary or damaged data.
    #[error("cmdline.txt contains a NUL byte at offset {offset}; it looks like a damaged or binary file, not a kernel command line")]
    NulByte { offset: usize },
    /// Not UTF-8 text.
    #[error("cmdline.txt is not valid UTF-8 text (the problem starts at byte {offset}); it looks damaged")]
    NotUtf8 { offset: usize },
    /// Nothing but whitespace.
    #[error("cmdline.txt is empty; the kernel would not know which partition to mount")]
    Empty,
    /// Arguments on a second non-empty line.
    #[error("cmdline.txt has text on line {line}, but the kernel command line must be one single line; join the lines with a space")]
    MultipleLines { line: usize },
    /// The first line is blank and the arguments come later.
    #[error("cmdline.txt starts with a blank line and has its arguments on line {line}; the kernel command line must be the first line")]
    ArgumentsNotOnFirstLine { line: usize },
    /// A `"` without its partner.
    #[error("cmdline.txt has a double quote without a closing partner; the kernel would run the rest of the line into one argument")]
    UnbalancedQuote,
    /// No `root=` before `--`.
    #[error(
        "cmdline.txt has no root= argument; the kernel would not know which partition to mount"
    )]
    NoRoot,
    /// Several `root=` arguments.
    #[error("cmdline.txt has {} root= arguments ({}); remove all but one so it is clear which partition the kernel mounts", values.len(), values.join(", "))]
    SeveralRoots { values: Vec<String> },
    /// `root=` with a value that is not a device name.
    #[error(
        "cmdline.txt has root={value}, which is not a device name this tool understands: {source}"
    )]
    InvalidRoot { value: String, source: SpecError },
    /// A spec that cannot be one argument (contains whitespace or quotes).
    #[error("{spec} cannot be written as root= on the kernel command line: it contains whitespace, a quote or a control character")]
    UnwritableRoot { spec: String },
    /// An argument to add that is not a single, well-formed argument.
    #[error("{arg:?} cannot be added to cmdline.txt: {reason}")]
    InvalidArgument { arg: String, reason: &'static str },
}

impl From<NotText> for CmdlineError {
    fn from(e: NotText) -> Self {
        match e {
            NotText::Nul { offset } => CmdlineError::NulByte { offset },
            NotText::InvalidUtf8 { offset } => CmdlineError::NotUtf8 { offset },
        }
    }
}

/// One argument and the whitespace that separated it from the one before.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Arg {
    /// Separator before this argument; empty for the first one (the line's
    /// leading whitespace lives in [`Cmdline::leading`]).
    separator_before: String,
    text: String,
}

impl Arg {
    fn key(&self) -> &str {
        key_of(&self.text)
    }
}

/// A parsed `cmdline.txt` that writes back every byte it did not edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmdline {
    leading: String,
    args: Vec<Arg>,
    /// Whitespace after the last argument, up to the line ending.
    trailing: String,
    /// The first line's ending and whatever blank lines follow.
    after_line: String,
}

/// Separators the kernel recognises between arguments (C `isspace`).
fn is_separator(c: char) -> bool {
    c.is_ascii_whitespace() || c == '\x0b'
}

/// The key of an argument: everything before the first `=`.
fn key_of(arg: &str) -> &str {
    arg.split_once('=').map_or(arg, |(key, _)| key)
}

/// The value of an argument: everything after the first `=`, or `""`.
fn value_of(arg: &str) -> &str {
    arg.split_once('=').map_or("", |(_, value)| value)
}

/// Strips one pair of surrounding double quotes, as the kernel does for values.
fn unquote(value: &str) -> &str {
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value)
}

/// Splits one line into (leading, args, trailing), honouring double quotes.
fn tokenize(line: &str) -> Result<(String, Vec<Arg>, String), CmdlineError> {
    let mut args = Vec::new();
    let mut separator = String::new();
    let mut current = String::new();
    let mut in_quotes = false;
    let mut leading: Option<String> = None;
    for c in line.chars() {
        if !in_quotes && is_separator(c) {
            if !current.is_empty() {
                push_arg(&mut args, &mut leading, &mut separator, &mut current);
            }
            separator.push(c);
        } else {
            if c == '"' {
                in_quotes = !in_quotes;
            }
            current.push(c);
        }
    }
    if in_quotes {
        return Err(CmdlineError::UnbalancedQuote);
    }
    if !current.is_empty() {
        push_arg(&mut args, &mut leading, &mut separator, &mut current);
    }
    Ok((leading.unwrap_or_default(), args, separator))
}

fn push_arg(
    args: &mut Vec<Arg>,
    leading: &mut Option<String>,
    separator: &mut String,
    current: &mut String,
) {
    let separator_before = std::mem::take(separator);
    let separator_before = if leading.is_none() {
        *leading = Some(separator_before);
        String::new()
    } else {
        separator_before
    };
    args.push(Arg {
        separator_before,
        text: std::mem::take(current),
    });
}

/// Checks that `arg` is one argument the kernel would read back unchanged.
fn check_single_argument(arg: &str) -> Result<(), CmdlineError> {
    let invalid = |reason| CmdlineError::InvalidArgument {
        arg: arg.to_string(),
        reason,
    };
    if arg.is_empty() {
        return Err(invalid("it is empty"));
    }
    if arg == "--" {
        return Err(invalid("\"--\" is a separator, not an argument"));
    }
    if arg.chars().any(|c| c.is_control() && !is_separator(c)) {
        return Err(invalid("it contains control characters"));
    }
    match tokenize(arg) {
        Ok((leading, args, trailing))
            if leading.is_empty() && trailing.is_empty() && args.len() == 1 =>
        {
            Ok(())
        }
        Ok(_) => Err(invalid(
            "it contains whitespace outside double quotes, so the kernel would read several arguments",
        )),
        Err(_) => Err(invalid("it has an unbalanced double quote")),
    }
}

impl Cmdline {
    /// Parses the bytes of a `cmdline.txt`.
    ///
    /// Accepts one non-empty line, optionally followed by a line ending and
    /// blank lines. Does not require `root=`: [`Cmdline::root`] checks that,
    /// so a file can still be inspected when it lacks one.
    pub fn parse(bytes: &[u8]) -> Result<Cmdline, CmdlineError> {
        let text = decode(bytes)?;
        if text.chars().all(is_separator) {
            return Err(CmdlineError::Empty);
        }
        let (first_line, after_line) = match text.find('\n') {
            Some(pos) => text.split_at(pos),
            None => (text, ""),
        };
        if let Some(line) = first_non_blank_line_after_first(after_line) {
            if first_line.chars().all(is_separator) {
                return Err(CmdlineError::ArgumentsNotOnFirstLine { line });
            }
            return Err(CmdlineError::MultipleLines { line });
        }
        let (leading, args, trailing) = tokenize(first_line)?;
        Ok(Cmdline {
            leading,
            args,
            trailing,
            after_line: after_line.to_string(),
        })
    }

    /// The one `root=` device. Errors when there is none, several, or one
    /// whose value is not a device name.
    pub fn root(&self) -> Result<DeviceSpec, CmdlineError> {
        let index = self.single_root_index()?;
        let value = value_of(&self.args[index].text);
        DeviceSpec::parse(unquote(value)).map_err(|source| CmdlineError::InvalidRoot {
            value: value.to_string(),
            source,
        })
    }

    /// Replaces the value of the one `root=` argument, touching nothing else.
    ///
    /// Refuses when there is no `root=` or several (it is then unclear which
    /// one the edit should change), and when the spec cannot be one argument.
    pub fn set_root(&mut self, spec: &DeviceSpec) -> Result<(), CmdlineError> {
        let text = spec.to_string();
        let one_token = spec.validate().is_ok()
            && !text.contains(|c: char| is_separator(c) || c == '"' || c.is_control());
        if !one_token {
            return Err(CmdlineError::UnwritableRoot { spec: text });
        }
        let index = self.single_root_index()?;
        self.args[index].text = format!("root={text}");
        Ok(())
    }

    /// The value of the first kernel argument named `key`: the text after
    /// `=` without surrounding quotes, or `""` for a bare flag like `rootwait`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.kernel_args()
            .iter()
            .find(|arg| arg.key() == key)
            .map(|arg| unquote(value_of(&arg.text)))
    }

    /// Whether a kernel argument named `key` is present, bare or with a value.
    pub fn has(&self, key: &str) -> bool {
        self.kernel_args().iter().any(|arg| arg.key() == key)
    }

    /// Adds `arg` (`rootwait`, `usb-storage.quirks=174c:55aa:u`), for
    /// arguments the program itself spells out.
    ///
    /// Appends it after the last kernel argument if its key is absent; if the
    /// key is present with another value, replaces the first occurrence and
    /// drops the others, so the kernel sees exactly `arg`. An argument that is
    /// not one well-formed argument is refused and the line stays unchanged;
    /// use [`Cmdline::try_add`] to learn why.
    pub fn add(&mut self, arg: &str) {
        // The only error is a malformed argument, which leaves the line as it was.
        let _ = self.try_add(arg);
    }

    /// Like [`Cmdline::add`], reporting a malformed argument as an error and
    /// whether the line changed.
    pub fn try_add(&mut self, arg: &str) -> Result<bool, CmdlineError> {
        check_single_argument(arg)?;
        let key = key_of(arg);
        let matching: Vec<usize> = self.kernel_indices_with_key(key);
        let Some((&first, others)) = matching.split_first() else {
            let position = self.kernel_args().len();
            self.insert_at(position, arg);
            return Ok(true);
        };
        let changed = self.args[first].text != arg || !others.is_empty();
        self.args[first].text = arg.to_string();
        for &index in others.iter().rev() {
            self.remove_at(index);
        }
        Ok(changed)
    }

    /// Removes every kernel argument named `key`; true if any was removed.
    pub fn remove(&mut self, key: &str) -> bool {
        let matching = self.kernel_indices_with_key(key);
        for &index in matching.iter().rev() {
            self.remove_at(index);
        }
        !matching.is_empty()
    }

    /// Removes every kernel argument written exactly as `arg` (a first-boot
    /// hook such as `init=/usr/lib/raspi-config/init_resize.sh`), leaving an
    /// `init=` with another value alone; true if any was removed.
    pub fn remove_exact(&mut self, arg: &str) -> bool {
        let end = self.kernel_args().len();
        let matching: Vec<usize> = (0..end).filter(|&i| self.args[i].text == arg).collect();
        for &index in matching.iter().rev() {
            self.remove_at(index);
        }
        !matching.is_empty()
    }

    /// The kernel's arguments (those before a bare `--`), as written.
    pub fn kernel_arguments(&self) -> impl Iterator<Item = &str> {
        self.kernel_args().iter().map(|arg| arg.text.as_str())
    }

    /// All arguments in order, as written (including a `--` and what follows).
    pub fn args(&self) -> impl Iterator<Item = &str> {
        self.args.iter().map(|arg| arg.text.as_str())
    }

    /// The file's bytes: the original with only the edits applied.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = String::with_capacity(self.leading.len() + self.after_line.len() + 128);
        out.push_str(&self.leading);
        for arg in &self.args {
            out.push_str(&arg.separator_before);
            out.push_str(&arg.text);
        }
        out.push_str(&self.trailing);
        out.push_str(&self.after_line);
        out.into_bytes()
    }

    /// Arguments meant for the kernel: those before a bare `--`.
    fn kernel_args(&self) -> &[Arg] {
        let end = self
            .args
            .iter()
            .position(|arg| arg.text == "--")
            .unwrap_or(self.args.len());
        &self.args[..end]
    }

    fn kernel_indices_with_key(&self, key: &str) -> Vec<usize> {
        self.kernel_args()
            .iter()
            .enumerate()
            .filter(|(_, arg)| arg.key() == key)
            .map(|(index, _)| index)
            .collect()
    }

    fn single_root_index(&self) -> Result<usize, CmdlineError> {
        let roots = self.kernel_indices_with_key("root");
        match roots.as_slice() {
            [] => Err(CmdlineError::NoRoot),
            [index] => Ok(*index),
            several => Err(CmdlineError::SeveralRoots {
                values: several
                    .iter()
                    .map(|&i| value_of(&self.args[i].text).to_string())
                    .collect(),
            }),
        }
    }

    fn insert_at(&mut self, index: usize, text: &str) {
        let mut arg = Arg {
            separator_before: " ".to_string(),
            text: text.to_string(),
        };
        if index == 0 {
            arg.separator_before.clear();
            if let Some(first) = self.args.first_mut() {
                first.separator_before = " ".to_string();
            }
        }
        self.args.insert(index, arg);
    }

    /// Removes one argument with the separator before it; the line's leading
    /// whitespace stays.
    fn remove_at(&mut self, index: usize) {
        if index >= self.args.len() {
            return;
        }
        self.args.remove(index);
        if index == 0 {
            if let Some(first) = self.args.first_mut() {
                first.separator_before.clear();
            }
        }
    }
}

/// The 1-based number of the first non-blank line in the text after the first
/// line (which starts with that line's `\n`).
fn first_non_blank_line_after_first(after_line: &str) -> Option<usize> {
    after_line
        .split('\n')
        .enumerate()
        .skip(1)
        .find(|(_, line)| !line.chars().all(is_separator))
        .map(|(index, _)| index + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOKWORM: &str = "console=serial0,115200 console=tty1 root=PARTUUID=6c586e13-02 rootfstype=ext4 fsck.repair=yes rootwait\n";

    fn parse(text: &str) -> Cmdline {
        Cmdline::parse(text.as_bytes()).expect("valid cmdline")
    }

    fn text(cmdline: &Cmdline) -> String {
        String::from_utf8(cmdline.to_bytes()).expect("utf-8")
    }

    #[test]
    fn round_trips_odd_spacing_and_endings() {
        for input in [
            BOOKWORM,
            "  root=/dev/sda2\t rootwait  \r\n",
            "root=/dev/sda2",
            "root=/dev/sda2\n\n\n",
            "root=/dev/sda2 \r\n \r\n",
            "a=\"x y\"  root=LABEL=writable -- single",
        ] {
            assert_eq!(text(&parse(input)), input);
        }
    }

    #[test]
    fn reads_root() {
        assert_eq!(
            parse(BOOKWORM).root(),
            Ok(DeviceSpec::PartUuid("6c586e13-02".into()))
        );
        assert_eq!(
            parse("root=LABEL=writable").root(),
            Ok(DeviceSpec::Label("writable".into()))
        );
    }

    #[test]
    fn root_errors() {
        assert_eq!(parse("quiet splash").root(), Err(CmdlineError::NoRoot));
        assert_eq!(
            parse("root=/dev/sda2 root=/dev/sdb2").root(),
            Err(CmdlineError::SeveralRoots {
                values: vec!["/dev/sda2".into(), "/dev/sdb2".into()]
            })
        );
        assert!(matches!(
            parse("root=tmpfs").root(),
            Err(CmdlineError::InvalidRoot { .. })
        ));
        assert!(matches!(
            parse("root=").root(),
            Err(CmdlineError::InvalidRoot { .. })
        ));
        // root= after "--" belongs to init, not the kernel.
        assert_eq!(
            parse("quiet -- root=/dev/sda2").root(),
            Err(CmdlineError::NoRoot)
        );
    }

    #[test]
    fn error_messages_explain() {
        assert_eq!(
            CmdlineError::NoRoot.to_string(),
            "cmdline.txt has no root= argument; the kernel would not know which partition to mount"
        );
        let several = CmdlineError::SeveralRoots {
            values: vec!["/dev/a".into(), "/dev/b".into()],
        };
        assert!(several
            .to_string()
            .contains("2 root= arguments (/dev/a, /dev/b)"));
    }

    #[test]
    fn set_root_replaces_only_the_value() {
        let mut cmdline = parse(BOOKWORM);
        cmdline
            .set_root(&DeviceSpec::PartUuid("abcdef01-02".into()))
            .expect("set root");
        assert_eq!(
            text(&cmdline),
            BOOKWORM.replace("6c586e13-02", "abcdef01-02")
        );

        let mut crlf = parse("root=/dev/mmcblk0p2\t\trootwait \r\n");
        crlf.set_root(&DeviceSpec::Path("/dev/sda2".into()))
            .expect("set root");
        assert_eq!(text(&crlf), "root=/dev/sda2\t\trootwait \r\n");
    }

    #[test]
    fn set_root_errors() {
        let spec = DeviceSpec::Path("/dev/sda2".into());
        assert_eq!(parse("quiet").set_root(&spec), Err(CmdlineError::NoRoot));
        assert!(matches!(
            parse("root=a root=b").set_root(&spec),
            Err(CmdlineError::SeveralRoots { .. })
        ));
        let mut cmdline = parse(BOOKWORM);
        for bad in [
            DeviceSpec::Label("two words".into()),
            DeviceSpec::Label("q\"uote".into()),
            DeviceSpec::Path("relative".into()),
        ] {
            assert!(matches!(
                cmdline.set_root(&bad),
                Err(CmdlineError::UnwritableRoot { .. })
            ));
        }
        assert_eq!(text(&cmdline), BOOKWORM);
    }

    #[test]
    fn set_root_fixes_an_unparseable_value() {
        let mut cmdline = parse("root=b302 rootwait");
        cmdline
            .set_root(&DeviceSpec::Path("/dev/sda2".into()))
            .expect("set root");
        assert_eq!(text(&cmdline), "root=/dev/sda2 rootwait");
    }

    #[test]
    fn get_and_has() {
        let cmdline = parse(
            "console=serial0,115200 console=tty1 rootwait dyndbg=\"file x +p\" -- init_only=1",
        );
        assert_eq!(cmdline.get("console"), Some("serial0,115200"));
        assert_eq!(cmdline.get("rootwait"), Some(""));
        assert_eq!(cmdline.get("dyndbg"), Some("file x +p"));
        assert_eq!(cmdline.get("quiet"), None);
        assert_eq!(cmdline.get("init_only"), None);
        assert!(cmdline.has("rootwait"));
        assert!(cmdline.has("console"));
        assert!(!cmdline.has("root"));
        assert!(!cmdline.has("init_only"));
    }

    #[test]
    fn add_appends_missing_flag_keeping_line_end() {
        let mut cmdline = parse("root=/dev/sda2 quiet  \r\n");
        cmdline.add("rootwait");
        assert_eq!(text(&cmdline), "root=/dev/sda2 quiet rootwait  \r\n");
        cmdline.add("rootwait");
        assert_eq!(text(&cmdline), "root=/dev/sda2 quiet rootwait  \r\n");
    }

    #[test]
    fn add_replaces_other_value_and_drops_duplicates() {
        let mut cmdline =
            parse("usb-storage.quirks=152d:0578:u root=/dev/sda2 usb-storage.quirks=x");
        assert_eq!(cmdline.try_add("usb-storage.quirks=174c:55aa:u"), Ok(true));
        assert_eq!(
            text(&cmdline),
            "usb-storage.quirks=174c:55aa:u root=/dev/sda2"
        );
        assert_eq!(cmdline.try_add("usb-storage.quirks=174c:55aa:u"), Ok(false));
    }

    #[test]
    fn add_goes_before_init_arguments() {
        let mut cmdline = parse("root=/dev/sda2 -- single");
        cmdline.add("rootwait");
        assert_eq!(text(&cmdline), "root=/dev/sda2 rootwait -- single");
        let mut only_init = parse(" -- single");
        only_init.add("rootwait");
        assert_eq!(text(&only_init), " rootwait -- single");
    }

    #[test]
    fn add_refuses_malformed_arguments() {
        let mut cmdline = parse(BOOKWORM);
        for bad in ["", "two words", "a\"b", "--", "x\ny", "nul\0"] {
            assert!(
                matches!(
                    cmdline.try_add(bad),
                    Err(CmdlineError::InvalidArgument { .. })
                ),
                "{bad:?}"
            );
            cmdline.add(bad);
        }
        assert_eq!(text(&cmdline), BOOKWORM);
        assert_eq!(cmdline.try_add("dyndbg=\"a b\""), Ok(true));
    }

    #[test]
    fn remove_every_occurrence() {
        let mut cmdline = parse("  quiet root=/dev/sda2 splash quiet\n");
        assert!(cmdline.remove("quiet"));
        assert_eq!(text(&cmdline), "  root=/dev/sda2 splash\n");
        assert!(!cmdline.remove("quiet"));
        assert!(cmdline.remove("splash"));
        assert_eq!(text(&cmdline), "  root=/dev/sda2\n");
    }

    #[test]
    fn remove_init_keeps_the_rest() {
        let input = "console=serial0,115200 console=tty1 root=PARTUUID=6c586e13-02 rootfstype=ext4 fsck.repair=yes rootwait init=/usr/lib/raspberrypi-sys-mods/firstboot\n";
        let mut cmdline = parse(input);
        assert!(cmdline.remove("init"));
        assert_eq!(text(&cmdline), BOOKWORM);
    }

    #[test]
    fn args_lists_everything() {
        let cmdline = parse(" a  b=\"c d\" -- e ");
        assert_eq!(
            cmdline.args().collect::<Vec<_>>(),
            ["a", "b=\"c d\"", "--", "e"]
        );
    }

    #[test]
    fn parse_errors() {
        assert_eq!(Cmdline::parse(b""), Err(CmdlineError::Empty));
        assert_eq!(Cmdline::parse(b" \n\r\n\t"), Err(CmdlineError::Empty));
        assert_eq!(
            Cmdline::parse(b"root=/dev/sda2\nquiet\n"),
            Err(CmdlineError::MultipleLines { line: 2 })
        );
        assert_eq!(
            Cmdline::parse(b"root=/dev/sda2\n\n  \nquiet"),
            Err(CmdlineError::MultipleLines { line: 4 })
        );
        assert_eq!(
            Cmdline::parse(b"\nroot=/dev/sda2\n"),
            Err(CmdlineError::ArgumentsNotOnFirstLine { line: 2 })
        );
        assert_eq!(
            Cmdline::parse(b"root=/dev/sda2 a=\"b\n"),
            Err(CmdlineError::UnbalancedQuote)
        );
        assert_eq!(
            Cmdline::parse(b"root=/dev/sda2\0"),
            Err(CmdlineError::NulByte { offset: 14 })
        );
        assert_eq!(
            Cmdline::parse(b"root=\xff"),
            Err(CmdlineError::NotUtf8 { offset: 5 })
        );
    }
}
