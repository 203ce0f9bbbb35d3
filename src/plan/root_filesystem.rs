//! The source root's filesystem type, and what the copy's boot files must
//! say of it. The copy's root is always made by mkfs.ext4: an ext4 root
//! moves as it is, an ext2 or ext3 one too (ext4 mounts what they have),
//! its `/` line's type and `rootfstype=` turned to `ext4`. Any other root
//! (btrfs on Fedora and openSUSE, f2fs, xfs, a RAM overlay) is refused
//! while planning, for `migrate` and `sync` alike: a copy that still names
//! its old type anywhere (fstab's type and options, `rootfstype=`, btrfs's
//! subvolumes and the mount points they back, the initramfs's modules)
//! cannot mount its root, and with no trial boot nothing rolls that back.
//!
//! What the root is comes from the mount table first (what is mounted at
//! the source root), then from what its files declare: fstab's `/` line,
//! cmdline.txt's `rootfstype=`, and Debian's
//! `/etc/default/raspi-extra-cmdline`, which raspi-firmware writes into
//! cmdline.txt on every kernel update.

use super::Reason;
use crate::bootcfg::{Cmdline, FstabEntry};
use crate::system::System;
use std::path::Path;

/// The one code of every refusal here.
pub const CODE: &str = "source-root-filesystem";

/// The type every copy's root has.
pub const COPY_TYPE: &str = "ext4";

/// Debian's extra kernel arguments, appended to the cmdline.txt that
/// raspi-firmware writes on every kernel or initramfs update.
pub const RASPI_EXTRA_CMDLINE: &str = "/etc/default/raspi-extra-cmdline";

/// What the copy's boot files change so they name its ext4 root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RootType {
    /// The root's type when it is ext2 or ext3 (mounted so, or declared
    /// so), which the copy's files stop saying.
    pub(crate) older_ext: Option<String>,
    /// fstab's `/` line names ext2 or ext3: its type becomes `ext4`.
    pub(crate) fstab_to_ext4: bool,
    /// cmdline.txt's `rootfstype=` names ext2 or ext3: it becomes `ext4`.
    pub(crate) rootfstype_to_ext4: bool,
}

impl RootType {
    /// What the plan says of a root that changes type, when it does.
    pub(crate) fn note(&self) -> Option<String> {
        let mut said = Vec::new();
        if self.fstab_to_ext4 {
            said.push("its fstab's / line");
        }
        if self.rootfstype_to_ext4 {
            said.push("the command line's rootfstype=");
        }
        let files = format!("{} say{} ext4", said.join(" and "), plural(&said));
        match (self.older_ext.as_deref(), said.is_empty()) {
            (Some(was), true) => Some(format!(
                "this system's root filesystem is {was}; the copy's is ext4, which mounts everything {was} has \
                 (its mount options too)"
            )),
            (Some(was), false) => Some(format!(
                "this system's root filesystem is {was}; the copy's is ext4, which mounts everything {was} has \
                 (its mount options too), and {files}"
            )),
            (None, false) => Some(format!(
                "the copy's root is ext4, as this one is: {files} where this system's files name ext2 or ext3"
            )),
            (None, true) => None,
        }
    }
}

fn plural(said: &[&str]) -> &'static str {
    match said.len() {
        1 => "s",
        _ => "",
    }
}

/// How a type (or a comma-separated list, as fstab and `rootfstype=` take
/// one) stands to the copy's ext4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// ext4, or fstab's `auto`: the copy needs nothing changed.
    Ext4,
    /// ext2 or ext3: the copy names ext4 instead.
    OlderExt,
    /// Anything else: the copy cannot be this.
    Other,
}

fn kind(types: &str) -> Kind {
    let kinds: Vec<Kind> = types
        .split(',')
        .map(|t| match t.trim() {
            "ext4" | "auto" => Kind::Ext4,
            "ext2" | "ext3" => Kind::OlderExt,
            _ => Kind::Other,
        })
        .collect();
    if kinds.contains(&Kind::Other) {
        Kind::Other
    } else if kinds.contains(&Kind::OlderExt) {
        Kind::OlderExt
    } else {
        Kind::Ext4
    }
}

/// One place a filesystem type of the root is written down.
struct Declared {
    /// How a person finds it: `/etc/fstab's / line says btrfs`.
    says: String,
    types: String,
    /// The copy's version of it is edited (fstab, cmdline.txt), rather
    /// than copied as it is.
    edited: bool,
}

