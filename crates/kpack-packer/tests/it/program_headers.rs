//! The program header rule RHEL 8's kernel needs of executables
//! (rocm-systems#7937): a split executable's program header table is loaded
//! at its file offset plus the first load segment's bias, whether the
//! table grew where it was, where it was after moving the sections in its
//! way, or moved beside a load segment; still after GNU strip; an
//! executable it cannot place is refused; and `kpack-pack verify` names
//! a split executable that breaks the rule. A shared library's table moves
//! beside a segment too, and the library loads before and after strip.
//!
//! The binaries are made here with gcc: a `.hip_fatbin` of several MiB
//! (so the split cuts pages out of the file) holding one bundle, a wrapper
//! pointing at it, and a `main` (or a library function `main` calls) that
//! prints a read-only string and the wrapper's magic. A linker script can
//! put that string's section right after `.interp` (a library's build id),
//! where the surgery cannot move it, so the table has to move.

use std::path::{Path, PathBuf};
use std::process::Command;

use object::read::elf::{FileHeader, SectionHeader};
use object::{elf, LittleEndian as LE};

use crate::common::*;
use kpack_binary::bundle::build::offload_bundle;
use kpack_binary::elf::{check_program_headers, ProgramHeaderRule};
use kpack_packer::{ElfError, ImageError};

/// How the binary is linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Pie,
    NonPie,
    SharedLibrary,
}

impl Link {
    fn flags(self) -> [&'static str; 2] {
        match self {
            Link::Pie => ["-fPIE", "-pie"],
            Link::NonPie => ["-fno-pie", "-no-pie"],
            Link::SharedLibrary => ["-shared", "-fPIC"],
        }
    }

    /// Where the first load segment maps file offset 0.
    fn base(self) -> u64 {
        match self {
            Link::Pie | Link::SharedLibrary => 0,
            Link::NonPie => 0x40_0000,
        }
    }

    /// The first section after the program header table, which `.early`
    /// follows when the table has to move.
    fn first_section(self) -> &'static str {
        match self {
            Link::Pie | Link::NonPie => ".interp",
            Link::SharedLibrary => ".note.gnu.build-id",
        }
    }
}

/// Where the split puts the grown program header table, and how the
/// executable is laid out so that it must.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    /// `.interp` linked at 0x800: room after the table.
    GrowsInPlace,
    /// The usual layout: `.interp` and notes after the table move.
    GrowsAfterMovingSections,
    /// `.early`, which cannot move, right after the first section.
    MovesBesideASegment,
}

/// What `main` prints, with the wrapper's magic.
fn greeting(magic: u32) -> String {
    format!("early bytes, wrapper magic {magic:#x}\n")
}

/// The C source of the binary: `main`, or for a library the function
/// `greet`, printing the greeting.
fn c_source(link: Link) -> String {
    let function = if link == Link::SharedLibrary {
        "int greet(void)"
    } else {
        "int main(void)"
    };
    format!(
        "#include <stdint.h>\n#include <stdio.h>\n\
         __attribute__((section(\".early\"), used)) static const char early[] = \"early bytes\";\n\
         extern const struct {{ uint32_t magic; uint32_t version; const void *bundle; void *reserved; }} kpack_wrapper;\n\
         {function} {{ printf(\"%s, wrapper magic %#x\\n\", early, (unsigned) kpack_wrapper.magic); return 0; }}\n"
    )
}

/// Links `dir/name`: [`Link`], laid out for [`Table`], `extra` flags
/// passed to gcc.
fn executable(dir: &Path, name: &str, (link, table): (Link, Table), extra: &[&str]) -> PathBuf {
    let code: Vec<u8> = (0..6 << 20).map(|i: u32| (i % 251) as u8 | 1).collect();
    let bundle = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1100", &code)]);
    let bundle_path = dir.join(format!("{name}.bundle"));
    fs_err::write(&bundle_path, bundle).unwrap();
    let assembly = dir.join(format!("{name}.s"));
    fs_err::write(
        &assembly,
        format!(
            ".section .hip_fatbin,\"a\",@progbits\n.p2align 12\n.Lbundle:\n.incbin \"{}\"\n\
             .section .hipFatBinSegment,\"aw\",@progbits\n.p2align 3\n\
             .globl kpack_wrapper\n.hidden kpack_wrapper\nkpack_wrapper:\n\
             .long 0x48495046\n.long 1\n.quad .Lbundle\n.quad 0\n\
             .section .note.GNU-stack,\"\",@progbits\n",
            bundle_path.display()
        ),
    )
    .unwrap();
    let main = dir.join(format!("{name}.c"));
    fs_err::write(&main, c_source(link)).unwrap();
    let output = dir.join(name);
    let mut cc = kpack_test_support::tool("cc");
    cc.args(["-g", "-o"])
        .arg(&output)
        .args(link.flags())
        .args(extra);
    match table {
        Table::GrowsInPlace => {
            cc.arg(format!(
                "-Wl,--section-start=.interp={:#x}",
                link.base() + 0x800
            ));
        }
        Table::GrowsAfterMovingSections => {}
        Table::MovesBesideASegment => {
            let script = dir.join(format!("{name}.ld"));
            fs_err::write(
                &script,
                format!(
                    "SECTIONS {{ .early : {{ KEEP(*(.early)) }} }} INSERT AFTER {};\n",
                    link.first_section()
                ),
            )
            .unwrap();
            cc.arg(format!("-Wl,-T,{}", script.display()));
        }
    }
    run(cc.arg(&main).arg(&assembly));
    output
}

