//! strata: bring up a whole environment made of many Pulumi projects, in dependency order.
//!
//! `main.rs` calls [`main_with_args`]; everything else lives in the modules below.

pub mod adopt;
pub mod backend;
pub mod bundle;
pub mod cli;
pub mod commands;
pub mod display;
pub mod engine;
pub mod error;
pub mod export;
pub mod files;
pub mod gates;
pub mod kube;
pub mod pipeline;
pub mod plan;
pub mod report;
pub mod run;
pub mod secrets;
pub mod settings;
pub mod state;
pub mod trace;
pub mod util;
pub mod workspace;

use clap::Parser;

/// Parses `args`, runs the command, and returns the process exit code.
pub fn main_with_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    util::tune_malloc();
    let cli = match cli::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}
