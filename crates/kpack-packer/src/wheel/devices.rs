//! What each device wheel holds: a processor's archive, and the members
//! routed to an owner by the rule trees follow ([`crate::route`]: kernel
//! databases by path, code objects by content, with their companions). A
//! processor's device wheel holds both; a sub-family's or family's
//! (`<name>-device-gfx11`) only routed members, and the extra of each of its
//! member processors requires it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kpack_binary::databases::Recognisers;
use kpack_gpu::gpus;
use kpack_gpu::{Level, Owner, Target};

use super::binaries::installed_path;
use super::reader::Checked;
use crate::archive::WrittenArchive;
use crate::route::{self, Candidate};

/// The members routed out of the host wheel, by member number: `Some` with
/// the owner that takes each.
pub fn route_members(
    checked: &[Checked],
    dist_info: &str,
    recognisers: &Recognisers,
) -> Vec<Option<Owner>> {
    let dist_info = format!("{dist_info}/");
    let paths: Vec<&Path> = checked
        .iter()
        .map(|c| Path::new(installed_path(&c.member.name)))
        .collect();
    let candidates: Vec<Candidate<'_>> = paths
        .iter()
        .zip(checked)
        .map(|(path, checked)| Candidate {
            path,
            code_object: checked.code_object.as_ref(),
        })
        .collect();
    route::route(&candidates, recognisers)
        .into_iter()
        .zip(checked)
        .map(|(routed, checked)| {
            routed
                .filter(|_| !checked.member.name.starts_with(&dist_info))
                .map(|file| file.owner)
        })
        .collect()
}

/// One device wheel's content.
#[derive(Debug)]
pub struct DeviceContent<'a> {
    pub owner: Owner,
    /// The processor's archive, for a processor's wheel with code in fat
    /// binaries.
    pub archive: Option<&'a WrittenArchive>,
    /// Routed members, by number, in wheel order.
    pub members: Vec<usize>,
    /// The targets of its archive and of its routed code objects.
    pub targets: BTreeSet<Target>,
    /// Code objects in its archive and routed ones.
    pub code_objects: usize,
}

/// The device wheels to write, by the key their names carry: a processor
/// (`gfx942`, also the archives' processors such as `gfx1250-strict`) or
/// a group (`gfx11`, `gfx12_0`).
pub fn device_contents<'a>(
    archives: &'a BTreeMap<String, WrittenArchive>,
    routes: &[Option<Owner>],
    checked: &[Checked],
) -> BTreeMap<String, DeviceContent<'a>> {
    let mut devices: BTreeMap<String, DeviceContent<'a>> = BTreeMap::new();
    for (processor, archive) in archives {
        let owner = archive.targets.first().map(Owner::of);
        let Some(owner) = owner else { continue };
        devices.insert(
            processor.clone(),
            DeviceContent {
                owner,
                archive: Some(archive),
                members: Vec::new(),
                targets: archive.targets.iter().cloned().collect(),
                code_objects: archive.code_objects,
            },
        );
    }
    for (number, owner) in routes.iter().enumerate() {
        let Some(owner) = owner else { continue };
        let device = devices
            .entry(owner.key().to_owned())
            .or_insert_with(|| DeviceContent {
                owner: owner.clone(),
                archive: None,
                members: Vec::new(),
                targets: BTreeSet::new(),
                code_objects: 0,
            });
        device.members.push(number);
        if let Some(target) = &checked[number].code_object {
            device.targets.insert(target.clone());
            device.code_objects += 1;
        }
    }
    devices
}

/// The device extras the host wheel offers: for each processor, the keys
/// of the device wheels it needs (its own, and those of the groups it
/// belongs to), in key order. A group's member processors each get an
/// extra even without a device wheel of their own; processors packaged
/// with another (`gfx1250-strict`) are served by that one's extra.
pub fn extras(devices: &BTreeMap<String, DeviceContent<'_>>) -> BTreeMap<String, Vec<String>> {
    let mut extras: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (key, device) in devices {
        if device.owner.level() == Level::Target {
            extras.entry(key.clone()).or_default().push(key.clone());
            continue;
        }
        for member in device.owner.members() {
            let packaged_with = gpus::processor(member).and_then(|p| p.packaged_with);
            if packaged_with.is_none() {
                extras
                    .entry(member.to_owned())
                    .or_default()
                    .push(key.clone());
            }
        }
    }
    for keys in extras.values_mut() {
        keys.sort();
        keys.dedup();
    }
    extras
}
