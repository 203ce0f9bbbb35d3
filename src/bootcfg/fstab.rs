//! `/etc/fstab`: which partitions userspace mounts where.
//!
//! Lines are kept as read. Comments, blank lines and the whitespace between
//! fields (tabs, runs of spaces for column alignment) are never rewritten;
//! [`Fstab::set_spec`] replaces the characters of the first field and nothing
//! else, so columns after it shift only if the new name is longer or shorter
//! ([`Fstab::set_type`] the third field's, alike).
//!
//! Fields may contain octal escapes (`\040` for a space, `\011` tab, `\012`
//! newline, `\134` backslash), as in fstab(5). [`FstabEntry`] reports the spec
//! and mount point unescaped; a new spec is escaped before it is written.
//! Lines whose first field is not a device (`proc`, `tmpfs`, `none`) are valid
//! entries too; they just have no [`DeviceSpec`].

use std::ops::Range;

use super::spec::{DeviceSpec, SpecError};
use super::text::{decode, join_lines, split_lines, NotText, RawLine};

/// The fewest fields an entry may have: device, mount point, type, options.
const MIN_FIELDS: usize = 4;
/// The most fields an entry may have: the four plus dump frequency and fsck pass.
const MAX_FIELDS: usize = 6;

/// Why an fstab cannot be used or edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FstabError {
    /// A NUL byte: binary or damaged data.
    #[error(
        "fstab contains a NUL byte at offset {offset}; it looks like a damaged or binary file"
    )]
    NulByte { offset: usize },
    /// Not UTF-8 text.
    #[error(
        "fstab is not valid UTF-8 text (the problem starts at byte {offset}); it looks damaged"
    )]
    NotUtf8 { offset: usize },
    /// An entry with fewer than four fields.
    #[error("fstab line {line} has only {found} field(s); an entry needs at least {MIN_FIELDS}: device, mount point, filesystem type and options")]
    TooFewFields { line: usize, found: usize },
    /// An entry with more than six fields.
    #[error("fstab line {line} has {found} fields, more than the {MAX_FIELDS} an entry can have; a space inside a path must be written as \\040")]
    TooManyFields { line: usize, found: usize },
    /// No entry mounts `/`.
    #[error("fstab has no entry for the mount point /; the root filesystem's entry is what the migration would update")]
    NoRootEntry,
    /// No entry mounts the requested mount point.
    #[error("fstab has no entry for the mount point {mountpoint}")]
    NoSuchMountpoint { mountpoint: String },
    /// Several entries for one mount point, so an edit would be ambiguous.
    #[error("fstab has several entries for the mount point {mountpoint} (lines {}); keep only one so it is clear which device is mounted there", lines.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(", "))]
    SeveralEntries {
        mountpoint: String,
        lines: Vec<usize>,
    },
    /// A replacement spec that cannot be written.
    #[error("{spec} cannot be written into fstab: {source}")]
    InvalidSpec { spec: String, source: SpecError },
    /// A replacement filesystem type that cannot be one field.
    #[error("{fstype:?} cannot be written into fstab as a filesystem type")]
    InvalidType { fstype: String },
}

impl From<NotText> for FstabError {
    fn from(e: NotText) -> Self {
        match e {
            NotText::Nul { offset } => FstabError::NulByte { offset },
            NotText::InvalidUtf8 { offset } => FstabError::NotUtf8 { offset },
        }
    }
}

/// One entry as read, with escapes in the spec and mount point decoded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FstabEntry {
    /// 1-based line number in the file.
    pub line: usize,
    /// First field, unescaped: `PARTUUID=…`, `/dev/sda1`, `proc`, `tmpfs`, …
    pub spec: String,
    /// Second field, unescaped (`\040` becomes a space).
    pub mountpoint: String,
    /// Third field as written.
    pub fstype: String,
    /// Fourth field as written.
    pub options: String,
    /// Fifth field (dump frequency), if present.
    pub freq: Option<String>,
    /// Sixth field (fsck pass number), if present.
    pub passno: Option<String>,
}

impl FstabEntry {
    /// The entry's device, or an error for `proc`, `tmpfs` and other
    /// non-device sources.
    pub fn device_spec(&self) -> Result<DeviceSpec, SpecError> {
        DeviceSpec::parse(&self.spec)
    }
}

/// One line and, for entries, where each field sits in it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    raw: RawLine,
    /// Byte ranges of the fields in `raw.content`; empty for comments and
    /// blank lines.
    fields: Vec<Range<usize>>,
}

/// A parsed fstab that writes back every byte it did not edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fstab {
    lines: Vec<Line>,
}

fn is_field_separator(c: char) -> bool {
    c.is_ascii_whitespace() || c == '\x0b'
}

