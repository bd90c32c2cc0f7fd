//! MIOpen's databases in `share/miopen/db/`.
//!
//! Follows ROCm's MIOpen packages (and the per-target kernel database
//! packages `miopen-hip-<gfx>kdb`): a file is named after the GPU it was
//! tuned on, `<gfx>` then its compute unit count, in decimal after `_` up
//! to 64 CUs (`gfx906_60`, `gfx1030_36`) and in hex without a separator
//! above (`gfx90a68`, `gfx90a6e`, `gfx942130`), MIOpen's
//! `Handle::GetDbBasename`; newer kernel databases drop the CU count
//! (`gfx942.kdb`). Kinds: kernel databases `.kdb`, performance databases
//! `.db` / `.db.txt`, find databases `.HIP.fdb.txt` / `.OpenCL.fdb.txt`, and
//! the tuning models `<gfx>[_<anything>].tn.model|.ktn.model`. Hex CU counts
//! make the processor ambiguous as text, so it is the longest processor of
//! the table of GPU facts that fits.
//!
//! MIOpen's Composable Kernel solvers ship as one shared library per target
//! anywhere in the tree, `libMIOpenCK<solver>_<gfx>[-xnack±].so[.N]`
//! (`MIOpenCK<solver>_<gfx>.dll` on Windows), as ROCm's reference handler
//! describes them: each is that target's whole.

use kpack_gpu::gpus::PROCESSORS;
use kpack_gpu::Target;

use super::{target_in_name, Recogniser, Role};

/// MIOpen: component `miopen`.
#[derive(Debug, Clone, Copy, Default)]
pub struct MiOpen;

/// Database kinds, named by everything after the first `.`.
const DATABASES: [&str; 5] = ["kdb", "db", "db.txt", "HIP.fdb.txt", "OpenCL.fdb.txt"];
/// Tuning model kinds.
const MODELS: [&str; 2] = ["tn.model", "ktn.model"];

impl Recogniser for MiOpen {
    fn library(&self) -> &'static str {
        "miopen"
    }

    fn recognise(&self, path: &[&str]) -> Option<Role> {
        if let Some(role) = ck_library(path.last()?) {
            return Some(role);
        }
        let [.., "miopen", "db", file] = path else {
            return None;
        };
        let (base, kind) = file.split_once('.')?;
        let fits: fn(&str) -> bool = if DATABASES.contains(&kind) {
            is_cu_count
        } else if MODELS.contains(&kind) {
            |rest| rest.is_empty() || rest.starts_with('_')
        } else {
            return None;
        };
        let processor = PROCESSORS
            .iter()
            .filter(|p| base.strip_prefix(p.name).is_some_and(fits))
            .max_by_key(|p| p.name.len())?;
        Some(Role::Device {
            target: Target::bare(processor.name).ok()?,
            name: (*file).to_owned(),
        })
    }
}

/// A Composable Kernel solver library for one target:
/// `[lib]MIOpenCK<solver>_<target>.so[...]` or `.dll`.
fn ck_library(file: &str) -> Option<Role> {
    let name = file.strip_prefix("lib").unwrap_or(file);
    let stem_end = name.find(".so").or_else(|| name.find(".dll"))?;
    let rest = &name[stem_end..];
    if !(rest == ".dll" || rest == ".so" || rest.starts_with(".so.")) {
        return None;
    }
    let (solver, target) = name[..stem_end].rsplit_once('_')?;
    let solver = solver.strip_prefix("MIOpenCK")?;
    if solver.is_empty()
        || !solver
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return None;
    }
    Some(Role::Device {
        target: target_in_name(target)?,
        name: file.to_owned(),
    })
}

