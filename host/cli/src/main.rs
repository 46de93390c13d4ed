//! The `pichamber` command: argument parsing (clap) and the wiring of the crates below it;
//! what each command does lives in those crates.

mod card_text;
mod cli;
mod pi_entry;

fn main() -> std::process::ExitCode {
    cli::main()
}
