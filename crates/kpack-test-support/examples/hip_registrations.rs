//! Loads each library named on the command line on Debian's real HIP
//! runtime (`libamdhip64-5`) and prints what its `__hipRegisterFatBinary`
//! answered for each of the library's wrappers.
#![allow(clippy::print_stdout)]

use kpack_test_support::real_hip::{registrations, HIPF, HIPK};

fn main() {
    for library in std::env::args_os().skip(1) {
        let library = std::path::PathBuf::from(library);
        println!("{}:", library.display());
        for (index, registration) in registrations(&library).iter().enumerate() {
            let magic = match registration.magic {
                HIPF => "HIPF (fat)".to_owned(),
                HIPK => "HIPK (split)".to_owned(),
                other => format!("{other:#010x}"),
            };
            let answer = if registration.handle {
                "registered: a handle came back"
            } else {
                "refused: a null handle, every kernel of it would fail to launch"
            };
            println!("  wrapper {index}: {magic}: {answer}");
        }
    }
}
