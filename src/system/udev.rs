//! udev's database of block devices (`/run/udev/data/b<major>:<minor>`).
//!
//! A second source for filesystem and partition ids when the device itself
//! cannot be read (no permission, a fixture tree, a device we must not open).

use crate::host::Host;
use crate::system::mounts::DevNo;
use std::collections::BTreeMap;

/// The `E:` properties udev recorded for one device.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UdevProperties(BTreeMap<String, String>);

impl UdevProperties {
    pub fn read(host: &Host, devno: DevNo) -> UdevProperties {
        let path = host.path(format!("/run/udev/data/b{devno}"));
        match std::fs::read_to_string(path) {
            Ok(text) => UdevProperties::parse(&text),
            Err(_) => UdevProperties::default(),
        }
    }

    pub fn parse(text: &str) -> UdevProperties {
        UdevProperties(
            text.lines()
                .filter_map(|line| line.strip_prefix("E:"))
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<String> {
        self.0.get(key).filter(|v| !v.is_empty()).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_properties() {
        let props = UdevProperties::parse(
            "S:disk/by-uuid/x\nE:ID_FS_TYPE=ext4\nE:ID_FS_LABEL=rootfs\nE:ID_FS_UUID=\nG:systemd\n",
        );
        assert_eq!(props.get("ID_FS_TYPE").as_deref(), Some("ext4"));
        assert_eq!(props.get("ID_FS_UUID"), None);
        assert_eq!(props.get("ID_PART_ENTRY_UUID"), None);
    }
}
