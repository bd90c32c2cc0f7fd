//! Resolution of a fan-in onto a package of many versions: `top` depends
//! on `a` and on 8,000 packages that each depend on `a >=1`, `a` having
//! 300 versions. Before requirements were merged per package and `a`
//! looked at once per round, this took 70 s.
//!
//! `cargo bench -p kpack-repo-index --bench fan_in`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kpack_repo_index::{Dependency, PackageName, Resolved, Resolver, Shard};

const REQUIRERS: usize = 8_000;
const VERSIONS: usize = 300;
const RUNS: usize = 11;

fn shard(name: &str, versions: &str) -> (PackageName, Shard) {
    let shard = Shard::parse(name, &format!("name = \"{name}\"\n{versions}")).unwrap();
    (name.parse().unwrap(), shard)
}

fn shards() -> BTreeMap<PackageName, Shard> {
    let names: Vec<String> = (0..REQUIRERS).map(|i| format!("r-{i:05}")).collect();
    let depends: Vec<String> = std::iter::once("\"a\"".to_string())
        .chain(names.iter().map(|name| format!("\"{name}\"")))
        .collect();
    let top = format!(
        "[[versions]]\nversion = \"1.0.0\"\ndepends = [{}]\n",
        depends.join(", ")
    );
    let a: String = (0..VERSIONS)
        .map(|v| format!("[[versions]]\nversion = \"1.{v}.0\"\n"))
        .collect();
    let requirer = "[[versions]]\nversion = \"1.0.0\"\ndepends = [\"a >=1\"]\n";
    [shard("top", &top), shard("a", &a)]
        .into_iter()
        .chain(names.iter().map(|name| shard(name, requirer)))
        .collect()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let shards = shards();
    let request = Dependency::any("top".parse().unwrap());
    let mut checks = 0;
    let times = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            let mut resolver = Resolver::new(std::slice::from_ref(&request));
            let Ok(Resolved::Versions(chosen)) = resolver.run(&shards) else {
                panic!("the fan-in resolves");
            };
            assert_eq!(chosen.len(), REQUIRERS + 2);
            checks = resolver.checks();
            start.elapsed()
        })
        .collect();
    println!(
        "fan-in of {REQUIRERS} requirers onto {VERSIONS} versions: median {:.1} ms (goal < 1 s), {checks} version checks",
        median(times).as_secs_f64() * 1e3
    );
}
