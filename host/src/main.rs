fn main() -> std::process::ExitCode {
    pichamber::cli::main()
}
