//! Choosing versions and artifacts.

use std::collections::BTreeMap;

use kpack_gpu::Target;
use kpack_repo_index::{
    resolve, select_artifacts, Dependency, Explanation, Families, ResolveError, Resolved, Resolver,
    Shard,
};
use kpack_test_support::COMPONENTS_SHARD;

/// One version with a host tree and device archives of several shapes.
const SHARD: &str = r#"name = "rocm-rand"

[[versions]]
version = "5.3.3"

[[versions.artifacts]]
kind = "tree"
path = "pool/rocm-rand/5.3.3/host.tar.zst"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
size = 10000

[[versions.artifacts]]
kind = "kpack"
path = "pool/rocm-rand/5.3.3/rocm_gfx90a.kpack"
targets = ["gfx90a:xnack+", "gfx90a:xnack-"]
sha256 = "0000000000000000000000000000000000000000000000000000000000000001"
size = 1000

[[versions.artifacts]]
kind = "kpack"
path = "pool/rocm-rand/5.3.3/rocm_gfx1030.kpack"
targets = ["gfx1030"]
sha256 = "0000000000000000000000000000000000000000000000000000000000000002"
size = 500

[[versions.artifacts]]
kind = "kpack"
path = "pool/rocm-rand/5.3.3/rocm_gfx110X-all.kpack"
targets = ["gfx110X-all"]
sha256 = "0000000000000000000000000000000000000000000000000000000000000003"
size = 3000

[[versions.artifacts]]
kind = "kpack"
path = "pool/rocm-rand/5.3.3/rocm_gfx1100.kpack"
targets = ["gfx1100"]
sha256 = "0000000000000000000000000000000000000000000000000000000000000004"
size = 900

[[versions.artifacts]]
kind = "kpack"
path = "pool/rocm-rand/5.3.3/rocm_gfx11-generic.kpack"
targets = ["gfx11-generic"]
sha256 = "0000000000000000000000000000000000000000000000000000000000000005"
size = 800
"#;

fn chosen(gpus: &[&str]) -> (Vec<String>, Vec<Explanation>) {
    chosen_from(SHARD, gpus)
}

/// The file names chosen from the first version of the shard `text` for
/// `gpus`, and why.
fn chosen_from(text: &str, gpus: &[&str]) -> (Vec<String>, Vec<Explanation>) {
    let shard = Shard::parse("shard.toml", text).unwrap();
    let gpus: Vec<Target> = gpus.iter().map(|g| Target::parse(g).unwrap()).collect();
    let selection = select_artifacts(&shard.versions[0], &gpus, &Families::builtin());
    let names = selection
        .artifacts
        .iter()
        .map(|a| a.path.as_str().rsplit('/').next().unwrap().to_owned())
        .collect();
    (names, selection.explanations)
}

#[test]
fn chooses_artifacts_per_gpu() {
    let table: &[(&[&str], &[&str])] = &[
        (
            &["gfx90a:sramecc+:xnack-"],
            &["host.tar.zst", "rocm_gfx90a.kpack"],
        ),
        (&["gfx90a:xnack+"], &["host.tar.zst", "rocm_gfx90a.kpack"]),
        (&["gfx1030"], &["host.tar.zst", "rocm_gfx1030.kpack"]),
        // A per-processor archive over the family archive holding it.
        (&["gfx1100"], &["host.tar.zst", "rocm_gfx1100.kpack"]),
        // Only the family archive serves gfx1101.
        (&["gfx1101"], &["host.tar.zst", "rocm_gfx110X-all.kpack"]),
        // No gfx1151 code: the generic target.
        (&["gfx1151"], &["host.tar.zst", "rocm_gfx11-generic.kpack"]),
        // Two GPUs of different families: the union, in index order.
        (
            &["gfx1030", "gfx90a:xnack-"],
            &["host.tar.zst", "rocm_gfx90a.kpack", "rocm_gfx1030.kpack"],
        ),
        // Nothing for this GPU: host only.
        (&["gfx942:sramecc+:xnack-"], &["host.tar.zst"]),
    ];
    for (gpus, expected) in table {
        let (names, _) = chosen(gpus);
        assert_eq!(names, *expected, "{gpus:?}");
    }
}