/// `e_phoff` of the ELF file at `path` and the address of its `.interp`.
fn table_and_interpreter(path: &Path) -> (u64, u64) {
    let data = fs_err::read(path).unwrap();
    let header = elf::FileHeader64::<LE>::parse(&*data).unwrap();
    let sections = header.sections(LE, &*data).unwrap();
    let (_, interp) = sections.section_by_name(LE, b".interp").unwrap();
    (header.e_phoff(LE), interp.sh_addr(LE))
}

/// Runs `path`, which must succeed; its standard output.
fn started(path: &Path) -> String {
    run(&mut Command::new(path))
}

/// Asserts the rule holds for the executable at `path`.
fn assert_rule_holds(path: &Path) {
    let data = fs_err::read(path).unwrap();
    assert_eq!(
        check_program_headers(&data),
        Ok(ProgramHeaderRule::Holds),
        "{}",
        path.display()
    );
}

/// Splits the executable `(link, table)`, checks the rule and that the
/// table went where `table` says, runs it, strips it with GNU strip and
/// checks and runs it again; `kpack-pack verify` passes both.
fn check(dir: &Path, (link, table): (Link, Table)) {
    let name = format!("{link:?}-{table:?}").to_lowercase();
    let input = executable(dir, &name, (link, table), &[]);
    assert_rule_holds(&input);
    assert_eq!(started(&input), greeting(0x4849_5046));

    let out = dir.join(format!("split-{name}"));
    run(kpack_pack().arg("split").arg(&input).arg("-o").arg(&out));
    let host = out.join(&name);
    assert!(
        fs_err::metadata(&host).unwrap().len() < 1 << 20,
        "{name}: the device code left the file"
    );
    let (phoff, interp) = table_and_interpreter(&input);
    let (new_phoff, new_interp) = table_and_interpreter(&host);
    let layout = match (new_phoff != phoff, new_interp != interp) {
        (false, false) => Table::GrowsInPlace,
        (false, true) => Table::GrowsAfterMovingSections,
        (true, _) => Table::MovesBesideASegment,
    };
    assert_eq!(layout, table, "{name}: where the table went");
    assert_rule_holds(&host);
    assert_eq!(health_warnings(&host), Vec::<String>::new(), "{name}");
    assert_eq!(started(&host), greeting(0x4b50_4948), "{name}");

    let stripped = out.join(format!("{name}-stripped"));
    strip_copy(&host, &stripped);
    assert_rule_holds(&stripped);
    assert_eq!(table_and_interpreter(&stripped).0, new_phoff, "{name}");
    assert_eq!(health_warnings(&stripped), Vec::<String>::new(), "{name}");
    assert_eq!(started(&stripped), greeting(0x4b50_4948), "{name}");
    let verified = run(kpack_pack().arg("verify").arg(&out));
    assert!(verified.contains(", 0 problems"), "{name}: {verified}");
}

#[test]
fn a_moved_table_keeps_the_rule_through_gnu_strip() {
    let work = tempfile::tempdir().unwrap();
    for link in [Link::Pie, Link::NonPie] {
        check(work.path(), (link, Table::MovesBesideASegment));
    }
}

#[test]
fn a_table_grown_in_place_keeps_the_rule_through_gnu_strip() {
    let work = tempfile::tempdir().unwrap();
    for link in [Link::Pie, Link::NonPie] {
        for table in [Table::GrowsInPlace, Table::GrowsAfterMovingSections] {
            check(work.path(), (link, table));
        }
    }
}

