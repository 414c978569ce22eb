//! `strata completions SHELL` and `strata man`: generated from the clap definitions, on
//! stdout.

use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::{Error, Result};

pub fn completions(shell: clap_complete::Shell) -> Result<i32> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "strata", &mut out);
    super::print(&String::from_utf8_lossy(&out))?;
    Ok(0)
}

pub fn man() -> Result<i32> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .map_err(|e| Error::failed(format!("cannot render the man page: {e}")))?;
    super::print(&String::from_utf8_lossy(&out))?;
    Ok(0)
}