/// The source root's filesystem type checked: what the copy's files
/// change, or the refusal of a root that cannot become ext4.
pub(crate) fn check_root_type(
    system: &System,
    root_entry: Option<&FstabEntry>,
    cmdline: &Cmdline,
) -> Result<RootType, Reason> {
    let root_dir = &system.source.root_dir;
    let mounted = system.source.root_fstype.as_deref();
    let declared = declared(system, root_dir, root_entry, cmdline);
    if let Some(mounted) = mounted.filter(|t| kind(t) == Kind::Other) {
        return Err(not_ext(mounted, root_dir, None));
    }
    // Nothing mounted says what it is (an unpacked tree): its files do.
    if mounted.is_none() {
        let found = declared
            .iter()
            .find(|d| d.edited && kind(&d.types) == Kind::Other);
        if let Some(found) = found {
            let named = found
                .types
                .split(',')
                .find(|t| kind(t) == Kind::Other)
                .unwrap_or(&found.types);
            return Err(not_ext(named, root_dir, Some(&found.says)));
        }
    }
    let wrong: Vec<&Declared> = declared
        .iter()
        .filter(|d| match kind(&d.types) {
            Kind::Other => true,
            Kind::OlderExt => !d.edited,
            Kind::Ext4 => false,
        })
        .collect();
    if !wrong.is_empty() {
        return Err(names_another_type(&wrong, root_dir, mounted));
    }
    let older = |types: &str| kind(types) == Kind::OlderExt;
    let fstab_to_ext4 = root_entry.is_some_and(|e| older(&e.fstype));
    let rootfstype_to_ext4 = rootfstypes(cmdline).is_some_and(|t| older(&t));
    // What is mounted is what the root is; an unpacked tree is what its
    // files say.
    let older_ext = match mounted {
        Some(mounted) => older(mounted).then(|| mounted.to_string()),
        None => declared
            .iter()
            .flat_map(|d| d.types.split(','))
            .find(|t| older(t))
            .map(str::to_string),
    };
    Ok(RootType {
        older_ext,
        fstab_to_ext4,
        rootfstype_to_ext4,
    })
}

/// Where the source's files write down its root's type.
fn declared(
    system: &System,
    root_dir: &Path,
    root_entry: Option<&FstabEntry>,
    cmdline: &Cmdline,
) -> Vec<Declared> {
    let mut found = Vec::new();
    if let Some(entry) = root_entry {
        found.push(Declared {
            says: format!("/etc/fstab's / line says {}", entry.fstype),
            types: entry.fstype.clone(),
            edited: true,
        });
    }
    if let Some(types) = rootfstypes(cmdline) {
        found.push(Declared {
            says: format!("cmdline.txt says rootfstype={types}"),
            types: types.to_string(),
            edited: true,
        });
    }
    let extra = system
        .host
        .path(root_dir.join(RASPI_EXTRA_CMDLINE.trim_start_matches('/')));
    let extra = std::fs::read(extra)
        .ok()
        .and_then(|bytes| Cmdline::parse(&bytes).ok());
    if let Some(types) = extra.as_ref().and_then(rootfstypes) {
        found.push(Declared {
            says: format!(
                "{RASPI_EXTRA_CMDLINE} says rootfstype={types} (Debian's raspi-firmware writes it into \
                 cmdline.txt on every kernel update)"
            ),
            types: types.to_string(),
            edited: false,
        });
    }
    found
}

/// Every type the command line's `rootfstype=` arguments name, as one
/// list (the kernel takes the last, and the copy's edit leaves one).
fn rootfstypes(cmdline: &Cmdline) -> Option<String> {
    let types: Vec<&str> = cmdline
        .kernel_arguments()
        .filter_map(|arg| arg.strip_prefix("rootfstype="))
        .map(|value| value.trim_matches('"'))
        .collect();
    (!types.is_empty()).then(|| types.join(","))
}

/// The refusal of a root that is not ext2, ext3 or ext4: `fstype` as
/// mounted, or as `declared` says.
fn not_ext(fstype: &str, root_dir: &Path, declared: Option<&str>) -> Reason {
    let how = declared
        .map(|says| format!(" ({says})"))
        .unwrap_or_default();
    let needs = match fstype {
        "btrfs" => {
            "its subvolumes and the other mount points they back, fstab's type and options (subvol=), \
             the command line's rootfstype= and rootflags=, and the initramfs's filesystem modules"
        }
        _ => "fstab's type and options, the command line's rootfstype=, and the initramfs's filesystem modules",
    };
    let hint = match fstype {
        "btrfs" => {
            "keep it on btrfs and move it with btrfs's own tools (btrfs send and receive onto a btrfs on the \
             new drive, then its fstab, cmdline.txt and initramfs by hand), or write your distribution's image \
             for the Pi to the new drive and bring your data across"
        }
        "overlay" => {
            "this is a read-only root under a RAM overlay (Raspberry Pi OS's Overlay File System): turn the \
             overlay off (sudo raspi-config, Performance Options, Overlay File System), reboot, and plan again"
        }
        _ => {
            "write your distribution's image for the Pi to the new drive and bring your data across: pimigrate \
             moves ext4, ext3 and ext2 roots only"
        }
    };
    Reason::new(
        CODE,
        format!(
            "the root filesystem ({}) is {fstype}{how}: pimigrate makes the copy's root ext4, and a copy of \
             this {fstype} root boots only with {needs} all changed to match, which pimigrate does not do",
            root_dir.display()
        ),
    )
    .hint(hint)
}

