//! Gives the shared library its ELF soname, as the reference runtime has.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librocm_kpack.so.0");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