#[test]
fn explains_each_choice() {
    let (_, explanations) = chosen(&["gfx90a:sramecc+:xnack-"]);
    let lines: Vec<String> = explanations.iter().map(ToString::to_string).collect();
    assert!(
        lines.contains(
            &"pool/rocm-rand/5.3.3/host.tar.zst: host part, needed on every machine".to_owned()
        ),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with(
            "pool/rocm-rand/5.3.3/rocm_gfx90a.kpack: for gfx90a:sramecc+:xnack-, as gfx90a:xnack-"
        )),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("rocm_gfx1030.kpack: not needed")),
        "{lines:#?}"
    );

    let (_, explanations) = chosen(&["gfx1100"]);
    assert!(explanations.iter().any(|e| matches!(e, Explanation::Smaller { path, .. } if path.as_str().ends_with("rocm_gfx110X-all.kpack"))));

    let (_, explanations) = chosen(&["gfx942:sramecc+:xnack-"]);
    let none = explanations
        .iter()
        .find(|e| matches!(e, Explanation::NoDeviceCode { .. }))
        .unwrap()
        .to_string();
    assert!(
        none.contains("gfx942:sramecc+:xnack-: no device code"),
        "{none}"
    );
    assert!(
        none.contains("gfx90a:xnack-, gfx1030, gfx110X-all"),
        "{none}"
    );
}

/// What `gpus` choose from the shared rocBLAS-like shard (archives and
/// Tensile payloads): the file names, and why, as lines.
fn chosen_components(gpus: &[&str]) -> (Vec<String>, Vec<String>) {
    let shard = Shard::parse("shard.toml", COMPONENTS_SHARD).unwrap();
    let gpus: Vec<Target> = gpus.iter().map(|g| Target::parse(g).unwrap()).collect();
    let selection = select_artifacts(&shard.versions[0], &gpus, &Families::builtin());
    let names = selection
        .artifacts
        .iter()
        .map(|a| a.path.file_name().to_owned())
        .collect();
    let why = selection
        .explanations
        .iter()
        .map(ToString::to_string)
        .collect();
    (names, why)
}

#[test]
fn a_gpu_takes_one_artifact_of_each_component() {
    let table: &[(&[&str], &[&str])] = &[
        // The per-processor archive over the family one, and the payload.
        (
            &["gfx1100"],
            &[
                "host.tar.zst",
                "blas_gfx1100.kpack",
                "tensile-gfx1100.tar.zst",
            ],
        ),
        (
            &["gfx90a:sramecc+:xnack-"],
            &[
                "host.tar.zst",
                "blas_gfx90a.kpack",
                "tensile-gfx90a.tar.zst",
            ],
        ),
        // Two GPUs: both sets, in index order.
        (
            &["gfx90a:sramecc+:xnack-", "gfx1100"],
            &[
                "host.tar.zst",
                "blas_gfx1100.kpack",
                "blas_gfx90a.kpack",
                "tensile-gfx1100.tar.zst",
                "tensile-gfx90a.tar.zst",
            ],
        ),
        // Two GPUs of one target: each artifact once.
        (
            &["gfx1100", "gfx1100"],
            &[
                "host.tar.zst",
                "blas_gfx1100.kpack",
                "tensile-gfx1100.tar.zst",
            ],
        ),
        // Served by one component only: it still gets that one.
        (&["gfx1101"], &["host.tar.zst", "blas_gfx110X-all.kpack"]),
        (
            &["gfx942:sramecc+:xnack-"],
            &["host.tar.zst", "tensile-gfx942.tar.zst"],
        ),
        // By none: host parts only.
        (&["gfx1030"], &["host.tar.zst"]),
    ];
    for (gpus, expected) in table {
        let (names, why) = chosen_components(gpus);
        assert_eq!(names, *expected, "{gpus:?}: {why:#?}");
    }
}