/// The refusal of files that name a type the copy's ext4 root is not,
/// where the root itself could move.
fn names_another_type(wrong: &[&Declared], root_dir: &Path, mounted: Option<&str>) -> Reason {
    let says: Vec<&str> = wrong.iter().map(|d| d.says.as_str()).collect();
    let root = match mounted {
        Some(mounted) => format!(
            "the root filesystem ({}) is {mounted}, and its copy is ext4",
            root_dir.display()
        ),
        None => "the copy's root is ext4".to_string(),
    };
    Reason::new(
        CODE,
        format!(
            "{}, but {root}: a kernel or mount told another type cannot mount it",
            says.join(", and ")
        ),
    )
    .hint(
        "make it say ext4, or take rootfstype= out (the kernel finds the type by itself), then plan again",
    )
}

#[cfg(test)]
mod tests {
    //! The decision on the Pi 4 fixture machine (an ext4 root mounted at
    //! `/`), its mount table and files changed as each case has them.
    use super::*;
    use crate::bootcfg::Fstab;

    fn pi4() -> System {
        crate::system::inspect_fixture("pi4").1
    }

    const EXT4_FSTAB: &str = "PARTUUID=6c586e13-02  /  ext4  defaults,noatime  0  1\n";
    const CMDLINE: &str = "console=tty1 root=PARTUUID=6c586e13-02 rootfstype=ext4 rootwait\n";

    fn decide(system: &System, fstab: &str, cmdline: &str) -> Result<RootType, Reason> {
        let fstab = Fstab::parse(fstab.as_bytes()).unwrap();
        let cmdline = Cmdline::parse(cmdline.as_bytes()).unwrap();
        check_root_type(system, fstab.root().ok().as_ref(), &cmdline)
    }

    fn mounted(fstype: Option<&str>) -> System {
        let mut system = pi4();
        system.source.root_fstype = fstype.map(str::to_string);
        system
    }

    #[test]
    fn an_ext4_root_moves_as_it_is() {
        assert_eq!(decide(&pi4(), EXT4_FSTAB, CMDLINE), Ok(RootType::default()));
        let auto = EXT4_FSTAB.replace("ext4", "auto");
        let bare = "console=tty1 root=PARTUUID=6c586e13-02 rootwait\n";
        assert_eq!(decide(&pi4(), &auto, bare), Ok(RootType::default()));
        assert_eq!(RootType::default().note(), None);
    }

    #[test]
    fn an_ext3_or_ext2_root_is_carried_through_as_ext4() {
        let ext3 = mounted(Some("ext3"));
        let fstab = EXT4_FSTAB.replace("ext4", "ext3");
        let cmdline = CMDLINE.replace("rootfstype=ext4", "rootfstype=ext3");
        let carried = decide(&ext3, &fstab, &cmdline).unwrap();
        assert_eq!(
            carried,
            RootType {
                older_ext: Some("ext3".into()),
                fstab_to_ext4: true,
                rootfstype_to_ext4: true,
            }
        );
        let note = carried.note().unwrap();
        assert!(
            note.starts_with("this system's root filesystem is ext3;"),
            "{note}"
        );
        assert!(
            note.ends_with("fstab's / line and the command line's rootfstype= say ext4"),
            "{note}"
        );
        // Mounted as ext3 where its files say ext4 or nothing: nothing to
        // change, but the plan still says what the copy is.
        let quiet = decide(&ext3, EXT4_FSTAB, CMDLINE).unwrap();
        assert_eq!(quiet.older_ext.as_deref(), Some("ext3"));
        assert!(!quiet.fstab_to_ext4 && !quiet.rootfstype_to_ext4);
        // Mounted as ext4, its fstab says ext3: the copy's says ext4.
        let ext4 = decide(&mounted(Some("ext4")), &fstab, CMDLINE).unwrap();
        assert_eq!(ext4.older_ext, None);
        assert!(ext4.fstab_to_ext4);
        assert_eq!(
            ext4.note().unwrap(),
            "the copy's root is ext4, as this one is: its fstab's / line says ext4 where this system's files \
             name ext2 or ext3"
        );
        // An unpacked ext2 tree, known from its fstab alone.
        let ext2 = EXT4_FSTAB.replace("ext4", "ext2");
        let tree = decide(&mounted(None), &ext2, CMDLINE).unwrap();
        assert_eq!(tree.older_ext.as_deref(), Some("ext2"));
        assert!(tree.fstab_to_ext4 && !tree.rootfstype_to_ext4);
    }