/// A shared library's table moves beside a load segment too (not a rule
/// old kernels need of it, but where GNU strip leaves it): the library
/// loads through ld.so before and after strip.
#[test]
fn a_shared_library_whose_table_moves_loads_before_and_after_gnu_strip() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let name = "libearly.so";
    let input = executable(
        dir,
        name,
        (Link::SharedLibrary, Table::MovesBesideASegment),
        &[],
    );
    let app = dir.join("app");
    let app_source = dir.join("app.c");
    fs_err::write(
        &app_source,
        "int greet(void);\nint main(void) { return greet(); }\n",
    )
    .unwrap();
    run(kpack_test_support::tool("cc")
        .arg("-o")
        .arg(&app)
        .arg(&app_source)
        .arg(format!("-L{}", dir.display()))
        .arg(format!("-l:{name}")));
    let greeting_with =
        |library_dir: &Path| run(Command::new(&app).env("LD_LIBRARY_PATH", library_dir));
    assert_eq!(greeting_with(dir), greeting(0x4849_5046));

    let out = dir.join("split");
    run(kpack_pack().arg("split").arg(&input).arg("-o").arg(&out));
    let host = out.join(name);
    let phoff = |path: &Path| {
        let data = fs_err::read(path).unwrap();
        elf::FileHeader64::<LE>::parse(&*data).unwrap().e_phoff(LE)
    };
    assert_ne!(phoff(&host), phoff(&input), "the table moved");
    assert_eq!(health_warnings(&host), Vec::<String>::new());
    assert_eq!(greeting_with(&out), greeting(0x4b50_4948));

    let stripped_dir = dir.join("stripped");
    fs_err::create_dir(&stripped_dir).unwrap();
    let stripped = stripped_dir.join(name);
    strip_copy(&host, &stripped);
    assert_eq!(phoff(&stripped), phoff(&host));
    assert_eq!(health_warnings(&stripped), Vec::<String>::new());
    assert_eq!(greeting_with(&stripped_dir), greeting(0x4b50_4948));
    assert_eq!(
        check_program_headers(&fs_err::read(&stripped).unwrap()),
        Ok(ProgramHeaderRule::NotAnExecutable)
    );
}

/// With `-z noseparate-code` the first load segment runs on into the
/// code: there is no padding after it for the table, and an executable
/// is refused rather than written with its table anywhere else.
#[test]
fn an_executable_with_nowhere_to_put_its_table_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let input = executable(
        work.path(),
        "joined",
        (Link::Pie, Table::MovesBesideASegment),
        &["-Wl,-z,noseparate-code"],
    );
    let data = fs_err::read(&input).unwrap();
    let error = match kpack_packer::split::split_binary(&data, "joined", vec![]) {
        Err(error) => error,
        Ok(split) => panic!("split as {:?}", split.map(|split| split.layout)),
    };
    assert!(
        matches!(
            error,
            ImageError::Elf(ElfError::NoRoomForProgramHeaders { .. })
        ),
        "{error}"
    );
    assert!(error.to_string().contains("rocm-systems#7937"), "{error}");
}

/// Makes the `PT_PHDR` entry of the ELF file at `path` claim the table is
/// loaded a page higher than it is.
fn misplace_program_headers(path: &Path) {
    let mut data = fs_err::read(path).unwrap();
    let header = elf::FileHeader64::<LE>::parse(&*data).unwrap();
    let index = header
        .program_headers(LE, &*data)
        .unwrap()
        .iter()
        .position(|p| p.p_type.get(LE) == elf::PT_PHDR)
        .expect("a PT_PHDR entry");
    let at = header.e_phoff(LE) as usize + index * size_of::<elf::ProgramHeader64<LE>>();
    let (phdr, _) =
        object::pod::from_bytes_mut::<elf::ProgramHeader64<LE>>(&mut data[at..]).unwrap();
    phdr.p_vaddr.set(LE, phdr.p_vaddr.get(LE) + 0x1000);
    fs_err::write(path, data).unwrap();
}

#[test]
fn verify_names_a_split_executable_that_breaks_the_rule() {
    let context = TestContext::new();
    executable(
        context.path(),
        "app",
        (Link::Pie, Table::GrowsAfterMovingSections),
        &[],
    );
    run(&mut context.kpack_pack(&["split", "app", "-o", "out"]));
    run(&mut context.kpack_pack(&["verify", "out"]));
    misplace_program_headers(&context.path().join("out/app"));
    insta::assert_snapshot!(context.run(&mut context.kpack_pack(&["verify", "out"])));
}