#[test]
fn explanations_name_the_component() {
    let (_, why) = chosen_components(&["gfx1100"]);
    let has = |line: &str| why.iter().any(|l| l == line);
    assert!(
        has("pool/rocm-blas/5.5.1/blas_gfx1100.kpack: for gfx1100 (lists gfx1100)"),
        "{why:#?}"
    );
    assert!(
        has("pool/rocm-blas/5.5.1/tensile-gfx1100.tar.zst: for gfx1100 (tensile, lists gfx1100)"),
        "{why:#?}"
    );
    // Only an archive of the same component is smaller or not: the
    // payload, smaller than the archive, does not pass it over.
    assert!(
        has("pool/rocm-blas/5.5.1/blas_gfx110X-all.kpack: serves gfx1100 too, but pool/rocm-blas/5.5.1/blas_gfx1100.kpack is smaller"),
        "{why:#?}"
    );
    assert!(
        !why.iter()
            .any(|l| l.starts_with("pool/rocm-blas/5.5.1/blas_gfx1100.kpack: serves")),
        "{why:#?}"
    );
    // Not needed: only what serves this GPU in no component.
    let unneeded: Vec<&String> = why.iter().filter(|l| l.contains("not needed")).collect();
    assert_eq!(unneeded.len(), 3, "{why:#?}");
    for file in [
        "blas_gfx90a.kpack",
        "tensile-gfx90a.tar.zst",
        "tensile-gfx942.tar.zst",
    ] {
        assert!(
            unneeded.iter().any(|l| l.contains(file)),
            "{file}: {why:#?}"
        );
    }

    let (_, why) = chosen_components(&["gfx90a:sramecc+:xnack-"]);
    assert!(
        why.iter().any(|l| l == "pool/rocm-blas/5.5.1/tensile-gfx90a.tar.zst: for gfx90a:sramecc+:xnack-, as gfx90a (tensile, lists gfx90a; choice 4 in its order)"),
        "{why:#?}"
    );

    // A component missing for a GPU others serve is said, not a lack of
    // device code.
    let (_, why) = chosen_components(&["gfx1101"]);
    assert!(
        why.iter().any(|l| l
            == "gfx1101: no tensile in this package (it has tensile for gfx1100, gfx90a, gfx942)"),
        "{why:#?}"
    );
    assert!(
        !why.iter().any(|l| l.contains("no device code")),
        "{why:#?}"
    );

    let (_, why) = chosen_components(&["gfx1030"]);
    assert!(
        why.iter()
            .any(|l| l.starts_with("gfx1030: no device code in this package")),
        "{why:#?}"
    );
    assert!(!why.iter().any(|l| l.contains("no tensile")), "{why:#?}");
}

fn shards(
    text: &[(impl AsRef<str>, impl AsRef<str>)],
) -> BTreeMap<kpack_repo_index::PackageName, Shard> {
    text.iter()
        .map(|(name, versions)| {
            let (name, versions) = (name.as_ref(), versions.as_ref());
            let shard = Shard::parse(name, &format!("name = \"{name}\"\n{versions}")).unwrap();
            (name.parse().unwrap(), shard)
        })
        .collect()
}

fn request(name: &str, requirement: &str) -> Dependency {
    Dependency {
        name: name.parse().unwrap(),
        requirement: requirement.parse().unwrap(),
    }
}

#[test]
fn resolves_the_highest_versions_satisfying_every_requirement() {
    let repo = shards(&[
        (
            "rocm-rand",
            "[[versions]]\nversion = \"5.3.3\"\ndepends = [\"rocm-core >=5.3, <6\"]\n\
             [[versions]]\nversion = \"6.0.0\"\ndepends = [\"rocm-core >=6\"]\n",
        ),
        (
            "rocm-core",
            "[[versions]]\nversion = \"5.3.0\"\n[[versions]]\nversion = \"5.7.1\"\n[[versions]]\nversion = \"6.1.0\"\n",
        ),
    ]);
    let chosen = resolve(&repo, &[request("rocm-rand", "*")]).unwrap();
    assert_eq!(chosen[&"rocm-rand".parse().unwrap()].to_string(), "6.0.0");
    assert_eq!(chosen[&"rocm-core".parse().unwrap()].to_string(), "6.1.0");

    let chosen = resolve(&repo, &[request("rocm-rand", "^5")]).unwrap();
    assert_eq!(chosen[&"rocm-rand".parse().unwrap()].to_string(), "5.3.3");
    assert_eq!(chosen[&"rocm-core".parse().unwrap()].to_string(), "5.7.1");
}

