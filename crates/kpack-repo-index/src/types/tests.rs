//! The values' parsing and spelling.

use super::*;

#[test]
fn a_hashing_reader_sees_what_a_copy_moves() {
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut hashing = HashingReader::new(&data[..]);
    let mut copied = Vec::new();
    std::io::copy(&mut hashing, &mut copied).unwrap();
    assert_eq!(copied, data);
    assert_eq!(hashing.finish(), (Sha256::of(&data), data.len() as u64));
    assert_eq!(
        Sha256::of_reader(&data[..]).unwrap(),
        (Sha256::of(&data), 300_000)
    );
}

#[test]
fn a_resumed_hashing_writer_hashes_the_whole_file_but_writes_only_the_rest() {
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let (existing, rest) = data.split_at(123_457);
    let mut writer = HashingWriter::resume(Vec::new(), existing).unwrap();
    std::io::Write::write_all(&mut writer, rest).unwrap();
    assert_eq!(writer.size(), 300_000);
    let (sha256, size, written) = writer.finish();
    assert_eq!((sha256, size), (Sha256::of(&data), 300_000));
    assert_eq!(written, rest);
}

#[test]
fn package_names_are_path_safe() {
    for good in ["rocm-blas", "rocm.core_2", "0ad"] {
        assert!(good.parse::<PackageName>().is_ok(), "{good}");
    }
    for bad in ["", "Rocm", "-x", "a/b", "..", "a b", "rocm/../x"] {
        assert!(bad.parse::<PackageName>().is_err(), "{bad}");
    }
}

#[test]
fn components_are_names_and_kernels_is_the_default() {
    let tensile: Component = "tensile".parse().unwrap();
    assert_eq!(tensile.as_str(), "tensile");
    assert!(!tensile.is_default());
    assert_eq!("kernels".parse::<Component>().unwrap(), Component::KERNELS);
    assert!(Component::KERNELS.is_default());
    for good in ["hipblaslt", "aotriton-0.9", "miopen_db"] {
        assert!(good.parse::<Component>().is_ok(), "{good}");
    }
    for bad in ["", "Tensile", "-x", "a/b", "a b", ".."] {
        assert!(bad.parse::<Component>().is_err(), "{bad}");
    }
}

#[test]
fn listed_names_are_targets_or_families() {
    let listed = |text: &str| text.parse::<Listed>().unwrap();
    for target in [
        "gfx90a:xnack-",
        "gfx1100",
        "gfx11-generic",
        "gfx10-3-generic",
        "gfx1250-strict",
        "gfx1250-strict:xnack-",
    ] {
        assert!(matches!(listed(target), Listed::Target(_)), "{target}");
        assert_eq!(listed(target).to_string(), target);
    }
    for family in ["gfx110X-dgpu", "gfx94x", "gfx90X-all", "mi300"] {
        assert_eq!(listed(family), Listed::Family(family.to_owned()));
    }
    assert_eq!(
        listed("gfx90a:xnack-:sramecc+").to_string(),
        "gfx90a:sramecc+:xnack-"
    );
    for bad in ["", "gfx110X-dgpu:xnack+", "gfx90a:xnack", "a b"] {
        assert!(bad.parse::<Listed>().is_err(), "{bad}");
    }
}

#[test]
fn sha256_round_trips_as_hex() {
    let digest = Sha256::of(b"abc");
    let text = digest.to_string();
    assert_eq!(
        text,
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(text.parse::<Sha256>().unwrap(), digest);
    assert!(text.to_uppercase().parse::<Sha256>().is_err());
    assert!(text[..63].parse::<Sha256>().is_err());
}

#[test]
fn dependencies_parse_name_and_requirement() {
    let dependency: Dependency = "rocm-core >=5.5, <6".parse().unwrap();
    assert_eq!(dependency.name.as_str(), "rocm-core");
    assert!(dependency
        .requirement
        .matches(&semver::Version::new(5, 7, 0)));
    assert!(!dependency
        .requirement
        .matches(&semver::Version::new(6, 0, 0)));
    assert_eq!(dependency.to_string(), "rocm-core >=5.5, <6");
    let any: Dependency = "rocm-core".parse().unwrap();
    assert_eq!(any.to_string(), "rocm-core");
    assert!("rocm-core >= banana".parse::<Dependency>().is_err());
    assert!("Bad>=1".parse::<Dependency>().is_err());
}

#[test]
fn exact_and_at_least_are_the_requirements_they_spell() {
    let name: PackageName = "rocm-rand".parse().unwrap();
    let version: semver::Version = "5.3.3-rc.1+build.7".parse().unwrap();
    let exact = Dependency::exact(name.clone(), &version);
    assert_eq!(exact.requirement, "=5.3.3-rc.1".parse().unwrap());
    assert_eq!(exact.to_string(), "rocm-rand =5.3.3-rc.1");
    let at_least = Dependency::at_least(name.clone(), &version);
    assert_eq!(at_least.requirement, ">=5.3.3-rc.1".parse().unwrap());
    assert_eq!(Dependency::any(name), "rocm-rand".parse().unwrap());
}

#[test]
fn encodings_are_known_or_kept_by_name() {
    assert_eq!("zstd".parse::<Encoding>().unwrap(), Encoding::Zstd);
    let brotli: Encoding = "br".parse().unwrap();
    assert_eq!(brotli, Encoding::Unknown("br".into()));
    assert!(!brotli.is_known() && Encoding::Zstd.is_known());
    assert_eq!(brotli.to_string(), "br");
    for bad in ["", "Zstd", "../x", "a b"] {
        assert!(bad.parse::<Encoding>().is_err(), "{bad:?}");
    }
}
