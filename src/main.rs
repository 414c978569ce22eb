//! The `strata` binary: parse, run, map the error to an exit code — nothing else.

fn main() {
    std::process::exit(strata::main_with_args(std::env::args_os()));
}