#[test]
fn a_conflict_names_the_packages_and_requirements() {
    let repo = shards(&[
        (
            "rocm-rand",
            "[[versions]]\nversion = \"5.3.3\"\ndepends = [\"rocm-core >=5.3, <6\"]\n",
        ),
        (
            "rocm-core",
            "[[versions]]\nversion = \"5.7.1\"\n[[versions]]\nversion = \"6.1.0\"\n",
        ),
    ]);
    let error = resolve(
        &repo,
        &[request("rocm-rand", "*"), request("rocm-core", ">=6")],
    )
    .unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, ResolveError::NoVersion { .. }), "{message}");
    assert!(message.contains("rocm-core"), "{message}");
    assert!(message.contains(">=6 (from the request)"), "{message}");
    assert!(
        message.contains(">=5.3, <6 (from rocm-rand 5.3.3)"),
        "{message}"
    );
    assert!(message.contains("available: 5.7.1, 6.1.0"), "{message}");

    let error = resolve(&repo, &[request("rocm-blas", "*")]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "no package rocm-blas (required by the request)"
    );
}

/// torch-like: per-processor AOTriton payloads, and payloads AOTriton's
/// group directories make (gfx11, gfx12_0), beside the archives.
const OWNED_SHARD: &str = r#"name = "torch"

[[versions]]
version = "2.9.0"
requires-client = "0.2.0"

[[versions.artifacts]]
kind = "tree"
path = "pool/torch/2.9.0/host.tar.zst"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
size = 10000

[[versions.artifacts]]
kind = "kpack"
path = "pool/torch/2.9.0/torch_gfx1100.kpack"
targets = ["gfx1100"]
sha256 = "0000000000000000000000000000000000000000000000000000000000000001"
size = 1000

[[versions.artifacts]]
kind = "tree"
component = "aotriton"
path = "pool/torch/2.9.0/torch-gfx942-aotriton.tar.zst"
targets = ["gfx942"]
sha256 = "0000000000000000000000000000000000000000000000000000000000000002"
size = 500

[[versions.artifacts]]
kind = "tree"
component = "aotriton"
path = "pool/torch/2.9.0/torch-gfx11-aotriton.tar.zst"
owner = "gfx11"
sha256 = "0000000000000000000000000000000000000000000000000000000000000003"
size = 700

[[versions.artifacts]]
kind = "tree"
component = "aotriton"
path = "pool/torch/2.9.0/torch-gfx12_0-aotriton.tar.zst"
owner = "gfx12_0"
sha256 = "0000000000000000000000000000000000000000000000000000000000000004"
size = 600
"#;

fn chosen_owned(gpus: &[&str]) -> (Vec<String>, Vec<String>) {
    let (names, why) = chosen_from(OWNED_SHARD, gpus);
    (names, why.iter().map(ToString::to_string).collect())
}

#[test]
fn an_owned_payload_is_installed_once_when_any_gpu_belongs_to_its_owner() {
    let table: &[(&[&str], &[&str])] = &[
        (
            &["gfx1100"],
            &[
                "host.tar.zst",
                "torch_gfx1100.kpack",
                "torch-gfx11-aotriton.tar.zst",
            ],
        ),
        // Two members of gfx11: the family's payload once.
        (
            &["gfx1100", "gfx1151"],
            &[
                "host.tar.zst",
                "torch_gfx1100.kpack",
                "torch-gfx11-aotriton.tar.zst",
            ],
        ),
        (
            &["gfx1201"],
            &["host.tar.zst", "torch-gfx12_0-aotriton.tar.zst"],
        ),
        (
            &["gfx942:sramecc+:xnack-"],
            &["host.tar.zst", "torch-gfx942-aotriton.tar.zst"],
        ),
        (&["gfx90a"], &["host.tar.zst"]),
        (
            &["gfx1201", "gfx1103"],
            &[
                "host.tar.zst",
                "torch-gfx11-aotriton.tar.zst",
                "torch-gfx12_0-aotriton.tar.zst",
            ],
        ),
    ];
    for (gpus, expected) in table {
        assert_eq!(chosen_owned(gpus).0, *expected, "{gpus:?}");
    }
}

#[test]
fn owned_payloads_are_explained() {
    let (_, why) = chosen_owned(&["gfx1100", "gfx1151"]);
    insta::assert_snapshot!(why.join("\n"));
}