/// What may follow the processor in a database's name: nothing, `_` and a
/// decimal CU count, or a lowercase hex CU count.
fn is_cu_count(rest: &str) -> bool {
    let digits = |text: &str, hex: bool| {
        !text.is_empty()
            && text.len() <= 4
            && text.bytes().all(|b| {
                b.is_ascii_digit() || (hex && b.is_ascii_hexdigit() && b.is_ascii_lowercase())
            })
    };
    match rest.strip_prefix('_') {
        Some(decimal) => digits(decimal, false),
        None => rest.is_empty() || digits(rest, true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::databases::device;

    fn role(file: &str) -> Option<Role> {
        let path = format!("opt/rocm/share/miopen/db/{file}");
        MiOpen.recognise(&path.split('/').collect::<Vec<_>>())
    }

    #[test]
    fn routes_databases_and_models_by_processor() {
        for (file, processor) in [
            ("gfx942.kdb", "gfx942"),
            ("gfx90a68.kdb", "gfx90a"),
            ("gfx90a6e.HIP.fdb.txt", "gfx90a"),
            ("gfx90a68.db", "gfx90a"),
            ("gfx90878.db.txt", "gfx908"),
            ("gfx942130.HIP.fdb.txt", "gfx942"),
            ("gfx942e4.db.txt", "gfx942"),
            ("gfx906_60.kdb", "gfx906"),
            ("gfx906_60.OpenCL.fdb.txt", "gfx906"),
            ("gfx1030_36.db", "gfx1030"),
            ("gfx900_56.HIP.fdb.txt", "gfx900"),
            ("gfx908.tn.model", "gfx908"),
            ("gfx90a_metadata.tn.model", "gfx90a"),
            ("gfx942_3d_metadata.tn.model", "gfx942"),
            ("gfx90a_ConvHipIgemmGroupXdlops_encoder.ktn.model", "gfx90a"),
            (
                "gfx942_ConvHipIgemmGroupFwdXdlops_decoder.ktn.model",
                "gfx942",
            ),
        ] {
            assert_eq!(role(file), device(processor, file), "{file}");
        }
    }

    #[test]
    fn routes_composable_kernel_solver_libraries_by_target() {
        let ck = |path: &str| MiOpen.recognise(&path.split('/').collect::<Vec<_>>());
        for (path, target) in [
            ("lib/libMIOpenCKGroupedConv_gfx942.so", "gfx942"),
            ("lib/libMIOpenCKGroupedConv_gfx90a.so", "gfx90a"),
            (
                "lib/libMIOpenCKGroupedConv_gfx942-xnack+.so",
                "gfx942:xnack+",
            ),
            ("lib/libMIOpenCKGroupedConv_gfx942.so.1", "gfx942"),
            (
                "lib/libMIOpenCKGroupedConv_gfx1250-strict.so",
                "gfx1250-strict",
            ),
            ("lib/MIOpenCKGroupedConv_gfx942.dll", "gfx942"),
            ("bin/MIOpenCKGroupedConv_gfx942-xnack+.dll", "gfx942:xnack+"),
        ] {
            let file = path.rsplit('/').next().unwrap();
            assert_eq!(ck(path), device(target, file), "{path}");
        }
        for path in [
            "lib/libMIOpen.so",
            "lib/libMIOpenCKGroupedConv.so",
            "lib/MIOpen.dll",
            "lib/libMIOpenCKGroupedConv_gfx942:xnack+.so",
            "lib/libMIOpenCKGroupedConv_gfx942.sox",
        ] {
            assert_eq!(ck(path), None, "{path}");
        }
    }

    #[test]
    fn strict_databases_keep_their_identity() {
        for (file, target) in [
            ("gfx1250_256.db.txt", "gfx1250"),
            ("gfx1250-strict_256.db.txt", "gfx1250-strict"),
            ("gfx1250256.HIP.fdb.txt", "gfx1250"),
            ("gfx1250-strict256.HIP.fdb.txt", "gfx1250-strict"),
        ] {
            assert_eq!(role(file), device(target, file), "{file}");
        }
    }

    #[test]
    fn leaves_unknown_names_and_other_directories_alone() {
        for file in [
            "gfx908.json",
            "generic.tn.model",
            "gfx9999.kdb",
            "gfx90aXY.kdb",
            "gfx906_6x.kdb",
            "gfx90a_ConvHip.kdb",
            "readme.txt",
            "gfx942.ukdb",
        ] {
            assert_eq!(role(file), None, "{file}");
        }
        let elsewhere = "share/other/db/gfx908.kdb";
        assert_eq!(
            MiOpen.recognise(&elsewhere.split('/').collect::<Vec<_>>()),
            None
        );
    }
}