    #[test]
    fn every_rootfstype_counts_not_only_the_first() {
        let twice = CMDLINE.replace("rootfstype=ext4", "rootfstype=ext4 rootfstype=ext3");
        let carried = decide(&mounted(Some("ext3")), EXT4_FSTAB, &twice).unwrap();
        assert!(carried.rootfstype_to_ext4);
        let edited = crate::plan::edits::apply(
            twice.as_bytes(),
            &[crate::plan::EditOperation::CmdlineAdd {
                arg: format!("rootfstype={COPY_TYPE}"),
            }],
        )
        .unwrap();
        assert_eq!(String::from_utf8(edited).unwrap(), CMDLINE);
    }

    #[test]
    fn a_root_mounted_as_another_filesystem_is_refused_naming_it() {
        for fstype in ["btrfs", "f2fs", "xfs", "overlay"] {
            // Whatever its files say: what is mounted decides.
            let refused = decide(&mounted(Some(fstype)), EXT4_FSTAB, CMDLINE).unwrap_err();
            assert_eq!(refused.code, CODE);
            assert!(
                refused
                    .message
                    .starts_with(&format!("the root filesystem (/) is {fstype}: ")),
                "{}",
                refused.message
            );
            assert!(
                refused.message.contains("rootfstype="),
                "{}",
                refused.message
            );
            assert!(refused.hint.is_some());
        }
        let btrfs = decide(&mounted(Some("btrfs")), EXT4_FSTAB, CMDLINE).unwrap_err();
        assert!(btrfs.message.contains("subvolumes"), "{}", btrfs.message);
        assert!(btrfs.hint.unwrap().contains("btrfs send"));
        let overlay = decide(&mounted(Some("overlay")), EXT4_FSTAB, CMDLINE).unwrap_err();
        assert!(overlay.hint.unwrap().contains("raspi-config"));
    }

    #[test]
    fn an_unpacked_tree_is_what_its_files_declare() {
        let btrfs = "UUID=1b2c / btrfs subvol=root,compress=zstd:1 0 0\n";
        let refused = decide(&mounted(None), btrfs, CMDLINE).unwrap_err();
        assert_eq!(
            refused.message.split(':').next().unwrap(),
            "the root filesystem (/) is btrfs (/etc/fstab's / line says btrfs)"
        );
        let f2fs = CMDLINE.replace("rootfstype=ext4", "rootfstype=f2fs");
        let refused = decide(&mounted(None), EXT4_FSTAB, &f2fs).unwrap_err();
        assert!(
            refused
                .message
                .starts_with("the root filesystem (/) is f2fs (cmdline.txt says rootfstype=f2fs)"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn files_that_name_another_type_than_the_mounted_one_are_refused() {
        let ext4 = mounted(Some("ext4"));
        let fstab = EXT4_FSTAB.replace("ext4", "btrfs");
        let cmdline = CMDLINE.replace("rootfstype=ext4", "rootfstype=btrfs");
        let refused = decide(&ext4, &fstab, &cmdline).unwrap_err();
        assert_eq!(refused.code, CODE);
        assert_eq!(
            refused.message,
            "/etc/fstab's / line says btrfs, and cmdline.txt says rootfstype=btrfs, but the root filesystem (/) \
             is ext4, and its copy is ext4: a kernel or mount told another type cannot mount it"
        );
    }

    #[test]
    fn a_rootfstype_raspi_firmware_would_write_back_is_refused_unless_ext4() {
        // The files read through another root: the extra arguments alone.
        let root = tempfile::tempdir().unwrap();
        let mut system = pi4();
        system.host.root = root.path().to_path_buf();
        let extra = root
            .path()
            .join(RASPI_EXTRA_CMDLINE.trim_start_matches('/'));
        std::fs::create_dir_all(extra.parent().unwrap()).unwrap();
        std::fs::write(&extra, "rootfstype=ext4 quiet\n").unwrap();
        assert!(decide(&system, EXT4_FSTAB, CMDLINE).is_ok());
        // An ext3 root whose next kernel update writes rootfstype=ext3
        // into the cmdline.txt that starts its ext4 copy.
        std::fs::write(&extra, "rootfstype=ext3\n").unwrap();
        let mut ext3 = system.clone();
        ext3.source.root_fstype = Some("ext3".into());
        let refused = decide(&ext3, EXT4_FSTAB, CMDLINE).unwrap_err();
        assert!(
            refused.message.starts_with(
                "/etc/default/raspi-extra-cmdline says rootfstype=ext3 (Debian's raspi-firmware writes"
            ),
            "{}",
            refused.message
        );
    }
}