#[test]
fn a_version_that_needs_a_newer_client_is_refused_by_name() {
    let newer = OWNED_SHARD.replace(
        "requires-client = \"0.2.0\"",
        "requires-client = \"99.0.0\"",
    );
    let repo = |text: &str| {
        let shard = Shard::parse("torch", text).unwrap();
        BTreeMap::from([(shard.name.clone(), shard)])
    };
    let error = resolve(&repo(&newer), &[request("torch", "*")]).unwrap_err();
    assert!(matches!(error, ResolveError::NeedsNewerClient { .. }));
    insta::assert_snapshot!(error
        .to_string()
        .replace(env!("CARGO_PKG_VERSION"), "<VERSION>"));
    let current = repo(OWNED_SHARD);
    assert!(resolve(&current, &[request("torch", "*")]).is_ok());
}

/// `pkg-00000` depending on `pkg-00001` ... up to `pkg-{n-1}`, as shards.
fn chain(n: usize) -> BTreeMap<kpack_repo_index::PackageName, Shard> {
    let texts: Vec<(String, String)> = (0..n)
        .map(|i| {
            let depends = if i + 1 < n {
                format!("depends = [\"pkg-{:05} >=1\"]\n", i + 1)
            } else {
                String::new()
            };
            let versions = format!(
                "[[versions]]\nversion = \"1.0.0\"\n{depends}[[versions]]\nversion = \"0.9.0\"\n{depends}"
            );
            (format!("pkg-{i:05}"), versions)
        })
        .collect();
    shards(&texts)
}

/// Resolves `pkg-00000` as kpack-get does, handing the resolver the
/// shards of `all` it names as missing after each run: the resolver, the
/// versions, and how many shards each round named.
fn resolve_in_rounds(
    all: &BTreeMap<kpack_repo_index::PackageName, Shard>,
) -> (
    Resolver,
    BTreeMap<kpack_repo_index::PackageName, semver::Version>,
    Vec<usize>,
) {
    let mut known = BTreeMap::new();
    let mut resolver = Resolver::new(&[request("pkg-00000", "*")]);
    let mut rounds = Vec::new();
    loop {
        match resolver.run(&known).unwrap() {
            Resolved::Versions(versions) => return (resolver, versions, rounds),
            Resolved::Missing(missing) => {
                rounds.push(missing.len());
                for (name, required_by) in missing {
                    assert!(required_by.starts_with("pkg-") || required_by == "the request");
                    known.insert(name.clone(), all[&name].clone());
                }
            }
        }
    }
}

#[test]
fn a_run_names_every_missing_package_at_once() {
    let n = 2000;
    let depends: Vec<String> = (1..=n).map(|i| format!("\"pkg-{i:05} >=1\"")).collect();
    let mut texts = vec![(
        "pkg-00000".to_string(),
        format!(
            "[[versions]]\nversion = \"1.0.0\"\ndepends = [{}]\n",
            depends.join(", ")
        ),
    )];
    texts.extend((1..=n).map(|i| {
        (
            format!("pkg-{i:05}"),
            "[[versions]]\nversion = \"1.0.0\"\n".to_string(),
        )
    }));
    let all = shards(&texts);

    let (resolver, versions, rounds) = resolve_in_rounds(&all);
    // The request, then all 2000 dependencies in one round.
    assert_eq!(rounds, [1, n]);
    assert_eq!(versions.len(), n + 1);
    assert!(
        resolver.steps() <= 2 * (n + 1),
        "{} steps",
        resolver.steps()
    );
}

#[test]
fn a_chain_fetched_a_shard_per_round_resolves_in_linear_steps() {
    let n = 3000;
    let all = chain(n);
    let (resolver, versions, rounds) = resolve_in_rounds(&all);
    assert_eq!(rounds, vec![1; n]);
    assert_eq!(versions.len(), n);
    assert!(versions.values().all(|v| v.to_string() == "1.0.0"));
    // Each package looked at once when required, once when its shard came.
    assert!(resolver.steps() <= 2 * n, "{} steps", resolver.steps());
    assert_eq!(
        resolve(&all, &[request("pkg-00000", "*")]).unwrap(),
        versions
    );
}

