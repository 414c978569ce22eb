//! Link-time choices for the `strata` binary, nothing else.
//!
//! On Linux with GNU libc the binary's relative relocations are packed (`-z
//! pack-relative-relocs`, DT_RELR): at every start the loader then reads about 11 KiB of
//! them instead of a 900 KiB table, which was a megabyte of the resident memory of every
//! run (docs/book/src/measurements.md). Only when this machine's C compiler and linker
//! accept the flag (binutils 2.38+ against glibc 2.36+; an older ld that does not know it
//! makes the probe fail), and only for a native build with the default linker.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const RELR: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let target = std::env::var("TARGET").unwrap_or_default();
    let native = std::env::var("HOST").ok().as_deref() == Some(target.as_str());
    let own_linker = std::env::var_os("RUSTC_LINKER").is_some();
    if native && !own_linker && target.contains("-linux-gnu") && links_with(RELR) {
        println!("cargo:rustc-link-arg-bins={RELR}");
        // Tests check the binary really has them (tests/integration/architecture.rs).
        println!("cargo:rustc-env=STRATA_PACKED_RELOCS=1");
    }
}

/// Whether a tiny C program links with `flag`, warnings fatal (an ld that does not know
/// a `-z` keyword only warns).
fn links_with(flag: &str) -> bool {
    let Some(out) = std::env::var_os("OUT_DIR").map(|d| PathBuf::from(d).join("relr-probe")) else {
        return false;
    };
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let child = Command::new(cc)
        .args(["-x", "c", "-", "-o"])
        .arg(&out)
        .args([flag, "-Wl,--fatal-warnings"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return false;
    };
    let wrote = child
        .stdin
        .take()
        .is_some_and(|mut s| s.write_all(b"int main(void) { return 0; }\n").is_ok());
    let linked = child.wait().is_ok_and(|s| s.success());
    let _ = std::fs::remove_file(&out);
    wrote && linked
}
