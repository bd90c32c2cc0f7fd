//! The mapping on the real control files of Debian 13's ROCm packages, and
//! its order checked against dpkg's own.

use std::fmt::Write as _;
use std::process::Command;

use super::*;

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/debian-13");

#[test]
fn trixie_control_files_map_to_versions_and_requirements() {
    let mut paths: Vec<_> = fs_err::read_dir(TESTDATA)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    assert!(paths.len() >= 16, "{paths:?}");
    let mut shown = String::new();
    for path in paths {
        let control = Control::parse(&fs_err::read_to_string(&path).unwrap()).unwrap();
        let package = control.package().unwrap();
        assert_eq!(path.file_stem().unwrap().to_str(), Some(package));
        let version = control.version().unwrap();
        let size = control.installed_size().unwrap().unwrap();
        let _ = writeln!(
            shown,
            "{package} {version} -> {} ({size} bytes)",
            version.to_semver().unwrap()
        );
        for group in control.depends().unwrap() {
            let mapped: Vec<String> = group
                .0
                .iter()
                .map(|relation| format!("{} {}", relation.package, relation.requirement().unwrap()))
                .collect();
            let _ = writeln!(shown, "  {group}  =>  {}", mapped.join(" | "));
        }
    }
    insta::assert_snapshot!(shown);
}

/// Whether dpkg orders `a` before `b`.
fn dpkg_less(a: &str, b: &str) -> bool {
    let status = Command::new("dpkg")
        .args(["--compare-versions", a, "lt", b])
        .status()
        .expect("running dpkg --compare-versions");
    status.success()
}

fn assert_same_order(versions: &[&str]) {
    for a in versions {
        for b in versions {
            let mapped = |v: &str| v.parse::<DebianVersion>().unwrap().to_semver().unwrap();
            assert_eq!(
                mapped(a) < mapped(b),
                dpkg_less(a, b),
                "{a} < {b}: semver {} vs {}",
                mapped(a),
                mapped(b)
            );
        }
    }
}

#[test]
fn builds_of_one_upstream_version_order_as_dpkg_orders_them() {
    assert_same_order(&[
        "5.5.1-1",
        "5.5.1-2",
        "5.5.1-10",
        "5.5.1-3",
        "5.5.1-3+b1",
        "5.5.1-3+b2",
        "5.5.1-3+b10",
        "5.5.1-6+deb13u1",
        "5.5.1-6+deb13u2",
        "5.5.1-6+deb13u10",
        "5.5.1-6",
        "5.5.1",
    ]);
    assert_same_order(&[
        "5.5.1+dfsg-7",
        "5.5.1+dfsg-7+b1",
        "5.5.1+dfsg-10",
        "5.5.1+dfsg-8",
    ]);
    assert_same_order(&[
        "6.0+git20231212.4510c28+dfsg-3",
        "6.0+git20231212.4510c28+dfsg-3+b2",
        "6.0+git20231212.4510c28+dfsg-4",
    ]);
}

#[test]
fn upstream_versions_and_release_candidates_order_as_dpkg_orders_them() {
    assert_same_order(&[
        "5.4.3-3+b1",
        "5.5.1-7",
        "5.7.1-6",
        "5.7.1-6+deb13u1",
        "6.1.2-1",
        "6.1.2~rc1-1",
        "6.1.2~rc2-1",
        "6.1.10-1",
        "6.2-1",
        "6.2.4+ds-1",
        "7.0.0~beta1-1",
    ]);
}