#[test]
fn a_dependency_of_a_version_given_up_is_not_required() {
    // alpha 2 needs gone, which no repository has; beta allows only alpha 1,
    // so alpha settles on 1 and gone is never needed.
    let repo = shards(&[
        (
            "alpha",
            "[[versions]]\nversion = \"2.0.0\"\ndepends = [\"gone >=1\"]\n\
             [[versions]]\nversion = \"1.0.0\"\n",
        ),
        (
            "beta",
            "[[versions]]\nversion = \"1.0.0\"\ndepends = [\"alpha <2\"]\n",
        ),
    ]);
    let chosen = resolve(&repo, &[request("alpha", "*"), request("beta", "*")]).unwrap();
    let chosen: Vec<String> = chosen.iter().map(|(n, v)| format!("{n} {v}")).collect();
    assert_eq!(chosen, ["alpha 1.0.0", "beta 1.0.0"]);
}

#[test]
fn requirements_that_undo_each_other_do_not_settle() {
    let repo = shards(&[
        (
            "alpha",
            "[[versions]]\nversion = \"2.0.0\"\ndepends = [\"beta >=2\"]\n\
             [[versions]]\nversion = \"1.0.0\"\ndepends = [\"beta <2\"]\n",
        ),
        (
            "beta",
            "[[versions]]\nversion = \"2.0.0\"\ndepends = [\"alpha <2\"]\n\
             [[versions]]\nversion = \"1.0.0\"\n",
        ),
    ]);
    let error = resolve(&repo, &[request("alpha", "*")]).unwrap_err();
    assert_eq!(error, ResolveError::DoesNotSettle);
}

/// `top` depending on `a` and on `requirers` packages that each depend on
/// `a >=1`, `a` having `versions` versions (`0.9.0`, then `1.0.0` up).
fn fan_in(requirers: usize, versions: usize) -> BTreeMap<kpack_repo_index::PackageName, Shard> {
    let names: Vec<String> = (0..requirers).map(|i| format!("r-{i:05}")).collect();
    let depends: Vec<String> = std::iter::once("\"a\"".to_string())
        .chain(names.iter().map(|name| format!("\"{name}\"")))
        .collect();
    let mut texts = vec![(
        "top".to_string(),
        format!(
            "[[versions]]\nversion = \"1.0.0\"\ndepends = [{}]\n",
            depends.join(", ")
        ),
    )];
    let a: String = std::iter::once("0.9.0".to_string())
        .chain((0..versions - 1).map(|v| format!("1.{v}.0")))
        .map(|v| format!("[[versions]]\nversion = \"{v}\"\n"))
        .collect();
    texts.push(("a".to_string(), a));
    texts.extend(names.into_iter().map(|name| {
        let text = "[[versions]]\nversion = \"1.0.0\"\ndepends = [\"a >=1\"]\n".to_string();
        (name, text)
    }));
    shards(&texts)
}

/// Resolves `top` of [`fan_in`]: `a`'s version and the checks made.
fn resolve_fan_in(requirers: usize, versions: usize) -> (String, usize) {
    let all = fan_in(requirers, versions);
    let mut resolver = Resolver::new(&[request("top", "*")]);
    let Resolved::Versions(chosen) = resolver.run(&all).unwrap() else {
        panic!("every shard is there");
    };
    assert_eq!(chosen.len(), requirers + 2);
    assert_eq!(chosen, resolve(&all, &[request("top", "*")]).unwrap());
    (chosen[&"a".parse().unwrap()].to_string(), resolver.checks())
}

#[test]
fn a_fan_in_onto_a_package_of_many_versions_costs_linear_checks() {
    let (a, checks) = resolve_fan_in(1000, 60);
    assert_eq!(a, "1.58.0");
    // `a` is looked at once before its requirers speak and once after:
    // each version checked against the two distinct requirements, each
    // requirer's one version against its one; 1000 x 60 checks before.
    assert!(checks <= 3 * (1000 + 60), "{checks} checks");
    let (a, four_times) = resolve_fan_in(4000, 240);
    assert_eq!(a, "1.238.0");
    assert!(
        four_times <= 4 * checks + 8,
        "{four_times} checks, {checks} at a quarter"
    );
}