/// Byte ranges of the whitespace-separated fields of a line.
fn field_ranges(content: &str) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let mut start: Option<usize> = None;
    for (index, c) in content.char_indices() {
        match (is_field_separator(c), start) {
            (true, Some(s)) => {
                ranges.push(s..index);
                start = None;
            }
            (false, None) => start = Some(index),
            _ => {}
        }
    }
    if let Some(s) = start {
        ranges.push(s..content.len());
    }
    ranges
}

fn is_comment_or_blank(content: &str) -> bool {
    let trimmed = content.trim_start_matches(is_field_separator);
    trimmed.is_empty() || trimmed.starts_with('#')
}

/// Decodes fstab's octal escapes (`\040` and friends); other backslashes stay.
pub fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let octal = bytes.get(index + 1..index + 4).filter(|digits| {
            bytes[index] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d))
        });
        match octal.and_then(|digits| {
            let text = std::str::from_utf8(digits).ok()?;
            u8::from_str_radix(text, 8).ok()
        }) {
            Some(byte) => {
                out.push(byte);
                index += 4;
            }
            None => {
                out.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Encodes the characters fstab cannot hold literally, as `mount` does.
pub fn escape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    for c in field.chars() {
        match c {
            ' ' => out.push_str("\\040"),
            '\t' => out.push_str("\\011"),
            '\n' => out.push_str("\\012"),
            '\\' => out.push_str("\\134"),
            other => out.push(other),
        }
    }
    out
}

impl Fstab {
    /// Parses the bytes of an fstab. Every non-comment line must have four to
    /// six fields; an empty file (or one of only comments) is valid.
    pub fn parse(bytes: &[u8]) -> Result<Fstab, FstabError> {
        let text = decode(bytes)?;
        let mut lines = Vec::new();
        for (index, raw) in split_lines(text).into_iter().enumerate() {
            let line_number = index + 1;
            let fields = if is_comment_or_blank(&raw.content) {
                Vec::new()
            } else {
                field_ranges(&raw.content)
            };
            if !fields.is_empty() && fields.len() < MIN_FIELDS {
                return Err(FstabError::TooFewFields {
                    line: line_number,
                    found: fields.len(),
                });
            }
            if fields.len() > MAX_FIELDS {
                return Err(FstabError::TooManyFields {
                    line: line_number,
                    found: fields.len(),
                });
            }
            lines.push(Line { raw, fields });
        }
        Ok(Fstab { lines })
    }

    /// All entries, in file order.
    pub fn entries(&self) -> Vec<FstabEntry> {
        self.lines
            .iter()
            .enumerate()
            .filter_map(|(index, line)| line.entry(index + 1))
            .collect()
    }

    /// The first entry mounted at `mountpoint` (compared unescaped).
    pub fn entry(&self, mountpoint: &str) -> Option<FstabEntry> {
        self.entries()
            .into_iter()
            .find(|entry| entry.mountpoint == mountpoint)
    }

    /// The entry for `/`; an error if there is none or more than one.
    pub fn root(&self) -> Result<FstabEntry, FstabError> {
        match self.single_entry("/") {
            Err(FstabError::NoSuchMountpoint { .. }) => Err(FstabError::NoRootEntry),
            other => other,
        }
    }

    /// The boot partition's entry: `/boot/firmware` (bookworm, Ubuntu) if
    /// present, else `/boot` (bullseye and older, DietPi).
    pub fn boot(&self) -> Option<FstabEntry> {
        self.entry("/boot/firmware").or_else(|| self.entry("/boot"))
    }

    /// Replaces the device of the one entry mounted at `mountpoint`, keeping
    /// the whitespace around the field and every other line unchanged.
    pub fn set_spec(&mut self, mountpoint: &str, spec: &DeviceSpec) -> Result<(), FstabError> {
        spec.validate().map_err(|source| FstabError::InvalidSpec {
            spec: spec.to_string(),
            source,
        })?;
        let entry = self.single_entry(mountpoint)?;
        let escaped = escape(&spec.to_string());
        let Some(line) = self.lines.get_mut(entry.line - 1) else {
            return Err(FstabError::NoSuchMountpoint {
                mountpoint: mountpoint.to_string(),
            });
        };
        line.replace_field(0, &escaped);
        Ok(())
    }

    /// Replaces the filesystem type of the one entry mounted at
    /// `mountpoint` (the third field), keeping the whitespace around it and
    /// every other line unchanged.
    pub fn set_type(&mut self, mountpoint: &str, fstype: &str) -> Result<(), FstabError> {
        let one_field = !fstype.is_empty()
            && !fstype.starts_with('#')
            && !fstype.contains(|c: char| c.is_whitespace() || c.is_control());
        if !one_field {
            return Err(FstabError::InvalidType {
                fstype: fstype.to_string(),
            });
        }
        let entry = self.single_entry(mountpoint)?;
        let Some(line) = self.lines.get_mut(entry.line - 1) else {
            return Err(FstabError::NoSuchMountpoint {
                mountpoint: mountpoint.to_string(),
            });
        };
        line.replace_field(2, fstype);
        Ok(())
    }

    /// The file's bytes: the original with only the edits applied.
    pub fn to_bytes(&self) -> Vec<u8> {
        let raw: Vec<RawLine> = self.lines.iter().map(|line| line.raw.clone()).collect();
        join_lines(&raw)
    }

    fn single_entry(&self, mountpoint: &str) -> Result<FstabEntry, FstabError> {
        let mut matching: Vec<FstabEntry> = self
            .entries()
            .into_iter()
            .filter(|entry| entry.mountpoint == mountpoint)
            .collect();
        match matching.len() {
            0 => Err(FstabError::NoSuchMountpoint {
                mountpoint: mountpoint.to_string(),
            }),
            1 => Ok(matching.remove(0)),
            _ => Err(FstabError::SeveralEntries {
                mountpoint: mountpoint.to_string(),
                lines: matching.iter().map(|entry| entry.line).collect(),
            }),
        }
    }
}

impl Line {
    fn field(&self, index: usize) -> Option<&str> {
        self.fields
            .get(index)
            .and_then(|range| self.raw.content.get(range.clone()))
    }

    fn entry(&self, line: usize) -> Option<FstabEntry> {
        if self.fields.is_empty() {
            return None;
        }
        Some(FstabEntry {
            line,
            spec: unescape(self.field(0)?),
            mountpoint: unescape(self.field(1)?),
            fstype: self.field(2)?.to_string(),
            options: self.field(3)?.to_string(),
            freq: self.field(4).map(str::to_string),
            passno: self.field(5).map(str::to_string),
        })
    }

    fn replace_field(&mut self, index: usize, new_text: &str) {
        if let Some(range) = self.fields.get(index).cloned() {
            self.raw.content.replace_range(range, new_text);
            self.fields = field_ranges(&self.raw.content);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOKWORM: &str = "proc                  /proc           proc  defaults          0  0\n\
PARTUUID=6c586e13-01  /boot/firmware  vfat  defaults          0  2\n\
PARTUUID=6c586e13-02  /               ext4  defaults,noatime  0  1\n\
# a swapfile is not a swap partition, no need to use  swapon|off  for that\n";

    fn parse(text: &str) -> Fstab {
        Fstab::parse(text.as_bytes()).expect("valid fstab")
    }

    fn text(fstab: &Fstab) -> String {
        String::from_utf8(fstab.to_bytes()).expect("utf-8")
    }

    #[test]
    fn round_trips() {
        for input in [
            "",
            "\n",
            BOOKWORM,
            "# only a comment",
            "LABEL=writable\t/\text4\tdefaults\t0\t1\r\n\r\n",
            "/dev/sda1 / ext4 defaults",
        ] {
            assert_eq!(text(&parse(input)), input);
        }
    }

    #[test]
    fn lists_entries() {
        let entries = parse(BOOKWORM).entries();
        assert_eq!(entries.len(), 3);
        assert_eq!(
            entries[2],
            FstabEntry {
                line: 3,
                spec: "PARTUUID=6c586e13-02".into(),
                mountpoint: "/".into(),
                fstype: "ext4".into(),
                options: "defaults,noatime".into(),
                freq: Some("0".into()),
                passno: Some("1".into()),
            }
        );
        let short = parse("tmpfs /tmp tmpfs defaults\n").entries();
        assert_eq!(short[0].freq, None);
        assert_eq!(short[0].passno, None);
    }

    #[test]
    fn root_and_boot() {
        let fstab = parse(BOOKWORM);
        assert_eq!(fstab.root().map(|e| e.line), Ok(3));
        assert_eq!(
            fstab.boot().map(|e| e.mountpoint),
            Some("/boot/firmware".into())
        );
        let bullseye =
            parse("/dev/mmcblk0p1 /boot vfat defaults 0 2\n/dev/mmcblk0p2 / ext4 defaults 0 1\n");
        assert_eq!(bullseye.boot().map(|e| e.line), Some(1));
        assert_eq!(parse("/dev/sda2 / ext4 defaults\n").boot(), None);
    }

    #[test]
    fn root_errors() {
        assert_eq!(
            parse("proc /proc proc defaults 0 0\n").root(),
            Err(FstabError::NoRootEntry)
        );
        assert_eq!(
            parse("/dev/a / ext4 defaults\n/dev/b / ext4 defaults\n").root(),
            Err(FstabError::SeveralEntries {
                mountpoint: "/".into(),
                lines: vec![1, 2]
            })
        );
    }

    #[test]
    fn entry_by_mountpoint_unescapes() {
        let fstab = parse("LABEL=my\\040disk /mnt/my\\040data ext4 defaults 0 2\n");
        let entry = fstab.entry("/mnt/my data").expect("entry");
        assert_eq!(entry.spec, "LABEL=my disk");
        assert_eq!(entry.device_spec(), Ok(DeviceSpec::Label("my disk".into())));
        assert_eq!(fstab.entry("/mnt/my\\040data"), None);
    }

    #[test]
    fn device_spec_of_pseudo_filesystems_is_an_error() {
        let fstab = parse(BOOKWORM);
        assert!(fstab.entry("/proc").expect("proc").device_spec().is_err());
    }

    #[test]
    fn set_spec_changes_only_the_first_field() {
        let mut fstab = parse(BOOKWORM);
        fstab
            .set_spec("/", &DeviceSpec::PartUuid("0a1b2c3d-02".into()))
            .expect("set spec");
        assert_eq!(text(&fstab), BOOKWORM.replace("6c586e13-02", "0a1b2c3d-02"));

        let mut tabs = parse("  /dev/mmcblk0p2\t/\text4\tdefaults\t0\t1\r\n");
        tabs.set_spec("/", &DeviceSpec::Uuid("1234".into()))
            .expect("set spec");
        assert_eq!(text(&tabs), "  UUID=1234\t/\text4\tdefaults\t0\t1\r\n");
    }

    #[test]
    fn set_spec_escapes_spaces() {
        let mut fstab = parse("/dev/sda1 /data ext4 defaults");
        fstab
            .set_spec("/data", &DeviceSpec::Label("my disk".into()))
            .expect("set spec");
        assert_eq!(text(&fstab), "LABEL=my\\040disk /data ext4 defaults");
        assert_eq!(
            fstab.entry("/data").map(|e| e.spec),
            Some("LABEL=my disk".into())
        );
    }

    #[test]
    fn set_spec_errors() {
        let spec = DeviceSpec::Path("/dev/sda2".into());
        let mut fstab = parse(BOOKWORM);
        assert_eq!(
            fstab.set_spec("/home", &spec),
            Err(FstabError::NoSuchMountpoint {
                mountpoint: "/home".into()
            })
        );
        let mut doubled = parse("/dev/a /x ext4 d\n/dev/b /x ext4 d\n");
        assert!(matches!(
            doubled.set_spec("/x", &spec),
            Err(FstabError::SeveralEntries { .. })
        ));
        assert!(matches!(
            fstab.set_spec("/", &DeviceSpec::Path("sda2".into())),
            Err(FstabError::InvalidSpec { .. })
        ));
        assert_eq!(text(&fstab), BOOKWORM);
    }

    #[test]
    fn set_type_changes_only_the_third_field() {
        let ext3 = "UUID=1234\t/\text3\tdefaults,data=journal\t0\t1\r\n# ext3 stays in a comment\n";
        let mut fstab = parse(ext3);
        fstab.set_type("/", "ext4").expect("set type");
        assert_eq!(text(&fstab), ext3.replacen("ext3", "ext4", 1));
        assert_eq!(fstab.root().unwrap().fstype, "ext4");
        for bad in ["", "ext4 auto", "#ext4"] {
            assert_eq!(
                fstab.set_type("/", bad),
                Err(FstabError::InvalidType { fstype: bad.into() })
            );
        }
        assert!(matches!(
            fstab.set_type("/home", "ext4"),
            Err(FstabError::NoSuchMountpoint { .. })
        ));
    }

    #[test]
    fn parse_errors() {
        assert_eq!(
            Fstab::parse(b"# ok\n/dev/sda1 /boot vfat\n"),
            Err(FstabError::TooFewFields { line: 2, found: 3 })
        );
        assert_eq!(
            Fstab::parse(b"/dev/sda1 /my data ext4 defaults 0 2\n"),
            Err(FstabError::TooManyFields { line: 1, found: 7 })
        );
        assert_eq!(
            Fstab::parse(b"proc /proc\0"),
            Err(FstabError::NulByte { offset: 10 })
        );
        assert_eq!(
            Fstab::parse(b"\xfe\xff"),
            Err(FstabError::NotUtf8 { offset: 0 })
        );
        let message = FstabError::TooFewFields { line: 2, found: 3 }.to_string();
        assert!(message.contains("line 2"), "{message}");
    }

    #[test]
    fn escape_and_unescape() {
        assert_eq!(escape("a b\tc\\d\ne"), "a\\040b\\011c\\134d\\012e");
        assert_eq!(unescape("a\\040b\\011c\\134d\\012e"), "a b\tc\\d\ne");
        assert_eq!(unescape("trailing\\04"), "trailing\\04");
        assert_eq!(unescape("not\\999octal"), "not\\999octal");
    }
}
